"""`Engine(render_limit=...)`, how much of one tool result the model is shown, is kept in the
run's header: a replay (which builds its own engine) and a resume on an engine with another
limit show the model each result as the run did, so they re-drive it exactly. Before, a run
made with a limit other than the default 4,000 never replayed identical (stranger finding)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner import Engine, FakeClock, SqliteStore
from runner.models.transcript import Transcript
from runner.proof.api import replay_run_sync
from runner.proof.replay import describe
from runner.store.sqlite import TRANSITION, TURN
from runner.testing import FunctionModel, ToolDouble, latest_results
from runner.tools.contracts import ContractSet
from runner.tools.toolbox import FunctionTools
from tests.support.travel import FLIGHT_ARGS, flight_spec

LONG = {
    "status": "ok",
    "options": [{"flight_id": f"NH{i}" + "X" * 1000, "assistance_status": "reported_available"}
                for i in range(10)],
    "source_timestamp": "2027-03-01T09:00:00Z",
}  # fmt: skip


def _model(seen: list[int] | None = None) -> FunctionModel:
    """Searches, then answers; `seen`: the transcript's length at each request."""
    from runner.models.base import ToolCall  # noqa: PLC0415

    def plan(transcript: Transcript, tools: object) -> str | ToolCall:
        if seen is not None:
            seen.append(transcript.chars)
        if latest_results(transcript):
            return "NH7."
        return ToolCall(id="", name="search_flights", arguments=FLIGHT_ARGS)

    return FunctionModel(plan)


def _engine(contracts: ContractSet, store: SqliteStore, render_limit: int) -> Engine:
    tools = FunctionTools({"search_flights": ToolDouble(LONG)})
    return Engine(contracts=contracts, toolbox=tools, store=store, clock=FakeClock(),
                  render_limit=render_limit)  # fmt: skip


def test_a_run_shown_more_than_the_default_replays_identical(
    contracts: ContractSet, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    result = _engine(contracts, store, 20_000).run_sync(flight_spec(), _model())
    header = store.header(result.run_id)
    assert header is not None and header.render_limit == 20_000
    replayed = replay_run_sync(store, result.run_id, contracts)
    assert replayed.identical, describe(replayed)


def test_a_resume_on_an_engine_with_another_limit_goes_on_with_the_runs(
    contracts: ContractSet, tmp_path: Path
) -> None:
    """The run is cut after its tool result (its final answer and summary removed, as a crash
    leaves it), then resumed on an engine whose render_limit is the default: the model is asked
    for the answer with the result shown as the run showed it, not cut at 4,000."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    first: list[int] = []
    result = _engine(contracts, store, 20_000).run_sync(flight_spec(), _model(first))
    store._conn.execute("UPDATE runs SET terminal = NULL, summary = NULL")
    for kind in (TRANSITION, TURN):  # the last transition, and the final answer's turn
        store._conn.execute(
            "DELETE FROM run_log WHERE entry = (SELECT MAX(entry) FROM run_log WHERE kind = ?)",
            (kind,),
        )
    again: list[int] = []
    engine = _engine(contracts, store, 4_000)
    resumed = asyncio.run(engine.resume(result.run_id, flight_spec(), _model(again)))
    assert (resumed.terminal.value, resumed.reason) == ("complete", "model_final")
    assert again[-1] == first[-1] > 10_000  # shown whole, as before the crash
    assert replay_run_sync(store, result.run_id, contracts).identical
