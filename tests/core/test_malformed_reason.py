"""A `malformed_result` names what broke the result schema (where, how) in its reason."""

from runner.core.observations import malformed_reason
from runner.harness.fixtures import load_fixture
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture
from tests.support.paths import FIXTURES


def test_malformed_result_records_the_schema_errors_path_and_message(
    contracts: ContractSet,
) -> None:
    fixture = load_fixture(FIXTURES / "malformed_bad_timestamp.yaml", contracts)
    store = MemoryStore()
    outcome = run_fixture(fixture, contracts, store)
    stored = store.transitions(outcome.result.run_id)
    for records in (outcome.result.transitions, stored):
        malformed = [r for r in records if r.result_class == "malformed_result"]
        assert len(malformed) == 1
        assert malformed[0].reason == "source_timestamp: 'yesterday at noon' is not a 'date-time'"


def test_a_long_schema_message_is_cut_to_one_short_line() -> None:
    reason = malformed_reason(("options: " + "x" * 5000, "status: second problem"))
    assert reason.startswith("options: xxx")
    assert len(reason) <= 300
    assert "\n" not in reason
    assert reason.endswith("(and 1 more)")
