"""How a run is shown, by the CLI and the service: one line per transition for people, one JSON
object per run for tools.

The JSON object is a public interface (docs/reference/json-output.md): keys are only ever added.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from ..base.errors import StoreCorrupt
from ..core.budget import Limits, limit_spent
from ..engine.effects import FAILED_PREFIX
from ..record.recording import RecordedTurn
from ..record.spec import RunResult
from ..record.trace import (
    OperationSummary,
    RunHeader,
    RunSummary,
    TransitionRecord,
    states_visited,
    summary_unbacked,
)
from .grading import FixtureGrade
from .replay import Replay

_TRANSITION_KEYS = (
    "seq", "from", "to", "trigger", "tool", "call_id", "args", "result_class", "attempt",
    "decision", "latency_ms", "operation_key", "tokens_in", "tokens_out", "wait_s", "reason",
    "time", "observation", "approval", "provenance", "cost_usd", "offered", "manifest_tokens",
)  # fmt: skip


# What a terminal would act on instead of showing: C0 and C1 controls (ESC, NUL, CR, LF, TAB...),
# DEL, Unicode line and paragraph separators, bidirectional overrides that reorder a line, and
# invisible format characters (zero-width spaces and joiners, BOM, soft hyphen) that would make
# a look-alike tool name print exactly like the real one.
_INVISIBLE: Final = "\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff"
_CONTROL: Final = re.compile(
    f"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069{_INVISIBLE}]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`value` as text that shows on one line exactly as written: every control character (an
    ANSI escape, NUL, CR, a newline...) is shown escaped, so text from a model or a tool can
    neither drive the terminal nor forge a line of the report."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(_escape, text)


# C0 controls in json.dumps output are its own line breaks and indentation: strings escape them.
_RAW_IN_JSON: Final = re.compile(
    f"[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069{_INVISIBLE}]"
)


def printable_json(text: str) -> str:
    """JSON text whose strings' remaining control characters (json.dumps escapes only C0 ones)
    are written as `\\uXXXX` escapes: the same JSON, safe to show on a terminal."""
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


@dataclass(slots=True, kw_only=True)
class RunView:
    """What the report shows of a run, whether it just ran or was read back from a store."""

    run_id: str
    name: str
    terminal: str | None
    reason: str | None
    answer: str | None
    attempts: int
    model_steps: int
    tokens_in: int
    tokens_out: int
    elapsed_s: float | None
    waits_s: list[float]
    transitions: list[TransitionRecord]
    operations: list[OperationSummary] = field(default_factory=list)
    holds: int | None = None
    prefill_per_step: list[int] = field(default_factory=list)
    prefill_untruncated: int | None = None
    cost_usd: float | None = None
    """What the model requests cost in total (None: an unpriced run)."""
    limit_spent: str | None = None
    """When a bound ended the run: which limit, and how to raise it."""

    @classmethod
    def of_result(cls, result: RunResult, holds: int | None) -> RunView:
        view = cls.of_summary(result.name, result.summary(), result.transitions)
        view.holds = holds
        view.limit_spent = result.limit_spent
        return view

    @classmethod
    def of_stored(
        cls, header: RunHeader, summary: RunSummary | None, transitions: list[TransitionRecord]
    ) -> RunView:
        if summary is not None:
            last = transitions[-1] if transitions else None
            unbacked = summary_unbacked(
                header.run_id,
                summary,
                (last.seq, last.to_state, last.reason, last.attempt) if last else None,
            )
            if unbacked is not None:  # a row removed at the end, or the summary edited
                raise StoreCorrupt(unbacked)
            view = cls.of_summary(header.name, summary, transitions)
            # A header whose limits no longer load still shows; only the hint goes.
            with contextlib.suppress(ValidationError):
                view.limit_spent = limit_spent(summary.reason, Limits.model_validate(header.limits))
            return view
        last = transitions[-1] if transitions else None  # unfinished: what the log says so far
        return cls(
            run_id=header.run_id,
            name=header.name,
            terminal=None,
            reason=None,
            answer=None,
            attempts=last.attempt if last else 0,
            model_steps=sum(1 for r in transitions if r.tokens_in is not None),
            tokens_in=sum(r.tokens_in or 0 for r in transitions),
            tokens_out=sum(r.tokens_out or 0 for r in transitions),
            elapsed_s=None,
            waits_s=[r.wait_s for r in transitions if r.wait_s is not None],
            transitions=transitions,
            prefill_per_step=[r.tokens_in for r in transitions if r.tokens_in is not None],
            cost_usd=_cost_so_far(transitions),
        )

    @classmethod
    def not_started(cls, run_id: str, name: str) -> RunView:
        """A run accepted and not started yet: nothing has happened in it."""
        return cls(
            run_id=run_id,
            name=name,
            terminal=None,
            reason=None,
            answer=None,
            attempts=0,
            model_steps=0,
            tokens_in=0,
            tokens_out=0,
            elapsed_s=None,
            waits_s=[],
            transitions=[],
        )

    @classmethod
    def of_summary(
        cls, name: str, summary: RunSummary, transitions: list[TransitionRecord]
    ) -> RunView:
        return cls(
            run_id=summary.run_id,
            name=name,
            terminal=summary.terminal,
            reason=summary.reason,
            answer=summary.answer,
            attempts=summary.attempts,
            model_steps=summary.model_steps,
            tokens_in=summary.tokens_in,
            tokens_out=summary.tokens_out,
            elapsed_s=summary.elapsed_s,
            waits_s=summary.waits_s,
            transitions=transitions,
            operations=summary.operations,
            prefill_per_step=summary.prefill_per_step,
            prefill_untruncated=summary.prefill_untruncated,
            cost_usd=summary.cost_usd,
        )


def _cost_so_far(transitions: list[TransitionRecord]) -> float | None:
    costs = [r.cost_usd for r in transitions if r.cost_usd is not None]
    return sum(costs) if costs else None


def _steps_cost(view: RunView) -> list[float | None]:
    """Each model step's cost, in order (None where a step was not priced)."""
    return [r.cost_usd for r in view.transitions if r.tokens_in is not None]


