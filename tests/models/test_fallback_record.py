"""What the record keeps of a run's switch to its fallback model: the header's two prices, and
the switch itself, which a replay or a resume finds again from the recorded failures (the
failed request asked again on the same transcript). Headers stored before the fallback's price
was recorded priced its requests at the primary's price, and still read so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runner import Engine, FakeClock, Limits, MemoryStore
from runner.models.base import ModelReply, ModelUnavailable, TokenUsage, ToolChoice, ToolSpec
from runner.models.pricing import ModelPrice
from runner.models.transcript import Transcript
from runner.proof.replay import Recording, describe, replay
from runner.record.trace import HEADER_ADAPTER
from runner.store import FanoutStore, JsonlLog
from runner.testing import ToolDouble, latest_results
from runner.tools.contracts import ContractSet
from runner.tools.toolbox import FunctionTools
from tests.support.travel import FLIGHT_ARGS, flight_spec

PRIMARY = ModelPrice(input_usd_per_mtok=1, output_usd_per_mtok=2)
FALLBACK = ModelPrice(input_usd_per_mtok=10, output_usd_per_mtok=30)
USAGE = TokenUsage(input_tokens=1000, output_tokens=100)
FLIGHTS = {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}


class Down:
    """A primary that is always unavailable, with a fallback and a declared price."""

    price = PRIMARY

    def __init__(self) -> None:
        self.fallback = Spare()
        self.asked = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], choice: ToolChoice
    ) -> ModelReply:
        self.asked += 1
        raise ModelUnavailable("overloaded", status=503)


class Spare:
    """The fallback: searches once, then answers."""

    price = FALLBACK

    def __init__(self) -> None:
        self.asked = 0

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], choice: ToolChoice
    ) -> ModelReply:
        from runner.models.base import ToolCall  # noqa: PLC0415

        self.asked += 1
        if latest_results(transcript):
            return ModelReply(text="Nothing found.", tool_calls=(), usage=USAGE,
                              stop_reason="end_turn")  # fmt: skip
        search = ToolCall(id=f"s{self.asked}", name="search_flights", arguments=FLIGHT_ARGS)
        return ModelReply(text="", tool_calls=(search,), usage=USAGE, stop_reason="tool_use")


def _engine(contracts: ContractSet, store: Any) -> Engine:
    tools = FunctionTools({"search_flights": ToolDouble(FLIGHTS)})
    return Engine(contracts=contracts, toolbox=tools, store=store, clock=FakeClock())


def test_each_request_is_priced_at_the_model_that_answered_it(contracts: ContractSet) -> None:
    store = MemoryStore()
    result = _engine(contracts, store).run_sync(flight_spec(), Down())
    assert result.terminal.value == "complete"
    each = float(FALLBACK.cost_of(USAGE))
    assert [r.cost_usd for r in result.transitions if r.tokens_in is not None] == [each, each]
    header = store.header(result.run_id)
    assert header is not None and (header.price, header.fallback_price) == (PRIMARY, FALLBACK)
    again = replay(Recording.from_store(store, result.run_id), contracts)
    assert again.identical, describe(again)


def test_an_older_header_prices_the_fallbacks_requests_at_the_primarys(
    tmp_path: Path, contracts: ContractSet
) -> None:
    """A run stored before `fallback_price` priced what its fallback answered at `price` (as
    here, given that price for its fallback): its header, with no `fallback_price`, reads so,
    and the run replays as recorded, its switch found from its turns without `fallback` (the
    failed request asked again). Read as a run whose fallback had no price, it would not."""
    log = tmp_path / "runs.jsonl"
    store = FanoutStore(MemoryStore(), JsonlLog(log))
    result = _engine(contracts, store).run_sync(flight_spec(fallback_price=PRIMARY), Down())
    store.close()
    each = float(PRIMARY.cost_of(USAGE))
    assert [r.cost_usd for r in result.transitions if r.tokens_in is not None] == [each, each]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    asked_of = [line["fallback"] for line in lines if line["type"] == "model_turn"]
    assert asked_of == [False, False, False, True, True]
    older = [{k: v for k, v in line.items() if k not in ("fallback_price", "fallback")}
             for line in lines]  # fmt: skip
    unpriced = [{**lines[0], "fallback_price": None}, *lines[1:]]
    for written, identical in ((older, True), (unpriced, False)):
        log.write_text("".join(json.dumps(line) + "\n" for line in written))
        (recording,) = Recording.from_log(log)
        expected = PRIMARY if identical else None
        assert recording.header.fallback_price == expected
        assert replay(recording, contracts).identical is identical


def test_a_fallback_that_can_afford_only_the_final_answer_is_asked_for_it(
    contracts: ContractSet,
) -> None:
    """Capped at $0.003, the fallback's price leaves no room for a tool-proposing request (with
    the final answer's share held back) but does for the final answer: the run asks the
    fallback for it, at its price, and replays as recorded (the switch is in the turn, as the
    next request is not the failed one asked again)."""
    store = MemoryStore()
    result = _engine(contracts, store).run_sync(
        flight_spec(limits=Limits(max_cost_usd=0.003)), Down()
    )
    assert (result.terminal.value, result.reason) == ("abstain", "cost")
    turns = store.turns(result.run_id)
    assert [(t.tool_choice, t.fallback) for t in turns[3:]] == [("none", True)]
    assert result.cost_usd == float(FALLBACK.cost_of(USAGE))
    again = replay(Recording.from_store(store, result.run_id), contracts)
    assert again.identical, describe(again)


def test_an_older_header_reads_its_price_as_the_fallbacks() -> None:
    body = {"run_id": "r1", "name": "x", "tenant": "t", "principal": "p",
            "started_at": "2027-03-01T09:00:00Z", "task": "t", "tools": [], "scopes": [],
            "context": {}, "limits": {}, "policy": {}, "seed": 0}  # fmt: skip
    price = PRIMARY.model_dump(mode="json")
    assert HEADER_ADAPTER.validate_python({**body, "price": price}).fallback_price == PRIMARY
    assert HEADER_ADAPTER.validate_python({**body}).fallback_price is None
    recorded = {**body, "price": price, "fallback_price": None}
    assert HEADER_ADAPTER.validate_python(recorded).fallback_price is None


@pytest.mark.parametrize("kept", [4, 5])
def test_a_resume_after_the_switch_goes_on_with_the_fallback(
    contracts: ContractSet, kept: int
) -> None:
    """A run killed after its fallback proposed a search (its inputs up to request `kept`
    stored: the three failures and the fallback's reply, or also its answer) resumes on the
    fallback at its price: the primary is not asked again (it was, at the next request)."""
    done = MemoryStore()
    whole = _engine(contracts, done).run_sync(flight_spec(), Down())
    run_id = whole.run_id
    header = done.header(run_id)
    assert header is not None
    killed = MemoryStore()
    killed.begin_run(header)
    turns = [turn for turn in done.turns(run_id) if turn.ordinal <= kept]
    killed.append_inputs(run_id, turns)
    known = 1 if kept == 4 else 3  # the proposal; or also the search's classification, resume
    outputs = done.outputs(run_id) if kept == 5 else []
    for record in done.transitions(run_id)[:known]:
        killed.append(record, outputs if record.trigger == "classify" else ())
    primary = Down()
    engine = _engine(contracts, killed)
    assert isinstance(engine.clock, FakeClock)
    with asyncio.Runner(loop_factory=engine.clock.loop_factory) as runner:
        resumed = runner.run(engine.resume(run_id, flight_spec(), primary))
    assert (resumed.terminal.value, resumed.reason) == ("complete", "model_final")
    assert primary.asked == 0 and primary.fallback.asked == 5 - kept
    assert [r.cost_usd for r in resumed.transitions] == [r.cost_usd for r in whole.transitions]
    assert resumed.cost_usd == whole.cost_usd == 2 * float(FALLBACK.cost_of(USAGE))
    again = replay(Recording.from_store(killed, run_id), contracts)
    assert again.identical, describe(again)


def test_show_names_the_requests_the_fallback_answered(
    contracts: ContractSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runner show` prints a `fallback:` line with the requests asked of the fallback model
    (and which of them failed), and `show --json` lists them in `context.fallback_requests`, the
    failed ones of either model in `failed_requests`; a run on its primary alone has neither
    the line nor a request in the list."""
    from runner.cli import main  # noqa: PLC0415
    from runner.store import SqliteStore  # noqa: PLC0415

    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    fell_back = _engine(contracts, store).run_sync(flight_spec(), Down())
    primary = _engine(contracts, store).run_sync(flight_spec(), Spare())
    turns = store.turns(fell_back.run_id)
    store.close()
    failed = [t.ordinal for t in turns if t.error_status == 503 and not t.fallback]
    answered = [t.ordinal for t in turns if t.fallback]
    assert failed == [1, 2, 3] and answered == [4, 5]  # the primary's failures are requests too
    assert main(["show", fell_back.run_id, "--db", str(db)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "fallback:" in ln]
    assert lines == ["  fallback: the fallback model was asked model requests 4, 5"]
    assert main(["show", fell_back.run_id, "--db", str(db), "--json"]) == 0
    context = json.loads(capsys.readouterr().out)["context"]
    assert (context["fallback_requests"], context["failed_requests"]) == (answered, failed)
    assert main(["show", primary.run_id, "--db", str(db)]) == 0
    assert "fallback:" not in capsys.readouterr().out
    assert main(["show", primary.run_id, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context"]["fallback_requests"] == []


class DownToo(Down):
    """A primary whose fallback is down too."""

    def __init__(self) -> None:
        super().__init__()
        self.fallback = Down()  # type: ignore[assignment]


def test_show_says_which_requests_of_the_fallback_failed(
    contracts: ContractSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fallback that fails too was asked, not answered: the line says which failed."""
    from runner.cli import main  # noqa: PLC0415
    from runner.store import SqliteStore  # noqa: PLC0415

    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    result = _engine(contracts, store).run_sync(flight_spec(), DownToo())
    store.close()
    assert result.terminal.value == "abstain" and result.reason.startswith("model_unavailable")
    assert main(["show", result.run_id, "--db", str(db)]) == 0
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if "fallback:" in ln]
    assert (
        line == "  fallback: the fallback model was asked model requests 4, 5, 6 (failed: 4, 5, 6)"
    )
