"""A `RunSpec` holds only what its run's header and operation keys can keep as they are: a
tenant, principal or scope that is not UTF-8 text, a context that is not JSON, or annotations
that are not plain JSON are refused when the spec is made, before anything is stored."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner import Engine, FunctionTools, Principal, RunSpec, SqliteStore, ToolResponse
from runner.base.errors import ConfigError
from runner.core.evidence import EvidenceRequirement
from runner.proof.api import list_runs
from runner.testing import FakeClock, FunctionModel, call, latest_results
from runner.tools.contracts import load_contracts
from runner.travel import TaskConstraints
from tests.support.paths import ROOT

PRINCIPAL = Principal(id="bot", scopes=frozenset({"orders.refund"}))


def _spec(**changes: Any) -> RunSpec:
    fields: dict[str, Any] = {
        "task": "refund A-1",
        "tenant": "acme",
        "principal": PRINCIPAL,
        "tools": ("refund_order",),
    }
    return RunSpec(**{**fields, **changes})


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"tenant": "\ud800x"}, "RunSpec.tenant"),
        ({"principal": Principal(id="b\udfffot", scopes=frozenset())}, "RunSpec.principal.id"),
        (
            {"principal": Principal(id="bot", scopes=frozenset({"orders.\ud800"}))},
            "RunSpec.principal.scopes",
        ),
    ],
)
def test_an_identity_that_is_not_utf8_text_is_refused(
    changes: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _spec(**changes)
    assert fragment in str(info.value) and "lone surrogate" in str(info.value)
    str(info.value).encode()  # the message itself can be printed anywhere


def test_an_identity_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"RunSpec\.tenant must be a string, not int"):
        _spec(tenant=7)


def test_a_replaced_spec_is_checked_too() -> None:
    with pytest.raises(ConfigError, match=r"RunSpec\.tenant"):
        dataclasses.replace(_spec(), tenant="\udc80")


def test_a_refused_tenant_stores_nothing(tmp_path: Path) -> None:
    """The stranger's run: its header was stored with the tenant as U+FFFD, then minting the
    write's key raised UnicodeEncodeError and the run stayed `running` for good."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    contracts = load_contracts(ROOT / "examples" / "contracts")

    async def refund(invocation: Any) -> ToolResponse:
        return ToolResponse(payload={"status": "ok", "refund_id": "R"})

    engine = Engine(
        contracts=contracts,
        toolbox=FunctionTools({"refund_order": refund}),
        store=store,
        clock=FakeClock(),
    )
    model = FunctionModel(
        lambda t, tools: "done" if latest_results(t) else call("refund_order", order_id="A-1")
    )
    with pytest.raises(ConfigError, match=r"RunSpec\.tenant"):
        engine.run_sync(_spec(tenant="\ud800x"), model)
    assert list_runs(store) == []


@pytest.mark.parametrize(
    ("context", "where"),
    [
        ({"x": float("nan")}, "/x: nan"),
        ({"x": [1, float("inf")]}, "/x/1: inf"),
        ({"x": object()}, "object"),
        ({"x": "\ud800"}, "/x: a lone surrogate"),
    ],
)
def test_a_context_that_is_not_json_is_refused(context: dict[str, Any], where: str) -> None:
    """The header keeps the context as JSON, and a replay's rules read it back from there:
    NaN was stored as null, so the replayed rules saw another context."""
    with pytest.raises(ConfigError) as info:
        _spec(context=context)
    assert str(info.value).startswith("RunSpec.context") and where in str(info.value)


def test_a_context_the_header_writes_as_json_is_kept() -> None:
    """The rules' own values (a pydantic model, a date) are written as their JSON."""
    constraints = TaskConstraints(earliest=date(2027, 3, 20))
    spec = _spec(context={"task": constraints, "on": date(2027, 3, 21), "n": 1.5})
    assert spec.context["task"] is constraints


@pytest.mark.parametrize(
    ("annotations", "where"),
    [
        ({"x": {1}}, "/x: set is not a JSON value"),
        ({"x": float("nan")}, "/x: nan"),
        ({"x": b"raw"}, "/x: bytes"),
        ({"x": {1: "one"}}, "/x: key int"),
        ({"x": date(2027, 3, 20)}, "/x: date"),
        ({"\ud800": 1}, "a lone surrogate"),
    ],
)
def test_annotations_that_are_not_plain_json_are_refused(
    annotations: dict[str, Any], where: str
) -> None:
    """Annotations are kept as they are given: a set was stored as a list, silently."""
    with pytest.raises(ConfigError) as info:
        _spec(annotations=annotations)
    assert str(info.value).startswith("RunSpec.annotations") and where in str(info.value)