def _steps_manifest(view: RunView) -> list[int | None]:
    """Each model step's tool-manifest tokens, in order (None: not recorded)."""
    return [r.manifest_tokens for r in view.transitions if r.tokens_in is not None]


def transition_json(record: TransitionRecord) -> dict[str, Any]:
    data = record.to_json()
    return {key: data[key] for key in _TRANSITION_KEYS}


def run_json(view: RunView, expect: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "run_id": view.run_id,
        "fixture": view.name,
        "terminal": view.terminal,
        "reason": view.reason,
        "limit_spent": view.limit_spent,
        "answer": view.answer,
        "attempts": view.attempts,
        "model_steps": view.model_steps,
        "tokens": {
            "input": view.tokens_in,
            "output": view.tokens_out,
            "total": view.tokens_in + view.tokens_out,
        },
        "elapsed_s": round(view.elapsed_s, 6) if view.elapsed_s is not None else None,
        "waits_s": [round(w, 6) for w in view.waits_s],
        "states": states_visited(view.transitions),
        "transitions": [transition_json(r) for r in view.transitions],
        "holds": view.holds,
        "operation_keys": [
            {"key": op.key, "tool": op.tool, "status": op.status} for op in view.operations
        ],
        "context": {
            "input_tokens_per_step": view.prefill_per_step,
            "cumulative_prefill": sum(view.prefill_per_step),
            "cumulative_prefill_without_truncation": view.prefill_untruncated,
            "cost_usd_per_step": _steps_cost(view),
            "manifest_tokens_per_step": _steps_manifest(view),
        },
        "cost_usd": view.cost_usd,
        "expect": expect,
    }


def started_as(header: RunHeader) -> dict[str, Any]:
    """How a stored run was started, from its header: what a resume or a replay goes on with
    (a None: not recorded, a run stored before the runner recorded it)."""
    model = header.model
    return {
        "durability": header.durability,
        "seed": header.seed,
        "model": None if model is None else f"{model.provider}:{model.name}",
        "tenant": header.tenant,
        "started_at": header.started_at.isoformat(),
    }


