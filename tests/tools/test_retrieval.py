"""Tool retrieval over a 60-tool catalogue (travel and unrelated domains, near-duplicate
descriptions): each request offers the top-k tools for the task and the latest turn, the record
names them, an unoffered call is refused `unknown_tool` with the tools the model may use, and a
replay offers exactly the same."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from runner import MemoryStore, ScriptedModel, SqliteStore
from runner.base.errors import ConfigError
from runner.cli import main
from runner.harness.fixtures import Fixture, collect_fixture_paths, load_fixture
from runner.harness.scenario import ScenarioRun
from runner.models.base import ModelReply, ToolChoice, ToolSpec
from runner.models.transcript import ToolResultMessage, Transcript
from runner.proof.api import replay_run_sync
from runner.proof.replay import Recording, replay
from runner.record.trace import TransitionRecord
from runner.tools.contracts import ContractSet
from runner.tools.retrieval import Bm25Retriever, ToolRetrieval, select, tool_text, words
from runner.travel import load_travel_contracts
from runner.travel.scenario import run_fixture
from tests.support.paths import DATA

CATALOGUE = DATA / "catalogue"
PATHS = collect_fixture_paths([CATALOGUE])


@pytest.fixture(scope="module")
def catalogue() -> ContractSet:
    return load_travel_contracts()  # the travel world's contracts hold the catalogue


def proposals(records: list[TransitionRecord]) -> list[tuple[TransitionRecord, list[str]]]:
    """Each tool-proposing request with the tools its calls named (in call order)."""
    found: list[tuple[TransitionRecord, list[str]]] = []
    for record in records:
        if record.trigger == "propose":
            found.append((record, []))
        elif record.trigger == "classify" and found and record.tool is not None:
            found[-1][1].append(record.tool)
    return found


def manifest_sent(records: list[TransitionRecord]) -> int:
    return sum(record.manifest_tokens or 0 for record in records)


def whole(fixture: Fixture) -> Fixture:
    """The same fixture with the catalogue offered whole at every request."""
    assert fixture.retrieval is not None
    return fixture.model_copy(
        update={"retrieval": fixture.retrieval.model_copy(update={"max_offered": 1000})}
    )


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_catalogue_fixture_three_times_needed_tool_always_offered_manifest_5x_smaller(
    path: Path, catalogue: ContractSet
) -> None:
    fixture = load_fixture(path, catalogue)
    assert len(fixture.tools) == 60
    outcomes = [run_fixture(fixture, catalogue, MemoryStore(), seed=0) for _ in range(3)]
    for outcome in outcomes:
        assert outcome.failures == [], outcome.failures
        for record, called in proposals(outcome.result.transitions):
            assert record.offered is not None and len(record.offered) <= 4
            needed = [t for t in called if t != "convert_currency" or "unoffered" not in path.stem]
            assert set(needed) <= set(record.offered), (record.seq, needed, record.offered)
    selections = [[r.offered for r in o.result.transitions] for o in outcomes]
    assert selections[0] == selections[1] == selections[2]
    everything = run_fixture(whole(fixture), catalogue, MemoryStore()).result
    assert everything.terminal == outcomes[0].result.terminal
    assert all(r.offered is None for r in everything.transitions)  # offered whole
    retrieved, offered_whole = (
        manifest_sent(outcomes[0].result.transitions),
        manifest_sent(everything.transitions),
    )
    assert retrieved > 0 and offered_whole >= 5 * retrieved, (retrieved, offered_whole)


class Watching:
    """A scripted model that keeps what each request offered and showed it."""

    def __init__(self, fixture: Fixture) -> None:
        self.inner = ScriptedModel(fixture.model)
        self.price = self.inner.price
        self.offered: list[list[str]] = []
        self.results: list[ToolResultMessage] = []

    async def generate(
        self, transcript: Transcript, tools: tuple[ToolSpec, ...], tool_choice: ToolChoice
    ) -> ModelReply:
        self.offered.append([tool.name for tool in tools])
        self.results += [m for m in transcript.messages if isinstance(m, ToolResultMessage)]
        return await self.inner.generate(transcript, tools, tool_choice)


def test_an_unoffered_call_is_refused_and_the_model_told_what_it_may_use(
    catalogue: ContractSet,
) -> None:
    fixture = load_fixture(CATALOGUE / "catalogue_unoffered_call.yaml", catalogue)
    watching = Watching(fixture)
    outcome = run_fixture(fixture, catalogue, MemoryStore(), model=watching)  # type: ignore[arg-type]
    records = outcome.result.transitions
    refused = next(r for r in records if r.tool == "convert_currency")
    assert refused.result_class == "unknown_tool"
    assert outcome.environment.tools["convert_currency"].invocations == []  # never dispatched
    first = next(r for r in records if r.trigger == "propose")
    assert watching.offered[0] == first.offered  # what the model was sent is what was recorded
    body = json.loads(watching.results[0].content)
    assert body["result_class"] == "unknown_tool"
    assert body["error"]["may_use"] == first.offered
    assert "convert_currency" in catalogue and "convert_currency" in fixture.tools


def test_replay_reproduces_the_selection_exactly(tmp_path: Path, catalogue: ContractSet) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    result = run_fixture(fixture, catalogue, store).result
    replayed = replay_run_sync(store, result.run_id, catalogue)
    assert replayed.identical, replayed.divergence
    assert [r.offered for r in replayed.replayed.records] == [r.offered for r in result.transitions]
    header = store.header(result.run_id)
    assert header is not None and header.tool_retrieval == fixture.retrieval


def test_replay_notices_another_selection(tmp_path: Path, catalogue: ContractSet) -> None:
    """The offer is part of the record: a stored run whose selection differs diverges."""
    store = SqliteStore(tmp_path / "runs.db")
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    result = run_fixture(fixture, catalogue, store).result
    recording = Recording.from_store(store, result.run_id)
    index = next(i for i, r in enumerate(recording.transitions) if r.offered)
    edited = recording.transitions[index]
    assert edited.offered is not None
    other = [name for name in fixture.tools if name not in edited.offered][:4]
    recording.transitions[index] = dataclasses.replace(edited, offered=other)
    replayed = replay(recording, catalogue)
    assert not replayed.identical and "offered" in str(replayed.divergence)


def test_show_reports_manifest_tokens_per_step(
    tmp_path: Path, catalogue: ContractSet, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    fixture = load_fixture(CATALOGUE / "catalogue_weather_money.yaml", catalogue)
    result = run_fixture(fixture, catalogue, SqliteStore(db)).result
    assert main(["show", result.run_id, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "manifest_tokens" in shown and "tool manifests sent: " in shown
    per_step = [r.manifest_tokens for r in result.transitions if r.tokens_in is not None]
    assert f"tool manifests sent: {sum(t or 0 for t in per_step)} tokens" in shown
    assert main(["show", result.run_id, "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["context"]["manifest_tokens_per_step"] == per_step


class HashEmbedder:
    """A small deterministic embedder (hashed character trigrams, no model download), as a
    `Retriever`: cosine similarity between the query's vector and each tool's."""

    DIMENSIONS = 512

    def __init__(self, catalogue: Sequence[ToolSpec]) -> None:
        self.vectors = [self.embed(tool_text(tool)) for tool in catalogue]

    def embed(self, text: str) -> list[float]:
        vector = [0.0] * self.DIMENSIONS
        for word in words(text):
            padded = f" {word} "
            for start in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[start : start + 3].encode(), digest_size=4)
                vector[int.from_bytes(digest.digest(), "big") % self.DIMENSIONS] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def scores(self, query: str) -> Sequence[float]:
        wanted = self.embed(query)
        return [sum(a * b for a, b in zip(wanted, v, strict=True)) for v in self.vectors]


def test_a_plugged_in_embedding_retriever(catalogue: ContractSet) -> None:
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    assert fixture.retrieval is not None
    embedded = fixture.model_copy(
        update={"retrieval": ToolRetrieval(max_offered=16, top_k=8, retriever="hash")}
    )
    runs = [
        run_fixture(embedded, catalogue, MemoryStore(), retrievers={"hash": HashEmbedder})
        for _ in range(2)
    ]
    for outcome in runs:
        assert outcome.failures == [], outcome.failures
        for record, called in proposals(outcome.result.transitions):
            assert record.offered is not None and set(called) <= set(record.offered)
    assert [r.offered for r in runs[0].result.transitions] == [
        r.offered for r in runs[1].result.transitions
    ]


def test_an_unknown_retriever_is_refused_before_the_run_is_stored(
    catalogue: ContractSet,
) -> None:
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    named = fixture.model_copy(update={"retrieval": ToolRetrieval(retriever="nope")})
    store = MemoryStore()
    with pytest.raises(ConfigError, match="retriever 'nope'; this engine has bm25"):
        run_fixture(named, catalogue, store)
    assert store.runs() == []


def test_an_unknown_retriever_is_refused_even_while_the_catalogue_is_offered_whole(
    catalogue: ContractSet,
) -> None:
    """A misnamed retriever used to pass while the catalogue was small, and fail only once it
    grew past `max_offered` (or on an engine that resumes the run)."""
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    small = fixture.model_copy(
        update={
            "tools": ["search_flights", "search_hotels", "check_rail"],
            "retrieval": ToolRetrieval(retriever="nope"),
        }
    )
    store = MemoryStore()
    with pytest.raises(ConfigError, match="retriever 'nope'; this engine has bm25"):
        run_fixture(small, catalogue, store)
    assert store.runs() == []


def test_an_always_offered_tool_without_a_contract_is_refused_before_the_run_is_stored(
    catalogue: ContractSet,
) -> None:
    """A typo in the `always` set used to drop the tool from every offer in silence."""
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    assert fixture.retrieval is not None
    typo = fixture.retrieval.model_copy(update={"always": ("search_flights", "serch_hotels")})
    store = MemoryStore()
    with pytest.raises(ConfigError, match="always names tools with no contract: serch_hotels"):
        run_fixture(fixture.model_copy(update={"retrieval": typo}), catalogue, store)
    assert store.runs() == []


def test_missing_bm25s_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)
    tool = ToolSpec(name="a_tool", description="does a thing", parameters={})
    with pytest.raises(ConfigError, match=r"pip install 'runner-fsm\[retrieval\]'"):
        Bm25Retriever([tool])


def _spec(name: str, description: str, *arguments: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {a: {"type": "string"} for a in arguments}},
    )


def test_selection_keeps_always_ranks_by_score_and_breaks_ties_by_catalogue_order() -> None:
    tools = [
        _spec("tool_a", "alpha"),
        _spec("tool_b", "beta"),
        _spec("tool_c", "gamma"),
        _spec("tool_d", "delta"),
    ]

    class Fixed:
        def scores(self, query: str) -> Sequence[float]:
            return [0.5, 0.9, 0.5 + 1e-9, 0.1]  # c ties a after rounding: a (earlier) wins

    retrieval = ToolRetrieval(max_offered=1, top_k=2, always=("tool_d", "not_a_tool"))
    chosen = select(retrieval, tools, Fixed(), "anything")
    assert [t.name for t in chosen] == ["tool_a", "tool_b", "tool_d"]  # catalogue order


def test_a_nan_score_ranks_last_and_leaves_the_others_in_order() -> None:
    """One NaN from a plugged-in retriever (a cosine of a zero vector) used to scramble the
    whole ranking: 0.1 won over 0.9 when a NaN sat between them."""
    tools = [_spec(name, "a tool") for name in ("tool_a", "tool_b", "tool_c", "tool_d")]

    class Scored:
        def __init__(self, scores: list[float]) -> None:
            self.given = scores

        def scores(self, query: str) -> Sequence[float]:
            return self.given

    retrieval = ToolRetrieval(max_offered=1, top_k=1)
    nan = float("nan")
    for scores, best in (
        ([0.1, nan, 0.9, nan], "tool_c"),
        ([nan, 0.9, nan, 0.1], "tool_b"),
        ([nan, nan, nan, 0.0], "tool_d"),
    ):
        assert [t.name for t in select(retrieval, tools, Scored(scores), "q")] == [best]
    two = ToolRetrieval(max_offered=1, top_k=2)
    assert [t.name for t in select(two, tools, Scored([nan] * 4), "q")] == ["tool_a", "tool_b"]


def test_bm25_reads_names_descriptions_and_argument_names() -> None:
    tools = [
        _spec("search_flights", "Scheduled airline options.", "origin", "destination"),
        _spec("convert_currency", "Money between two currencies.", "amount"),
        _spec("check_weather", "Forecast for a city.", "city", "date"),
    ]
    retriever = Bm25Retriever(tools)
    assert max(range(3), key=lambda i: retriever.scores("flight options")[i]) == 0  # name
    assert max(range(3), key=lambda i: retriever.scores("money")[i]) == 1  # description
    assert max(range(3), key=lambda i: retriever.scores("which city")[i]) == 2  # argument
    assert list(retriever.scores("zzz unknown words")) == [0.0, 0.0, 0.0]


def test_a_small_catalogue_is_offered_whole(catalogue: ContractSet) -> None:
    fixture = load_fixture(CATALOGUE / "catalogue_japan_trip.yaml", catalogue)
    small = fixture.model_copy(update={"tools": ["search_flights", "search_hotels", "check_rail"]})
    outcome: ScenarioRun = run_fixture(small, catalogue, MemoryStore())
    steps = [r for r in outcome.result.transitions if r.tokens_in is not None]
    assert all(r.offered is None and r.manifest_tokens for r in steps)


def test_an_unoffered_call_replays_from_a_jsonl_log_with_its_typed_observation(
    tmp_path: Path, catalogue: ContractSet
) -> None:
    """The refusal's observation keeps the tools the model was told it may use, and a replay
    from the log alone refuses the same call with the same list."""
    from runner.store import FanoutStore, JsonlLog  # noqa: PLC0415

    log = JsonlLog(tmp_path / "runs.jsonl")
    fixture = load_fixture(CATALOGUE / "catalogue_unoffered_call.yaml", catalogue)
    result = run_fixture(fixture, catalogue, FanoutStore(MemoryStore(), log)).result
    log.close()
    (recording,) = Recording.from_log(tmp_path / "runs.jsonl")
    refused = next(r for r in recording.transitions if r.result_class == "unknown_tool")
    assert refused.observation is not None
    assert list(getattr(refused.observation, "may_use", ())) == next(
        r.offered for r in result.transitions if r.trigger == "propose"
    )
    replayed = replay(recording, catalogue)
    assert replayed.identical, replayed.divergence