def test_plain_json_annotations_are_kept_as_given() -> None:
    annotations = {"fixture": {"name": "a", "steps": [1, 2.5, None, True, {"k": "v"}]}}
    assert _spec(annotations=annotations).annotations is annotations


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"context": {"k\ud800": 1}}, "RunSpec.context is not JSON: 'utf-8' codec can't encode"),
        ({"context": {"b": b"\xff"}}, "RunSpec.context is not JSON: 'utf-8' codec can't decode"),
        ({"task": "refund \ud800"}, "RunSpec.task 'refund \\ud800' holds a lone surrogate"),
        ({"annotations": [1]}, "RunSpec.annotations are not a mapping of plain JSON"),
    ],
    ids=["surrogate key", "bytes not utf-8", "task", "annotations not a mapping"],
)
def test_what_raised_a_raw_python_error_is_a_config_error(
    changes: dict[str, Any], said: str
) -> None:
    """These raised UnicodeEncodeError, UnicodeDecodeError or TypeError (the task only once the
    run had begun)."""
    with pytest.raises(ConfigError) as refused:
        _spec(**changes)
    assert str(refused.value).startswith(said), refused.value


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"system_prompt": "Be brief \ud800"}, "RunSpec.system_prompt 'Be brief \\ud800' holds"),
        ({"name": "run \udfff"}, "RunSpec.name 'run \\udfff' holds a lone surrogate"),
        ({"credentials": {"api_key": 12345}}, "RunSpec.credentials['api_key'] must be a string"),
        ({"credentials": None}, "RunSpec.credentials must be a mapping of names to text, not None"),
        ({"credentials": {"api_key": "s3cr\ud800t"}}, "RunSpec.credentials['api_key'] holds"),
        ({"seed": 1.5}, "RunSpec.seed is a whole number or None, not 1.5"),
        ({"seed": True}, "RunSpec.seed is a whole number or None, not True"),
        ({"render_limit": 2.5}, "RunSpec.render_limit is a whole number of at least 1, not 2.5"),
    ],
    ids=["system prompt", "name", "credential not text", "credentials none",
         "credential surrogate", "seed", "bool", "render limit"],
)  # fmt: skip
def test_what_escaped_a_run_as_a_raw_error_is_refused_when_the_spec_is_made(
    changes: dict[str, Any], said: str
) -> None:
    """These escaped `Engine.run` as UnicodeEncodeError (the transcript hashes the prompt),
    TypeError (redaction measures each credential) or `StoreError: not stored` with a pydantic
    warning on stderr (a float seed). A credential is never quoted in the refusal."""
    with pytest.raises(ConfigError) as refused:
        _spec(**changes)
    assert str(refused.value).startswith(said), refused.value
    assert "s3cr" not in str(refused.value)


def _refund_engine(tmp_path: Path, **options: Any) -> Engine:
    async def refund(invocation: Any) -> ToolResponse:
        return ToolResponse(payload={"status": "ok", "refund_id": "R"})

    return Engine(
        contracts=load_contracts(ROOT / "examples" / "contracts"),
        toolbox=FunctionTools({"refund_order": refund}),
        store=SqliteStore(tmp_path / "runs.sqlite"),
        clock=FakeClock(),
        **options,
    )


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"render_limit": 0}, "Engine(render_limit=...) is a whole number of at least 1, not 0"),
        ({"render_limit": -1}, "Engine(render_limit=...) is a whole number of at least 1, not -1"),
        ({"system_prompt": "x\udfff"}, "Engine(system_prompt=...) 'x\\udfff' holds"),
        # a key's expiry past the last date Python holds overflowed mid-run
        ({"retry_horizon": timedelta(days=3_000_000)}, "Engine(retry_horizon=...) is more than 0"),
        ({"retry_horizon": timedelta(0)}, "Engine(retry_horizon=...) is more than 0"),
    ],
)
def test_an_engine_setting_no_run_could_be_replayed_under_is_refused(
    tmp_path: Path, options: dict[str, Any], said: str
) -> None:
    """`Engine(render_limit=0)` ran and stored runs that no replay, grade or resume would take
    (their header's limit is refused when read back), so a killed one stayed `running`."""
    with pytest.raises(ConfigError) as refused:
        _refund_engine(tmp_path, **options)
    assert str(refused.value).startswith(said), refused.value


def test_a_run_id_or_evidence_no_run_could_keep_is_refused_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    """A run id with a lone surrogate escaped as UnicodeEncodeError; evidence from a tool with
    no contract (a typo) was accepted and the run could only abstain, missing_evidence."""
    engine = _refund_engine(tmp_path)
    model = FunctionModel(lambda t, tools: "done")

    async def with_id() -> None:
        await engine.run(_spec(), model, run_id="a\ud800")

    with (
        pytest.raises(ConfigError, match=r"^run_id 'a\\ud800' holds a lone surrogate"),
        asyncio.Runner(loop_factory=engine.clock.loop_factory) as runner,
    ):
        runner.run(with_id())
    for tool in ("refund_ordr", "lookup_order"):  # a typo; a tool with a contract, not given
        needs = EvidenceRequirement(name="a refund", tool=tool)
        with pytest.raises(ConfigError, match=f"names tools the run is not given: {tool} "):
            engine.run_sync(_spec(required_evidence=(needs,)), model)
    assert list_runs(engine.runtime.store) == []  # type: ignore[arg-type]
