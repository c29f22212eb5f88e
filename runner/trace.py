"""Transition records, and the JSONL transition log: its format, writer and validating reader.

Log format `runner-log/1`, one JSON object a line:
- `{"type": "run_started", "format": "runner-log/1", "run_id", "name", "tenant", "principal",
  "started_at", "limits", "policy", "seed"}`
- `{"type": "transition", ...}`: one per transition, the keys of `TransitionRecord.to_json()`
- `{"type": "run_finished", "run_id", "terminal", "reason", "attempts", "model_steps", "tokens_in",
  "tokens_out", "elapsed_s", "waits_s", "answer"}`
Runs may follow one another in one file. Reading checks every line and names the first bad one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import LogFormatError

LOG_FORMAT: Final = "runner-log/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionRecord:
    """One transition of one run: enough, with its neighbours, to replay and grade the run."""

    run_id: str
    seq: int
    time: datetime
    from_state: str
    to_state: str
    trigger: str
    tool: str | None = None
    call_id: str | None = None
    args: dict[str, Any] | None = None
    """The arguments as validated (None where the call was refused before validation)."""
    result_class: str | None = None
    attempt: int = 0
    """Admitted tool attempts so far in the run."""
    decision: str | None = None
    latency_ms: float | None = None
    operation_key: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    wait_s: float | None = None
    """The wait slept before this transition (retries only)."""
    reason: str | None = None
    """Why the run ended (terminal transitions) or why a decision was overridden."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["from"] = data.pop("from_state")
        data["to"] = data.pop("to_state")
        data["time"] = self.time.isoformat()
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHeader:
    run_id: str
    name: str
    tenant: str
    principal: str
    started_at: datetime
    limits: dict[str, Any]
    policy: str
    seed: int | None


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


class _StartedLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["run_started"]
    format: Literal["runner-log/1"]
    run_id: str
    name: str
    tenant: str
    principal: str
    started_at: datetime
    limits: dict[str, Any]
    policy: str
    seed: int | None


class _TransitionLine(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["transition"]
    run_id: str
    seq: int
    time: datetime
    from_: str = Field(alias="from")
    to: str
    trigger: str
    tool: str | None
    call_id: str | None
    args: dict[str, Any] | None
    result_class: str | None
    attempt: int
    decision: str | None
    latency_ms: float | None
    operation_key: str | None
    tokens_in: int | None
    tokens_out: int | None
    wait_s: float | None
    reason: str | None


class _FinishedLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["run_finished"]
    run_id: str
    terminal: str
    reason: str
    attempts: int
    model_steps: int
    tokens_in: int
    tokens_out: int
    elapsed_s: float
    waits_s: list[float]
    answer: str | None


def started_line(header: RunHeader) -> str:
    data = asdict(header)
    data["started_at"] = header.started_at.isoformat()
    return json.dumps({"type": "run_started", "format": LOG_FORMAT, **data}, sort_keys=True)


def transition_line(record: TransitionRecord) -> str:
    return json.dumps({"type": "transition", **record.to_json()}, sort_keys=True)


def finished_line(summary: RunSummary) -> str:
    return json.dumps({"type": "run_finished", **asdict(summary)}, sort_keys=True)


@dataclass(slots=True)
class LoggedRun:
    header: RunHeader
    transitions: list[TransitionRecord] = field(default_factory=list)
    summary: RunSummary | None = None


def read_log(path: Path) -> list[LoggedRun]:
    """Read and validate a JSONL transition log; the first bad line raises `LogFormatError`."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LogFormatError(path, 0, f"cannot read: {exc.strerror}") from exc
    runs: dict[str, LoggedRun] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LogFormatError(path, number, f"not JSON ({exc.msg}); truncated?") from exc
        if not isinstance(data, dict):
            raise LogFormatError(path, number, "a line must be a JSON object")
        try:
            _read_line(data, runs)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise LogFormatError(path, number, f"{where}: {first['msg']}") from exc
        except ValueError as exc:
            raise LogFormatError(path, number, str(exc)) from exc
    return list(runs.values())


def _read_line(data: dict[str, Any], runs: dict[str, LoggedRun]) -> None:
    kind = data.get("type")
    if kind == "run_started":
        started = _StartedLine.model_validate(data)
        if started.run_id in runs:
            raise ValueError(f"run {started.run_id} started twice")
        fields = started.model_dump(exclude={"type", "format"})
        runs[started.run_id] = LoggedRun(RunHeader(**fields))
        return
    run = runs.get(str(data.get("run_id")))
    if run is None:
        raise ValueError(f"line for run {data.get('run_id')!r} before its run_started line")
    if run.summary is not None:
        raise ValueError(f"line for run {run.header.run_id} after its run_finished line")
    if kind == "transition":
        line = _TransitionLine.model_validate(data)
        expected = len(run.transitions) + 1
        if line.seq != expected:
            raise ValueError(f"transition seq {line.seq}, expected {expected} (a gap or an edit)")
        fields = line.model_dump(exclude={"type", "from_", "to"})
        run.transitions.append(TransitionRecord(from_state=line.from_, to_state=line.to, **fields))
    elif kind == "run_finished":
        run.summary = RunSummary(**_FinishedLine.model_validate(data).model_dump(exclude={"type"}))
    else:
        raise ValueError(f"unknown line type {kind!r}")
