"""Transition records, run headers and summaries, and the JSONL transition log.

Log format `runner-log/2`, one JSON object a line, runs one after another (`runner-log/1` is read
too: it is /2 without `observation` on `classify` transitions, whose `decision` and `reason`
some /1 runners filled in otherwise; see `_core.differing_fields`):
- `run_started`: `format`, `run_id`, `name`, `tenant`, `principal`, `started_at`, `task`,
  `tools`, `scopes`, `context`, `limits`, `policy`, `seed`, `annotations` (the caller's own data;
  logs written before it had `fixture` and `world` instead, read back into it), `system_prompt`,
  `model`
  (`{provider, name, base_url, fallback}`: the model that drove the run, no secrets; absent or
  null in logs written before it was recorded)
  `price` (`{input_usd_per_mtok, output_usd_per_mtok, source}` or null; absent in older logs),
  `fallback_price` (the same, for the requests the fallback model answered, or null; absent in
  older logs, which priced them at `price`),
  `tool_retrieval` (`{max_offered, top_k, always, retriever}` or null; absent in older logs),
  `durability`, `render_limit` (absent in older logs), `input_projection` (absent in older
  logs: 1)
- `transition`: one per transition, the keys of `TransitionRecord.to_json()` plus `run_id`;
  a `classify` transition keeps the call's typed observation (`observation`, tagged by `kind`);
  `cost_usd`, `offered` and `manifest_tokens` are absent in logs written before them
- `model_turn`: one per model request (the reply, its usage, when it arrived, whether the
  adapter's fallback model was asked: `fallback`, absent in older logs)
- `tool_output`: one per dispatched tool call (the full raw outcome, when it arrived)
- `run_finished`: `terminal`, `reason`, `attempts`, `model_steps`, `tokens_in`, `tokens_out`,
  `elapsed_s`, `waits_s`, `answer`, `operations`, `cost_usd` (absent in older logs)
Reading validates every line and names the first bad one (`LogFormatError`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    with_config,
)

from ..base._documents import TOO_LONG_NUMBER, DocumentProblem, read_text
from ..base._frozen import quick_init
from ..base.errors import LogFormatError, StoreCorrupt
from ..core.machine import Decision, Trigger
from ..core.observations import (
    ResultClass,
    ToolFoundNothing,
    ToolObservation,
    ToolSucceeded,
    TypedToolObservation,
)
from ..core.states import TERMINAL, State
from ..models.identity import ModelIdentity
from ..models.pricing import ModelPrice
from ..tools.retrieval import ToolRetrieval
from .recording import OUTPUT_ADAPTER, TURN_ADAPTER, RecordedOutput, RecordedTurn

LOG_FORMAT: Final = "runner-log/2"
READABLE_FORMATS: Final = frozenset({"runner-log/1", LOG_FORMAT})

_DEFERRED: Final = ConfigDict(defer_build=True)
"""Adapters and their schemas are built on first use, not at `import runner`."""


@with_config(_DEFERRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionRecord:
    """One transition of one run: enough, with its neighbours, to replay and grade the run."""

    run_id: str
    seq: int
    time: datetime
    from_state: State
    to_state: State
    trigger: Trigger
    tool: str | None = None
    call_id: str | None = None
    args: dict[str, Any] | None = None
    """The arguments as validated (None where the call was refused before validation)."""
    result_class: ResultClass | None = None
    attempt: int = 0
    """Admitted tool attempts so far in the run."""
    decision: Decision | None = None
    """The verdict on the call's outcome (`classify`), or the decision a move carries out."""
    latency_ms: float | None = None
    operation_key: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    wait_s: float | None = None
    """The wait slept before this transition (retries only)."""
    reason: str | None = None
    """Why a call was rejected, the verdict's reason, or why the run ended."""
    observation: TypedToolObservation | None = None
    """What the call came to (`classify` only), as `recorded_observation` keeps it. None on
    every other move, and on a `classify` recorded under `runner-log/1`."""
    approval: dict[str, str] | None = None
    """A write under approval: `verdict` (required, approved, denied), `approver`, `token_id`."""
    provenance: dict[str, str] | None = None
    """A write under approval with argument values first seen in a tool result: argument ->
    `task`, `model` or `tool:<tool>:<call id>` (None otherwise)."""
    cost_usd: float | None = None
    """What this transition's model request cost, at the run's price (None: no request, or an
    unpriced run; absent in logs written before cost was recorded)."""
    offered: list[str] | None = None
    """The tools this model request offered, when retrieval chose them from a larger catalogue
    (None: the run's whole allowed catalogue)."""
    manifest_tokens: int | None = None
    """About how many tokens this request's tool manifest took (runs with `tool_retrieval`)."""

    def to_json(self) -> dict[str, Any]:
        """The record as the log stores it; enums stay enums (they are their string values)."""
        data = asdict(self)
        data["from"] = data.pop("from_state")
        data["to"] = data.pop("to_state")
        data["time"] = self.time.isoformat()
        return data


