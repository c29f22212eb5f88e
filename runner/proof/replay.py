"""Replay a recorded run: exactly (prove the record), or under another policy or budget.

A recording is everything the store or a JSONL log holds about one run: its header (the spec it
was started with), its transitions, and its inputs (model replies, tool outcomes). Replaying
re-drives the engine on those inputs alone, with no live model and no live tool, on a fake clock
that starts at the run's recorded start.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ..base.clock import FakeClock
from ..base.errors import ConfigError, LoadError, OutsideRecording, ReplayDivergence, StoreCorrupt
from ..core.budget import Limits, changed_limits
from ..core.machine import Trigger
from ..core.policy import Policy
from ..core.result_classes import COMMITS_WRITE
from ..core.states import TERMINAL
from ..core.stored_policy import stored_policy
from ..engine._admission import unavailable
from ..engine.engine import Engine, ReplayedRun, outside_a_loop
from ..record.recording import RecordedOutput, RecordedTurn
from ..record.spec import DEFAULT_SYSTEM_PROMPT, spec_from_header
from ..record.trace import RunHeader, RunSummary, TransitionRecord, distinct, read_log
from ..store.base import Store
from ..store.memory import MemoryStore
from ..tools.contracts import ContractSet
from ..tools.invocation import ToolImplementation, ToolInvocation, ToolResponse


@dataclass(slots=True, kw_only=True)
class Recording:
    header: RunHeader
    transitions: list[TransitionRecord]
    turns: list[RecordedTurn]
    outputs: list[RecordedOutput]
    summary: RunSummary | None

    @classmethod
    def from_store(cls, store: Store, run_id: str) -> Recording:
        header = store.header(run_id)
        if header is None:
            raise LoadError(f"no run {run_id} in the store")
        return cls(
            header=header,
            transitions=store.transitions(run_id),
            turns=store.turns(run_id),
            outputs=store.outputs(run_id),
            summary=store.summary(run_id),
        )

    @classmethod
    def from_log(cls, path: Path) -> list[Recording]:
        return [
            cls(
                header=run.header,
                transitions=run.transitions,
                turns=run.turns,
                outputs=run.outputs,
                summary=run.summary,
            )
            for run in read_log(path)
        ]


class _NoLiveTools:
    """Every contract's tool 'exists' for admission, except those the live run's toolbox did not
    have (`absent`); none is ever called in a replay."""

    def __init__(self, absent: frozenset[str] = frozenset()) -> None:
        self.absent = absent

    def implementation(self, tool: str) -> ToolImplementation | None:
        return None if tool in self.absent else self._refuse

    @staticmethod
    async def _refuse(invocation: ToolInvocation) -> ToolResponse:
        raise OutsideRecording(f"a live call to {invocation.tool}")


@dataclass(slots=True, kw_only=True)
class Replay:
    """The recorded trajectory beside the replayed one."""

    recording: Recording
    replayed: ReplayedRun
    divergence: ReplayDivergence | None = None
    policy: str = "default"
    changes: list[str] = field(default_factory=list)
    """What a counterfactual replay changed (`max_attempts 5`, `policy naive`)."""

    @property
    def identical(self) -> bool:
        """An exact replay that re-drove every recorded transition, and no more, the same way."""
        if self.divergence is not None or self.changes:
            return False
        return self.replayed.result is not None or self.unfinished

    @property
    def unfinished(self) -> bool:
        """The recording stops before the run ended, and the replay matched all of it."""
        recorded = self.recording.transitions
        return (
            self.recording.summary is None
            and self.replayed.result is None
            and len(self.replayed.records) >= len(recorded)
        )

    def committed_writes(self) -> int:
        result = self.replayed.result
        ops = result.operations if result is not None else []
        return sum(op.status == "committed" for op in ops)


def _absent_tools(recording: Recording, contracts: ContractSet) -> frozenset[str]:
    """The tools the live run's toolbox had no implementation for, as its record shows: a call
    to an offered tool answered `unknown_tool` (the toolbox is asked last, once the contract,
    audience and offer, which a replay shares, have let it through), and a lookup that was
    not available."""
    offered = {
        name
        for name in recording.header.tools
        if name in contracts and contracts[name].contract.audience == "model"
    }
    records = recording.transitions
    absent = {r.tool for r in records if r.result_class == "unknown_tool" and r.tool in offered}
    for before, record in itertools.pairwise(records):
        lookup = before.tool or ""
        if before.trigger == Trigger.RECONCILE and record.reason == unavailable(lookup):
            absent.add(lookup)
    return frozenset(absent)


def _policy_changes(before: Policy, after: Policy) -> list[str]:
    """`max_retries 0`, `decisions.permanent abstain`: what another policy file changes."""
    changes: list[str] = []
    for name in Policy.model_fields:
        old, new = getattr(before, name), getattr(after, name)
        if name == "decisions":
            changes += [
                f"decisions.{kind} {decision}"
                for kind, decision in sorted(new.items())
                if old.get(kind) != decision
            ]
        elif old != new:
            shown = new.model_dump() if isinstance(new, Policy | Limits) else new
            changes.append(f"{name} {shown}")
    return changes


def check_contracts_cover(header: RunHeader, contracts: ContractSet) -> None:
    """Refuse contracts that do not declare every tool the run was offered: a run can only
    have started with contracts for all of them, so these are another set (replayed or graded
    with them, its calls would read as `unknown_tool`, a divergence that is not the run's)."""
    missing = [name for name in header.tools if name not in contracts]
    if missing:
        raise ConfigError(
            f"run {header.run_id} was offered tools these contracts do not declare: "
            f"{', '.join(sorted(missing))}; give the contracts it ran with "
            "(on the command line: `runner --contracts DIR replay ...`)"
        )


def check_whole(recording: Recording) -> None:
    """Refuse (`StoreCorrupt`) a recording no reader would give: transitions not numbered 1, 2,
    ... in order, or two inputs for one ordinal (a re-drive would take one, never the other).
    The API takes a `Recording` built by hand, so a replay checks what the readers check."""
    run_id = recording.header.run_id
    for expected, record in enumerate(recording.transitions, 1):
        if record.seq != expected:
            raise StoreCorrupt(
                f"run {run_id} transition seq {record.seq} where {expected} belongs "
                "(a gap or an edit)"
            )
    distinct(recording.turns, run_id, "model turn")
    distinct(recording.outputs, run_id, "tool output")


def replay(
    recording: Recording,
    contracts: ContractSet,
    *,
    policy: Policy | None = None,
    limits: Limits | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
) -> Replay:
    """Replay exactly (no `policy`/`limits`), or counterfactually under the ones given.

    `system_prompt`: the prompt of a run whose header does not record one (stored before the
    runner recorded it); a recorded one always wins.
    """
    outside_a_loop("replay_run_sync", "await runner.replay_run(...)")
    header = recording.header
    check_contracts_cover(header, contracts)
    check_whole(recording)
    recorded_policy = stored_policy(header.policy)
    recorded_limits = stored_limits(header)
    use_policy = policy or recorded_policy
    use_limits = limits or recorded_limits
    if use_limits.max_cost_usd is not None and header.price is None:
        raise ConfigError(  # as a live run is refused: there is no cost to bound
            f"run {header.run_id} was not priced: max_cost_usd {use_limits.max_cost_usd} has "
            "nothing to bound (a money budget needs the run's recorded price)"
        )
    fallback = header.model.fallback if header.model is not None else None
    if use_limits.max_cost_usd is not None and fallback and header.fallback_price is None:
        raise ConfigError(  # as a live run with an unpriced fallback is refused
            f"run {header.run_id}'s fallback model {fallback} was not priced: max_cost_usd "
            f"{use_limits.max_cost_usd} cannot bound the requests it answers"
        )
    changes = [
        f"{name} {getattr(use_limits, name)}"
        for name in changed_limits(recorded_limits, use_limits)
    ]
    if use_policy.name != recorded_policy.name:
        changes.append(f"policy {use_policy.name}")
    elif use_policy != recorded_policy:
        changes += _policy_changes(recorded_policy, use_policy)
    clock = FakeClock(header.started_at)
    engine = Engine(
        contracts=contracts,
        toolbox=_NoLiveTools(_absent_tools(recording, contracts)),
        store=MemoryStore(),
        clock=clock,
        policy=use_policy,
        system_prompt=system_prompt,
    )
    drive = engine.replay(
        header.run_id,
        spec_from_header(header, limits=use_limits),
        recording.turns,
        recording.outputs,
        expected=None if changes else recording.transitions,
        recorded_seconds=recorded_limits.max_seconds,
    )
    try:
        with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
            replayed = runner.run(drive)
    except ReplayDivergence as exc:
        return Replay(
            recording=recording,
            replayed=ReplayedRun(records=[], result=None),
            divergence=exc,
            policy=use_policy.name,
        )
    divergence = None
    if not changes and recording.summary is not None and replayed.result is not None:
        divergence = summary_divergence(recording.summary, replayed.result.summary())
    return Replay(
        recording=recording,
        replayed=replayed,
        divergence=divergence,
        policy=use_policy.name,
        changes=changes,
    )


def stored_limits(header: RunHeader) -> Limits:
    """The limits a run recorded; `StoreCorrupt` naming the run when they no longer load."""
    try:
        return Limits.model_validate(header.limits)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise StoreCorrupt(
            f"run {header.run_id}: its stored limits do not load: {where}: {problem['msg']}"
        ) from exc


# What a run's summary says that its replay must say again. Elapsed time is left out: it is
# replayed from the recorded inputs' times, but the engine's own time between them is not an input.
_SUMMARY_FIELDS: Final = (
    "terminal", "reason", "attempts", "model_steps", "tokens_in", "tokens_out", "waits_s",
    "answer", "operations", "prefill_per_step", "prefill_untruncated", "cost_usd",
)  # fmt: skip


def _comparable(summary: RunSummary, name: str) -> Any:
    value = getattr(summary, name)
    if name == "operations":
        return [(op.key, op.tool, op.status) for op in value]
    if name == "waits_s":
        return [round(wait, 6) for wait in value]
    return value


def summary_divergence(recorded: RunSummary, replayed: RunSummary) -> ReplayDivergence | None:
    """The recorded `run_finished` summary against the one the replay came to, field by field."""
    differing = [
        (name, _comparable(recorded, name), _comparable(replayed, name))
        for name in _SUMMARY_FIELDS
        if _comparable(recorded, name) != _comparable(replayed, name)
    ]
    if not differing:
        return None
    return ReplayDivergence(
        "run_finished",
        ", ".join(f"{name}={want!r}" for name, want, _ in differing),
        ", ".join(f"{name}={got!r}" for name, _, got in differing),
    )


def _ending(records: list[TransitionRecord], terminal: str | None, reason: str | None) -> str:
    seq = records[-1].seq if records else 0
    return f"seq {seq}, {terminal} ({reason})" if terminal else f"seq {seq}, {reason}"


def describe(replay: Replay) -> str:
    """One sentence: what the replay proved, or where the other policy would have taken the run."""
    recording, replayed = replay.recording, replay.replayed
    if replay.divergence is not None:
        return str(replay.divergence)
    result = replayed.result
    if replay.identical and replay.unfinished:
        return (
            f"identical as far as it goes: {len(recording.transitions)} transitions re-driven; "
            f"the recording stops before the run ended ({replayed.outside} is not in it)"
        )
    if not replay.changes and result is None:
        return (
            f"divergence at seq {len(replayed.records) + 1}: the recording has no "
            f"{replayed.outside}, but its transitions go on to seq {len(recording.transitions)}"
        )
    if replay.identical:
        assert result is not None
        return (
            f"identical: {len(replayed.records)} transitions re-driven from the recording, "
            f"{result.terminal.value} ({result.reason})"
        )
    recorded = _recorded_side(recording)
    with_what = ", ".join(replay.changes)
    if result is None:
        stop = _ending(replayed.records, None, f"outside_recording ({replayed.outside})")
        return f"with {with_what} the replay stops at {stop}; recorded: {recorded}"
    would = _ending(replayed.records, result.terminal.value, result.reason)
    stand_in = " (its final answer is not in the recording)" if replayed.stood_in else ""
    return (
        f"with {with_what} the run would have stopped at {would}, "
        f"{replay.committed_writes()} committed writes{stand_in}; recorded: {recorded}"
    )


def _recorded_side(recording: Recording) -> str:
    """What the run did, from its transitions (the terminal record, and each write key's last
    classification), never from its summary; a summary that says otherwise is named."""
    records = recording.transitions
    last = records[-1] if records else None
    ended = last is not None and last.to_state in TERMINAL
    terminal, reason = (last.to_state, last.reason) if ended and last else (None, "unfinished")
    settled: dict[str, str | None] = {}
    for record in records:
        if record.trigger == Trigger.CLASSIFY and record.operation_key is not None:
            settled[record.operation_key] = record.result_class
    writes = sum(result in COMMITS_WRITE for result in settled.values())
    said = f"{_ending(records, terminal, reason)}, {writes} committed writes"
    summary = recording.summary
    if summary is None:
        return said
    claimed = sum(op.status == "committed" for op in summary.operations)
    if (summary.terminal, summary.reason, claimed) != (terminal, reason, writes):
        said += (
            f" (its summary says {summary.terminal} ({summary.reason}), {claimed} committed "
            "writes, which its transitions do not)"
        )
    return said