def started_as_line(header: RunHeader) -> str:
    shown = "  ".join(f"{k} {_dash(v)}" for k, v in started_as(header).items())
    return printable(f"  started as: {shown}")


@dataclass(frozen=True, slots=True)
class RequestsSent:
    """What a stored run's model requests were sent as, read from its turns (`requests_sent`)."""

    output_limits: list[int | None]
    """The output limit each request was sent (None: none, or a turn stored before limits)."""
    fallback: list[int]
    """The ordinals (from 1) of the requests asked of the adapter's fallback model."""
    failed: list[int]
    """The ordinals of the requests that failed (unavailable, rejected, timed out), either
    model's."""


def requests_sent(turns: list[RecordedTurn]) -> RequestsSent:
    """What `stored_run_json` and `show` tell of each model request, from the run's turns."""
    return RequestsSent(
        output_limits=[turn.max_output_tokens for turn in turns],
        fallback=[turn.ordinal for turn in turns if turn.fallback],
        failed=[turn.ordinal for turn in turns if turn.stop_reason.startswith(FAILED_PREFIX)],
    )


def stored_run_json(header: RunHeader, view: RunView, sent: RequestsSent) -> dict[str, Any]:
    """`show --json` of a stored run: `run_json`, with how the run was started, the output
    limit each model request was sent (`max_output_tokens_per_step`), the requests asked of the
    fallback model (`fallback_requests`, their ordinals) and those that failed
    (`failed_requests`)."""
    data = run_json(view, None)
    data["started_as"] = started_as(header)
    data["context"]["max_output_tokens_per_step"] = sent.output_limits
    data["context"]["fallback_requests"] = sent.fallback
    data["context"]["failed_requests"] = sent.failed
    return data


def fallback_line(header: RunHeader, sent: RequestsSent) -> str | None:
    """`show`'s line naming the requests asked of the fallback model, and those of them that
    failed (None: it was not asked)."""
    if not sent.fallback:
        return None
    model = header.model
    name = model.fallback if model is not None and model.fallback else "the fallback model"
    asked = ", ".join(str(n) for n in sent.fallback)
    failed = ", ".join(str(n) for n in sent.fallback if n in sent.failed)
    return printable(
        f"  fallback: {name} was asked model requests {asked}"
        + (f" (failed: {failed})" if failed else "")
    )


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def transition_line(record: TransitionRecord) -> str:
    latency = "-" if record.latency_ms is None else f"{record.latency_ms:.0f} ms"
    extra = ""
    if record.wait_s is not None:
        extra += f"  wait {record.wait_s:g} s"
    if record.reason is not None:
        extra += f"  ({record.reason})"
    if record.operation_key is not None:
        extra += f"  key {record.operation_key}"
    if record.approval is not None:
        who = record.approval.get("approver")
        extra += f"  approval {record.approval.get('verdict')}" + (f" by {who}" if who else "")
    if record.offered is not None:  # tool retrieval chose what this request offered
        extra += f"  offered {', '.join(record.offered)}"
    if record.provenance is not None:
        extra += "  from " + ", ".join(
            f"{name}={source}" for name, source in sorted(record.provenance.items())
        )
    return printable(
        f"  {record.seq:>3}  {record.from_state + ' -> ' + record.to_state:<20} "
        f"{record.trigger:<12} {_dash(record.tool):<15} {_dash(record.call_id):<10} "
        f"{_dash(record.result_class):<18} "
        f"attempt {record.attempt:<3} {_dash(record.decision):<14} {latency:>8}{extra}"
    )


