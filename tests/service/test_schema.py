"""schemathesis against the OpenAPI document `runner serve` serves: no 5xx for anything it
generates, and every response conforms to the document (status code, content type, body
schema); a request that breaks the document is refused (4xx).

Bounded: every operation gets 20 schema-valid and 20 schema-breaking examples, no shrinking (the
first failing case is reported), about a minute here. Requests carry a key with every role, so
the generator reaches past authentication into each route's own validation. (Driven through
`as_strategy` rather than schemathesis' pytest plugin, whose lazy loader does not run on pytest 9.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.live_service import ENV, live_settings
from tests.support.service_harness import A, Service, free_port, loopback, serving

pytestmark = pytest.mark.slow

__all__ = ["loopback"]

EXAMPLES = 20
CHECKS = [
    not_a_server_error,
    negative_data_rejection,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("schema")
    # Live runs offered too, so their checks are fuzzed (a run accepted finds no model there).
    nowhere = f"http://127.0.0.1:{free_port()}"
    with serving(folder, max_body_bytes=4096, env=ENV, **live_settings(folder, nowhere)) as running:
        yield running


@pytest.mark.usefixtures("loopback")
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_served_api_conforms_to_its_openapi_document(
    service: Service, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    # A schema-breaking request must be refused; 413 (a body over the limit) is a refusal too.
    schema.config.checks.negative_data_rejection.expected_statuses = [
        "400", "401", "403", "404", "405", "409", "413", "422", "429",
    ]  # fmt: skip
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert {"POST /v1/runs", "GET /v1/runs/{run_id}/events", "GET /v1/approvals"} <= labels
    calls: dict[str, int] = {}
    for operation in operations:
        strategy = operation.as_strategy(generation_mode=mode)

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def exercise(case: schemathesis.Case) -> None:
            response = case.call_and_validate(
                base_url=service.url,
                # Breaking requests keep what schemathesis made of the key (it may drop it).
                headers={"Authorization": f"Bearer {A}"}
                if mode is GenerationMode.POSITIVE
                else None,
                checks=CHECKS,
                timeout=15,
            )
            calls[case.operation.label] = calls.get(case.operation.label, 0) + 1
            assert response.status_code < 500

        try:
            exercise()
        except Unsatisfiable:  # nothing to break: no parameters and no body (`GET /healthz`)
            assert mode is GenerationMode.NEGATIVE
            labels.discard(operation.label)
    assert set(calls) == labels  # every operation was called