quick_init(TransitionRecord)  # three built a step: the one class it pays for (see `quick_init`)


def recorded_observation(observation: ToolObservation) -> ToolObservation:
    """An observation as a `classify` record keeps it: an ok or empty result's body is left out
    (`result` is `{}`), since the call's `tool_output` record holds the whole raw outcome."""
    if isinstance(observation, ToolSucceeded | ToolFoundNothing):  # (not `replace`: per step)
        return type(observation)(call_id=observation.call_id, tool=observation.tool, result={})
    return observation


def states_visited(records: list[TransitionRecord]) -> list[State]:
    """The states a run passed through, starting where its first transition started."""
    if not records:
        return []
    return [records[0].from_state, *(record.to_state for record in records)]


Durability = Literal["transition", "step"]
"""How often a run commits: every transition (the default), or the transitions of one step
together. In both, a write's intent with its operation key is committed before the write is
dispatched, and its outcome before anything depends on it (`runner/store/step_commits.py`)."""


@with_config(_DEFERRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class RunHeader:
    """What a run was started with: enough to resume or replay it."""

    run_id: str
    name: str
    tenant: str
    principal: str
    started_at: datetime
    task: str
    tools: list[str]
    scopes: list[str]
    """The principal's scopes, as the runtime granted them."""
    context: dict[str, Any]
    """The semantic rules' context (e.g. the authorized dates), as JSON."""
    limits: dict[str, Any]
    policy: dict[str, Any]
    seed: int | None
    annotations: dict[str, Any] = field(default_factory=dict)
    """The caller's own data (`RunSpec.annotations`), e.g. the fixture a scenario run plays and
    where its simulated world lives."""
    system_prompt: str | None = None
    """What the model was told first (replay needs it: the transcript's digest covers it). None:
    a run stored before the runner recorded it."""
    model: ModelIdentity | None = None
    """The model that drove the run, so a resume continues with it (None: not recorded, a run
    stored before the runner recorded it)."""
    required_evidence: list[dict[str, Any]] = field(default_factory=list)
    """The completion gate's requirements (`RunSpec.required_evidence`), as JSON."""
    continues: dict[str, Any] | None = None
    """For the continuation of a run that waited for approval: the run it re-drives (`run_id`),
    the run whose operation keys it keeps (`key_scope`), and the decisions it continues with
    (`grants`)."""
    price: ModelPrice | None = None
    """What the run's model requests cost per token (None: unpriced, or stored before cost was
    recorded): a replay prices the recorded requests with it, whatever the table says by then."""
    fallback_price: ModelPrice | None = None
    """What the requests its adapter's fallback model answered cost per token (None: no
    fallback, or one no price was found for: its requests are unpriced). A header stored before
    it was recorded reads `price` here: the fallback's requests were priced at it."""
    tool_retrieval: ToolRetrieval | None = None
    """How the run's catalogue was offered (None: whole, or stored before retrieval existed)."""
    durability: Durability | None = None
    """How often the run commits, so a resume goes on committing as it began (None: stored
    before the runner recorded it; such a run resumes in the engine's mode)."""
    render_limit: int | None = None
    """The most characters of one tool result the model was shown (None: stored before it was
    recorded; such a run was most likely shown the default 4,000)."""
    input_projection: int = 1
    """How the run projected each request's input (`budget.INPUT_PROJECTION`); 1 in headers
    stored before it was recorded, which projected so."""
    contracts: dict[str, str] | None = None
    """The digest of every contract the run could call under (`contracts.contract_digests`),
    by tool: a resume under another contract for one of them is refused (None: stored before
    the runner recorded them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationSummary:
    key: str
    tool: str
    status: str


@with_config(_DEFERRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    run_id: str
    terminal: str
    reason: str
    attempts: int
    model_steps: int
    tokens_in: int
    tokens_out: int
    elapsed_s: float
    waits_s: list[float] = field(default_factory=list)
    answer: str | None = None
    operations: list[OperationSummary] = field(default_factory=list)
    prefill_per_step: list[int] = field(default_factory=list)
    """Input tokens of each model request: the transcript resent every step."""
    prefill_untruncated: int = 0
    """The cumulative prefill had no tool result been truncated (estimated for elided text)."""
    cost_usd: float | None = None
    """What the run's model requests cost in total (None: unpriced, or stored before cost was
    recorded)."""


LastMove = tuple[int, str, str | None, int]
"""A run's last transition as a listing reads it: seq, state, reason and attempts so far."""