def context_table(view: RunView) -> str:
    """Input tokens per model step and the running prefill: how the loop's cost grows (and each
    step's cost in money, for a priced run)."""
    costs, manifests = _steps_cost(view), _steps_manifest(view)
    priced = any(cost is not None for cost in costs)
    listed = any(tokens is not None for tokens in manifests)
    lines = [
        "  step  input_tokens  cumulative_prefill"
        + ("  manifest_tokens" if listed else "")
        + ("      cost_usd" if priced else "")
    ]
    total = 0
    for step, tokens in enumerate(view.prefill_per_step, start=1):
        total += tokens
        cost = costs[step - 1] if step <= len(costs) else None
        manifest = manifests[step - 1] if step <= len(manifests) else None
        shown = f"  {_dash(manifest):>15}" if listed else ""
        money = f"  {'-' if cost is None else f'{cost:.6f}':>12}" if priced else ""
        lines.append(f"  {step:>4}  {tokens:>12}  {total:>18}{shown}{money}")
    if listed:
        sent = sum(tokens or 0 for tokens in manifests)
        lines.append(f"  tool manifests sent: {sent} tokens")
    if view.prefill_untruncated is not None and view.prefill_untruncated != total:
        lines.append(
            f"  without truncation the cumulative prefill would be {view.prefill_untruncated}"
        )
    return "\n".join(lines)


def run_text(view: RunView, heading: str) -> str:
    """The run for people: one line per transition; every value from outside made printable."""
    lines = [printable(f"{heading}  run {view.run_id}")]
    lines.extend(transition_line(record) for record in view.transitions)
    waits = ", ".join(f"{w:g}" for w in view.waits_s)
    elapsed = "-" if view.elapsed_s is None else f"{view.elapsed_s:g} s"
    outcome = printable(f"{view.terminal} ({view.reason})") if view.terminal else "not finished"
    lines.append(
        f"  => {outcome}  attempts {view.attempts}  steps {view.model_steps}  "
        f"tokens {view.tokens_in + view.tokens_out}  {elapsed}  waits [{waits}]"
    )
    if view.cost_usd is not None:
        lines.append(f"  cost: ${view.cost_usd:.6f}")
    if view.holds is not None:
        lines.append(f"  holds: {view.holds}")
    for op in view.operations:
        lines.append(printable(f"  operation {op.key} ({op.tool}): {op.status}"))
    if view.answer:
        lines.append(f"  answer: {printable(view.answer)}")
    if view.limit_spent is not None:
        lines.append(f"  limit: {view.limit_spent}")
    return "\n".join(lines)


def _cell(record: TransitionRecord | None) -> str:
    if record is None:
        return ""
    parts = [f"{record.from_state}->{record.to_state}", record.trigger]
    parts += [v for v in (record.tool, record.result_class, record.decision) if v is not None]
    return printable(" ".join(parts))


def side_by_side(recorded: list[TransitionRecord], replayed: list[TransitionRecord]) -> str:
    """Two trajectories, seq by seq; `|` marks where they differ."""
    width = max([len(_cell(r)) for r in recorded] + [len("recorded")])
    lines = [f"  seq  {'recorded':<{width}}   replayed"]
    for index in range(max(len(recorded), len(replayed))):
        left = _cell(recorded[index]) if index < len(recorded) else ""
        right = _cell(replayed[index]) if index < len(replayed) else ""
        mark = " " if left == right else "|"
        lines.append(f"  {index + 1:>3}  {left:<{width}} {mark} {right}")
    return "\n".join(lines)


def replay_json(replay: Replay, sentence: str) -> dict[str, Any]:
    result = replay.replayed.result
    return {
        "run_id": replay.recording.header.run_id,
        "fixture": replay.recording.header.name,
        "identical": replay.identical,
        "divergence": str(replay.divergence) if replay.divergence else None,
        "changes": replay.changes,
        "terminal": result.terminal.value if result else None,
        "reason": result.reason if result else "outside_recording",
        "outside": replay.replayed.outside,
        "committed_writes": replay.committed_writes(),
        "recorded": [transition_json(r) for r in replay.recording.transitions],
        "replayed": [transition_json(r) for r in replay.replayed.records],
        "summary": sentence,
    }


def _seeds(seeds: list[int | None]) -> str:
    """`0..2` for a run of consecutive seeds, else the list; `-` for a run without one."""
    known = [seed for seed in seeds if seed is not None]
    if len(known) != len(seeds) or not known:
        return ",".join("-" if seed is None else str(seed) for seed in seeds) or "-"
    if len(known) > 1 and known == list(range(known[0], known[0] + len(known))):
        return f"{known[0]}..{known[-1]}"
    return ",".join(str(seed) for seed in known)


