"""Cost in money: each model request priced at the run's price (recorded in its header), the
run's total reported, and `max_cost_usd` bounding the run like the other limits."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from runner import Engine, FakeClock, Limits, MemoryStore, ScriptedModel, SqliteStore
from runner.base.errors import ConfigError, FixtureError
from runner.cli import main
from runner.core.budget import Bound
from runner.harness.fixtures import load_fixture
from runner.models.identity import ModelIdentity
from runner.models.pricing import FixedPrices, GenaiPrices, ModelPrice, NoPrices, default_prices
from runner.proof.api import replay_run_sync
from runner.record.trace import read_log
from runner.testing import FunctionModel
from runner.tools.contracts import ContractSet
from runner.travel.scenario import run_fixture, spec_for
from tests.support.paths import FIXTURES
from tests.support.travel import FLIGHT_ARGS, make_fixture

TEN_THIRTY = {"input_usd_per_mtok": 10.0, "output_usd_per_mtok": 30.0}
SEARCH = {"name": "search_flights", "args": FLIGHT_ARGS}
EMPTY = {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}


def _steps(fixture_turns: int, *, usage: dict[str, int]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [SEARCH], "usage": usage} for _ in range(fixture_turns)
    ]
    return [*turns, {"final": "Nothing is confirmed.", "usage": usage}]


def test_cost_fixture_abstains_on_cost_with_a_final_answer(contracts: ContractSet) -> None:
    """$0.10 at $10/$30 per Mtok, 2000 in / 100 out a request ($0.023): three tool steps leave
    room for the final answer's share and no fourth; the run never spends past its cap."""
    fixture = load_fixture(FIXTURES / "cost_exhausted.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    result = outcome.result
    assert outcome.failures == []
    assert (result.terminal.value, result.reason) == ("abstain", Bound.COST.value)
    assert result.answer is not None and "nothing is confirmed" in result.answer
    priced = [r.cost_usd for r in result.transitions if r.tokens_in is not None]
    assert priced == [0.023] * 4
    assert result.cost_usd == pytest.approx(0.092)
    assert result.cost_usd is not None and result.cost_usd <= 0.1
    assert result.transitions[-1].result_class == "budget_exhausted"


def test_no_final_answer_when_the_money_left_cannot_pay_for_it(contracts: ContractSet) -> None:
    """After one $0.023 step, the $0.017 left of $0.04 pays neither for another step (with the
    final answer's share held back) nor for the final answer itself: the run abstains without
    asking again, and never spends past its cap."""
    fixture = make_fixture(
        environment={"search_flights": [{"respond": EMPTY}] * 3},
        model=_steps(3, usage={"input": 2000, "output": 100}),
        budget={"max_cost_usd": 0.04},
        price=TEN_THIRTY,
    )
    result = run_fixture(fixture, contracts, MemoryStore()).result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert result.model_steps == 1 and result.answer is None
    assert result.cost_usd == pytest.approx(0.023)


def test_an_unbounded_run_is_still_priced(contracts: ContractSet) -> None:
    """The scripted model's configured price prices every fixture, with or without a cap."""
    fixture = make_fixture(model=_steps(1, usage={"input": 1000, "output": 10}))
    result = run_fixture(fixture, contracts, MemoryStore()).result
    assert result.terminal.value == "complete"
    assert result.cost_usd == pytest.approx(2 * (1000 * 3.0 + 10 * 15.0) / 1e6)  # SCRIPTED_PRICE


def test_max_cost_without_a_price_is_refused_before_the_run_is_stored(
    contracts: ContractSet,
) -> None:
    fixture = make_fixture(budget={"max_cost_usd": 1.0})

    class Unpriced:
        async def generate(self, *args: Any) -> Any:
            raise AssertionError("never asked")

    store = MemoryStore()
    engine = Engine(contracts=contracts, toolbox=None, store=store,  # type: ignore[arg-type]
                    clock=FakeClock(), prices=NoPrices())  # fmt: skip
    with pytest.raises(ConfigError, match=r"max_cost_usd 1\.0 needs a price.*NoPrices.*`price:`"):
        engine.run_sync(spec_for(fixture, 0), Unpriced())  # type: ignore[arg-type]
    assert store.runs() == []


def test_the_spec_price_wins_over_the_adapter_and_the_table(contracts: ContractSet) -> None:
    fixture = make_fixture(model=_steps(1, usage={"input": 1_000_000, "output": 0}))
    table = FixedPrices(ModelPrice(input_usd_per_mtok=7, output_usd_per_mtok=7))
    engine = Engine(contracts=contracts, toolbox=None, store=MemoryStore(),  # type: ignore[arg-type]
                    clock=FakeClock(), prices=table)  # fmt: skip
    assert engine._priced(spec_for(fixture, 0), object()).price == table.price  # type: ignore[arg-type]
    scripted = ScriptedModel(fixture.model, price=ModelPrice(**TEN_THIRTY))
    assert engine._priced(spec_for(fixture, 0), scripted).price == ModelPrice(**TEN_THIRTY)
    mine = ModelPrice(input_usd_per_mtok=1, output_usd_per_mtok=2)
    spec = spec_for(fixture.model_copy(update={"price": mine}), 0)
    assert engine._priced(spec, scripted).price == mine


def test_a_price_is_finite_non_negative_and_at_most_a_dollar_a_token() -> None:
    """A price so large that a request's cost overflowed a float (1e308 per million tokens)
    was accepted, and the run stopped mid-way, `running` for good: its transition's cost was
    no JSON number, so it could not be stored."""
    for bad in (-1, float("nan"), float("inf"), 1e308, 1_000_001):
        with pytest.raises(ValidationError):
            ModelPrice(input_usd_per_mtok=bad, output_usd_per_mtok=1)
        with pytest.raises(ValidationError):
            ModelPrice(input_usd_per_mtok=1, output_usd_per_mtok=bad)
    free = ModelPrice(input_usd_per_mtok=0, output_usd_per_mtok=0)
    assert free.cost(10**9, 10**9) == 0
    dear = ModelPrice(input_usd_per_mtok=1_000_000, output_usd_per_mtok=1_000_000)
    assert dear.cost(10**9, 10**9) == Decimal(2 * 10**9)


def test_limits_refuse_a_non_positive_money_budget() -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            Limits(max_cost_usd=bad)
    assert Limits().max_cost_usd is None


def test_missing_price_table_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'runner-fsm\[prices\]'"):
        GenaiPrices()


@pytest.mark.parametrize(
    ("provider", "name", "rates"),
    [
        ("anthropic", "claude-sonnet-4-6", (3.0, 15.0)),  # $6 input past 200k tokens
        ("google", "gemini-2.5-pro", (1.25, 10.0)),  # $2.50 / $15 past 200k tokens
        ("openai", "gpt-4o-mini", (0.15, 0.6)),  # not tiered
    ],
)
def test_the_table_price_is_the_base_rate_of_a_tiered_model(
    provider: str, name: str, rates: tuple[float, float]
) -> None:
    """A tiered model is priced at its base rates, as a request under the first tier pays: the
    table used to be asked the price of a million tokens, which crosses a 200k tier (Claude
    Sonnet 4.5 came out at $6 per million input tokens instead of $3)."""
    at = datetime(2026, 6, 1, tzinfo=UTC)
    price = GenaiPrices().price_of(ModelIdentity(provider=provider, name=name), at)
    assert price is not None
    assert (price.input_usd_per_mtok, price.output_usd_per_mtok) == rates
    assert price.source.startswith("genai-prices ")


def test_price_cost_is_exact() -> None:
    price = ModelPrice(input_usd_per_mtok=0.15, output_usd_per_mtok=0.6)
    assert price.cost(1_000_000, 1_000_000) == Decimal("0.75")
    assert price.cost(1, 0) == Decimal("0.00000015")


def test_cost_in_show_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], contracts: ContractSet
) -> None:
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "cost_exhausted.yaml"), "--db", db, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["cost_usd"] == pytest.approx(0.092)
    assert run["context"]["cost_usd_per_step"] == [0.023] * 4
    assert [t["cost_usd"] for t in run["transitions"] if t["tokens_in"] is not None] == [0.023] * 4
    assert main(["show", run["run_id"], "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "cost: $0.092000" in shown and "abstain (cost)" in shown


def test_replay_prices_with_the_recorded_price(tmp_path: Path, contracts: ContractSet) -> None:
    """A stored run replays identically whatever price table the replaying side has."""
    store = SqliteStore(tmp_path / "r.db")
    fixture = load_fixture(FIXTURES / "cost_exhausted.yaml", contracts)
    result = run_fixture(fixture, contracts, store).result
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, replayed.divergence
    assert replayed.replayed.result is not None
    assert replayed.replayed.result.cost_usd == result.cost_usd


def test_a_money_budget_is_refused_for_replaying_an_unpriced_run(
    tmp_path: Path, contracts: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unpriced run has no cost to bound: a live run with `max_cost_usd` and no price is
    refused, and so is a counterfactual replay with one (it used to report the run as it was,
    as though the cap had been checked)."""
    db = tmp_path / "r.db"
    store = SqliteStore(db)
    unpriced = FunctionModel(lambda transcript, tools: "Nothing is confirmed.")
    run = run_fixture(make_fixture(), contracts, store, model=unpriced).result
    assert run.cost_usd is None and store.header(run.run_id).price is None  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="was not priced"):
        replay_run_sync(store, run.run_id, contracts, limits=Limits(max_cost_usd=1))
    assert replay_run_sync(store, run.run_id, contracts, limits=Limits(max_attempts=2)).replayed
    store.close()
    assert main(["replay", run.run_id, "--db", str(db), "--max-cost-usd", "1"]) == 2
    assert "was not priced" in capsys.readouterr().err


def test_a_long_final_answer_is_cut_at_what_the_money_leaves(contracts: ContractSet) -> None:
    """What the README says of the cap: a final answer of 500 tokens after a 10-token tool call
    used to pass a $0.025 cap ($0.0363); its output is now limited to what the money leaves
    after its projected input: the last request's 1000 billed tokens plus the 131 the
    transcript grew by since (the call and its result), so 113 tokens. Billed 1100, the run
    stays within the cap (under projection 1, which projected the 1000 alone, it passed it by
    the 100 tokens it missed)."""
    fixture = make_fixture(
        model=[
            {"tool_calls": [SEARCH], "usage": {"input": 1000, "output": 10}},
            {"final": "Nothing is confirmed.", "usage": {"input": 1100, "output": 500}},
        ],
        budget={"max_cost_usd": 0.025},
        price=TEN_THIRTY,
    )
    result = run_fixture(fixture, contracts, MemoryStore()).result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert result.answer == "Nothing is confirmed."  # cut off: the partial answer is kept
    final = result.transitions[-1]
    assert (final.tokens_in, final.tokens_out) == (1100, 113)  # (0.025-0.0103-0.01131) / $30/M
    assert result.cost_usd == pytest.approx(0.0103 + 0.011 + 113 * 30 / 1e6)
    assert result.cost_usd is not None and result.cost_usd <= 0.025


def test_a_long_final_answer_never_passes_the_cap_when_its_input_is_as_projected(
    contracts: ContractSet,
) -> None:
    """The same run with the final request billed for less than projected (the last request's
    1000): the cap holds, with the output limited as above."""
    fixture = make_fixture(
        model=[
            {"tool_calls": [SEARCH], "usage": {"input": 1000, "output": 10}},
            {"final": "Nothing is confirmed.", "usage": {"input": 1000, "output": 500}},
        ],
        budget={"max_cost_usd": 0.025},
        price=TEN_THIRTY,
    )
    result = run_fixture(fixture, contracts, MemoryStore()).result
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    assert result.transitions[-1].tokens_out == 113
    assert result.cost_usd is not None and result.cost_usd <= 0.025


def test_a_log_without_cost_fields_still_reads(tmp_path: Path, contracts: ContractSet) -> None:
    """Older logs have no `price`, `cost_usd` on transitions or in the summary."""
    path = tmp_path / "runs.jsonl"
    assert main(["run", str(FIXTURES / "read_only_success.yaml"), "--log", str(path)]) == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:  # and none of tool retrieval's
        for key in ("price", "cost_usd", "tool_retrieval", "offered", "manifest_tokens"):
            line.pop(key, None)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run,) = read_log(path)
    assert run.header.price is None and run.summary is not None
    assert run.summary.cost_usd is None
    assert all(r.cost_usd is None and r.offered is None for r in run.transitions)
    assert run.header.tool_retrieval is None


def test_a_counterfactual_replay_under_a_smaller_money_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --max-cost-usd` re-drives the recorded run under another cap: priced as recorded
    (the header's price), it stops where that cap leaves no room for another step."""
    db = str(tmp_path / "r.db")
    assert main(["run", str(FIXTURES / "budget_exhausted.yaml"), "--db", db, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["replay", run_id, "--db", db, "--max-cost-usd", "0.003", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["changes"] == ["max_cost_usd 0.003"]
    assert (replayed["terminal"], replayed["reason"]) == ("abstain", "cost")
    with pytest.raises(SystemExit) as refused:
        main(["replay", run_id, "--db", db, "--max-cost-usd", "-1"])
    assert refused.value.code == 2
    assert "--max-cost-usd: must be a finite amount above 0" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["3", "1e3", True, False, None, [1]])
def test_a_price_is_a_number_never_a_string_or_a_boolean(
    bad: object, tmp_path: Path, contracts: ContractSet
) -> None:
    """As the README says of a fixture's seconds and dollars: `"1e3"` was read as 1000 and
    `true` as 1 (`budget.max_cost_usd: "0.1"` was refused already)."""
    for fields in ({"input_usd_per_mtok": bad, "output_usd_per_mtok": 1},
                   {"input_usd_per_mtok": 1, "output_usd_per_mtok": bad}):  # fmt: skip
        with pytest.raises(ValidationError, match="usd_per_mtok"):
            ModelPrice(**fields)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            ModelPrice.model_validate_json(json.dumps(fields))
        document = yaml.safe_load((FIXTURES / "read_only_success.yaml").read_text())
        path = tmp_path / "priced.yaml"
        path.write_text(yaml.safe_dump({**document, "price": fields}), encoding="utf-8")
        with pytest.raises(FixtureError, match=r"price\.(in|out)put_usd_per_mtok"):
            load_fixture(path, contracts)
    assert ModelPrice(input_usd_per_mtok=3, output_usd_per_mtok=15.5).input_usd_per_mtok == 3.0


class _Unpriced:
    """An adapter of a model no table lists (and it declares no price)."""

    identity = ModelIdentity(provider="openai", name="qwen2.5:7b-instruct")

    async def generate(self, *args: Any) -> Any:
        raise AssertionError("never asked")


def _refusal(contracts: ContractSet, prices: Any) -> str:
    fixture = make_fixture(budget={"max_cost_usd": 0.002})
    engine = Engine(contracts=contracts, toolbox=None, store=MemoryStore(),  # type: ignore[arg-type]
                    clock=FakeClock(), prices=prices)  # fmt: skip
    with pytest.raises(ConfigError) as refused:
        engine.run_sync(spec_for(fixture, 0), _Unpriced())  # type: ignore[arg-type]
    return str(refused.value)


def test_a_model_the_installed_table_does_not_list_is_told_to_give_a_price(
    contracts: ContractSet,
) -> None:
    """With the table installed, the advice was to install it; the fix is the fixture's
    `price:` (RunSpec.price)."""
    message = _refusal(contracts, GenaiPrices())
    assert "needs a price for openai:qwen2.5:7b-instruct" in message
    assert "does not list it" in message and "genai-prices" in message
    assert "`price:`" in message and "RunSpec.price" in message
    assert "pip install" not in message


def test_with_no_table_installed_the_advice_is_a_price_or_the_table(
    contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import fails as if not installed
    default_prices.cache_clear()
    try:
        message = _refusal(contracts, None)
    finally:
        default_prices.cache_clear()
    assert "no price table is installed" in message
    assert "`price:`" in message and "RunSpec.price" in message
    assert "pip install 'runner-fsm[prices]'" in message
    told = _refusal(contracts, NoPrices())  # chosen: no table, whether installed or not
    assert "Engine(prices=NoPrices())" in told and "`price:`" in told


def test_a_continuation_is_priced_as_the_waiting_run_began(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run continued once approved re-drives the waiting run's requests and goes on: priced
    at the waiting run's recorded price (it was unpriced, its cost null, as no price was looked
    up for it), and the stored continuation grades clean."""
    monkeypatch.setenv("RUNNER_APPROVAL_SECRET", "the-runtime-secret-for-the-tests-0001")
    db = tmp_path / "runs.sqlite"
    fixture = str(FIXTURES / "approval" / "hold_approved.yaml")
    assert main(["run", fixture, "--db", str(db), "--json"]) == 0
    waiting = json.loads(capsys.readouterr().out)
    code = main(["approve", waiting["run_id"], "hold_room", "--approver", "alice",
                 "--db", str(db), "--json"])  # fmt: skip
    continued = json.loads(capsys.readouterr().out)
    assert code == 0 and continued["terminal"] == "complete"
    assert continued["cost_usd"] is not None and continued["cost_usd"] > waiting["cost_usd"]
    store = SqliteStore(db)
    header = store.header(continued["run_id"])
    assert header is not None and header.price == store.header(waiting["run_id"]).price  # type: ignore[union-attr]
    store.close()
    assert main(["grade", "--stored", "--db", str(db)]) == 0