def summary_unbacked(run_id: str, summary: RunSummary, last: LastMove | None) -> str | None:
    """What is wrong when a run's summary is not the one its last transition (`last`; None: no
    transition) backs: a row removed at the end, or the summary edited. None when they agree.
    The summary is a claim; the log is the record."""
    if last is not None and (last[1], last[2]) == (summary.terminal, summary.reason):
        if last[3] == summary.attempts:
            return None
        return (
            f"run {run_id}: its summary says attempts {summary.attempts}, but its last "
            f"transition (seq {last[0]}) says attempts {last[3]}: the summary was edited"
        )
    seq, state, reason, _ = last if last is not None else (0, "none", None, 0)
    if state not in TERMINAL:
        return (
            f"run {run_id} ended {summary.terminal}, but its log's last transition is {state} "
            f"(seq {seq}): its terminal transition is missing"
        )
    return (
        f"run {run_id}: its summary says {summary.terminal} ({summary.reason}), but its last "
        f"transition (seq {seq}) says {state} ({reason}): the summary was edited"
    )


def _older_header(data: Any) -> Any:
    """A header stored before `annotations` kept the fixture layer's `fixture` and `world` as
    fields of their own: they are read into `annotations`, so older runs still resume and grade.
    One stored before `fallback_price` priced its fallback's requests at `price`: read so."""
    if not isinstance(data, dict):
        return data
    if "fallback_price" not in data and data.get("price") is not None:
        data = {**data, "fallback_price": data["price"]}
    if not {"fixture", "world"} & data.keys():
        return data
    data = dict(data)
    fixture, world = data.pop("fixture", None), data.pop("world", None)
    annotations = data.get("annotations", {})
    if isinstance(annotations, dict):
        moved = {"fixture": fixture} if fixture is not None else {}
        moved |= {"world": world} if world else {}
        data["annotations"] = moved | annotations
    return data


HEADER_ADAPTER: TypeAdapter[RunHeader] = TypeAdapter(
    Annotated[RunHeader, BeforeValidator(_older_header)]
)
SUMMARY_ADAPTER: TypeAdapter[RunSummary] = TypeAdapter(RunSummary)
RECORD_ADAPTER: TypeAdapter[TransitionRecord] = TypeAdapter(TransitionRecord)


class _TransitionLine(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)
    type: Literal["transition"]
    run_id: str
    seq: int
    time: datetime
    from_: State = Field(alias="from")
    to: State
    trigger: Trigger
    tool: str | None
    call_id: str | None
    args: dict[str, Any] | None
    result_class: ResultClass | None
    attempt: int
    decision: Decision | None
    latency_ms: float | None
    operation_key: str | None
    tokens_in: int | None
    tokens_out: int | None
    wait_s: float | None
    reason: str | None
    observation: TypedToolObservation | None = None
    approval: dict[str, str] | None = None
    provenance: dict[str, str] | None = None
    cost_usd: float | None = None
    offered: list[str] | None = None
    manifest_tokens: int | None = None

    def record(self) -> TransitionRecord:
        # Not model_dump: the observation stays the typed value it was validated into.
        fields = {name: value for name, value in self if name not in {"type", "from_", "to"}}
        return TransitionRecord(from_state=self.from_, to_state=self.to, **fields)


def _dump(adapter: TypeAdapter[Any], value: object) -> dict[str, Any]:
    dumped: dict[str, Any] = adapter.dump_python(value, mode="json")
    return dumped


def started_line(header: RunHeader) -> str:
    body = {"type": "run_started", "format": LOG_FORMAT, **_dump(HEADER_ADAPTER, header)}
    return json.dumps(body, sort_keys=True)


def transition_line(record: TransitionRecord) -> str:
    return json.dumps({"type": "transition", **record.to_json()}, sort_keys=True)


def turn_line(turn: RecordedTurn) -> str:
    return json.dumps({"type": "model_turn", **_dump(TURN_ADAPTER, turn)}, sort_keys=True)


def output_line(output: RecordedOutput) -> str:
    return json.dumps({"type": "tool_output", **_dump(OUTPUT_ADAPTER, output)}, sort_keys=True)


def finished_line(summary: RunSummary) -> str:
    return json.dumps({"type": "run_finished", **_dump(SUMMARY_ADAPTER, summary)}, sort_keys=True)


@dataclass(slots=True)
class LoggedRun:
    """Everything a log holds about one run."""

    header: RunHeader
    transitions: list[TransitionRecord] = field(default_factory=list)
    turns: list[RecordedTurn] = field(default_factory=list)
    outputs: list[RecordedOutput] = field(default_factory=list)
    summary: RunSummary | None = None