def _repeated_seeds(fixture: FixtureGrade) -> int:
    known = [seed for seed in fixture.seeds if seed is not None]
    return len(known) - len(set(known))


def grade_text(
    grades: list[FixtureGrade],
    base_seed: int | None = None,
    not_graded: dict[str, str] | None = None,
) -> str:
    """pass^k per fixture with its own k and seeds; pass^k overall only when every k is one;
    then how many stored runs could not be graded (each is named on stderr)."""
    width = max([len(g.fixture) for g in grades] + [len("fixture")])
    lines = [f"{'fixture':<{width}}  trials  pass^k    seeds   failed checks"]
    for fixture in grades:
        passed = sum(trial.passed for trial in fixture.trials)
        failed: dict[str, int] = {}
        for trial in fixture.trials:
            for check in trial.failed:
                failed[check.name] = failed.get(check.name, 0) + 1
        names = ", ".join(f"{name} ({count}/{fixture.k})" for name, count in failed.items())
        verdict = f"pass^{fixture.k}" if fixture.pass_k else "FAIL"
        lines.append(
            printable(
                f"{fixture.fixture:<{width}}  {passed}/{fixture.k:<4}  {verdict:<8}  "
                f"{_seeds(fixture.seeds):<6}  {names}"
            ).rstrip()
        )
        repeated = _repeated_seeds(fixture)
        if repeated:
            lines.append(
                f"{'':<{width}}    note: {repeated} of {fixture.k} trials repeat a seed "
                "(a scripted fixture then repeats the same trial)"
            )
        for trial in fixture.trials:
            for check in trial.failed:
                lines.append(
                    f"{'':<{width}}    {trial.run_id[:8]} {printable(check.name)}: "
                    f"{printable(check.detail)}"
                )
            for approval in trial.approvals:
                lines.append(f"{'':<{width}}    {trial.run_id[:8]} approval {printable(approval)}")
    passing = sum(g.pass_k for g in grades)
    ks = sorted({g.k for g in grades})
    if not ks:  # every run named was unreadable (each said so on stderr)
        lines.append("overall: nothing graded")
    elif len(ks) == 1:
        lines.append(f"overall: {passing}/{len(grades)} fixtures pass^{ks[0]}")
    else:
        lines.append(
            f"overall: {passing}/{len(grades)} fixtures passed every trial; trials per fixture "
            f"differ ({ks[0]} to {ks[-1]}), so there is no one pass^k"
        )
    if not_graded:
        lines.append(f"not graded: {len(not_graded)} runs (each named on stderr, and why)")
    if base_seed is not None and len(ks) == 1:
        seeds = _seeds(list(range(base_seed, base_seed + ks[0])))
        lines.append(
            f"each trial ran with its own seed: seeds {seeds} (--seed {base_seed} + trial index)"
        )
    return "\n".join(lines)


def grade_json(
    grades: list[FixtureGrade],
    base_seed: int | None = None,
    not_graded: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`grade --json`; `not_graded`: the stored runs that could not be graded, and why (then
    `pass_k` is false: a run not graded has not passed)."""
    ks = {g.k for g in grades}
    not_graded = not_graded or {}
    return {
        "trials": max(ks, default=0),
        "uniform_k": len(ks) <= 1,
        "base_seed": base_seed,
        "pass_k": all(g.pass_k for g in grades) and not not_graded,
        "not_graded": [{"run_id": k, "problem": v} for k, v in not_graded.items()],
        "fixtures": [
            {
                "fixture": g.fixture,
                "k": g.k,
                "pass_k": g.pass_k,
                "seeds": g.seeds,
                "trials": [
                    {
                        "run_id": t.run_id,
                        "seed": t.seed,
                        "passed": t.passed,
                        "approvals": t.approvals,
                        "checks": [
                            {"name": c.name, "passed": c.passed, "detail": c.detail}
                            for c in t.checks
                        ],
                    }
                    for t in g.trials
                ],
            }
            for g in grades
        ],
    }