def read_log(path: Path) -> list[LoggedRun]:
    """Read and validate a JSONL transition log; the first bad line raises `LogFormatError`."""
    try:
        lines = read_text(path).splitlines()
    except OSError as exc:
        raise LogFormatError(path, 0, f"cannot read: {exc.strerror}") from exc
    except DocumentProblem as exc:
        raise LogFormatError(path, exc.line, str(exc)) from exc
    runs: dict[str, LoggedRun] = {}
    inputs: set[tuple[str, str, int]] = set()  # (run, line type, ordinal) of every input read
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise LogFormatError(path, number, "nested too deeply to read") from exc
        except json.JSONDecodeError as exc:
            raise LogFormatError(path, number, f"not JSON ({exc.msg}); truncated?") from exc
        except ValueError as exc:  # after JSONDecodeError, its subclass
            raise LogFormatError(path, number, TOO_LONG_NUMBER) from exc
        if not isinstance(data, dict):
            raise LogFormatError(path, number, "a line must be a JSON object")
        try:
            _read_line(data, runs, inputs)
        except RecursionError as exc:
            raise LogFormatError(path, number, "nested too deeply to read") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise LogFormatError(path, number, f"{where}: {first['msg']}") from exc
        except ValueError as exc:
            raise LogFormatError(path, number, str(exc)) from exc
    return list(runs.values())


def _first_for_its_ordinal(
    inputs: set[tuple[str, str, int]], run_id: str, what: str, ordinal: int
) -> None:
    key = (run_id, what, ordinal)
    if key in inputs:
        raise ValueError(twice(run_id, what, ordinal))
    inputs.add(key)


def twice(run_id: str, what: str, ordinal: int) -> str:
    """What is wrong with a record holding two inputs for one ordinal."""
    return (
        f"run {run_id} {what} {ordinal} recorded twice (an edit: a re-drive would take one and "
        "never see the other)"
    )


def repeated_ordinal(items: Sequence[RecordedTurn] | Sequence[RecordedOutput]) -> int | None:
    """The first ordinal two of a run's recorded inputs share (None: each has its own). One
    set built over the ordinals: these are read on every resume."""
    if len({item.ordinal for item in items}) == len(items):
        return None
    seen: set[int] = set()
    for item in items:
        if item.ordinal in seen:
            return item.ordinal
        seen.add(item.ordinal)
    return None  # unreachable: the set was smaller than the list


Input = TypeVar("Input", RecordedTurn, RecordedOutput)


def distinct(
    items: list[Input], run_id: str, what: str, where: Path | str | None = None
) -> list[Input]:
    """A run's inputs of one kind as read (from the store `where`, when named), or
    `StoreCorrupt` where two share an ordinal: a row added or edited outside the runner, whose
    re-drive would silently take one of them. Every store's reader, and replay, check this."""
    ordinal = repeated_ordinal(items)
    if ordinal is not None:
        problem = twice(run_id, what, ordinal)
        raise StoreCorrupt(f"{where}: {problem}" if where is not None else problem)
    return items


def _without_type(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "type"}


def _read_line(
    data: dict[str, Any], runs: dict[str, LoggedRun], inputs: set[tuple[str, str, int]]
) -> None:
    kind = data.get("type")
    if kind == "run_started":
        if data.get("format") not in READABLE_FORMATS:
            known = " or ".join(sorted(READABLE_FORMATS))
            raise ValueError(f"format {data.get('format')!r} is not {known}")
        body = {k: v for k, v in data.items() if k not in {"type", "format"}}
        header = HEADER_ADAPTER.validate_python(body, strict=False)
        if header.run_id in runs:
            raise ValueError(f"run {header.run_id} started twice")
        runs[header.run_id] = LoggedRun(header)
        return
    run = runs.get(str(data.get("run_id")))
    if run is None:
        raise ValueError(f"line for run {data.get('run_id')!r} before its run_started line")
    if run.summary is not None:
        raise ValueError(f"line for run {run.header.run_id} after its run_finished line")
    if kind == "transition":
        record = _TransitionLine.model_validate(data).record()
        expected = len(run.transitions) + 1
        if record.seq != expected:
            raise ValueError(f"transition seq {record.seq}, expected {expected} (a gap or an edit)")
        run.transitions.append(record)
    elif kind == "model_turn":
        turn = TURN_ADAPTER.validate_python(_without_type(data))
        _first_for_its_ordinal(inputs, run.header.run_id, "model turn", turn.ordinal)
        run.turns.append(turn)
    elif kind == "tool_output":
        output = OUTPUT_ADAPTER.validate_python(_without_type(data))
        _first_for_its_ordinal(inputs, run.header.run_id, "tool output", output.ordinal)
        run.outputs.append(output)
    elif kind == "run_finished":
        run.summary = SUMMARY_ADAPTER.validate_python(_without_type(data))
    else:
        raise ValueError(f"unknown line type {kind!r}")
