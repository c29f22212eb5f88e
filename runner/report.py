"""How the CLI shows runs: one line per transition for people, one JSON object per run for tools.

The JSON object is a public interface (documented in the README): keys are only ever added.
"""

from __future__ import annotations

from typing import Any

from .scenario import ScenarioRun, visited_states
from .trace import TransitionRecord

_TRANSITION_KEYS = (
    "seq",
    "from",
    "to",
    "trigger",
    "tool",
    "call_id",
    "args",
    "result_class",
    "attempt",
    "decision",
    "latency_ms",
    "operation_key",
    "tokens_in",
    "tokens_out",
    "wait_s",
    "reason",
    "time",
)


def transition_json(record: TransitionRecord) -> dict[str, Any]:
    data = record.to_json()
    return {key: data[key] for key in _TRANSITION_KEYS}


def run_json(run: ScenarioRun) -> dict[str, Any]:
    result = run.result
    return {
        "run_id": result.run_id,
        "fixture": run.fixture.name,
        "terminal": result.terminal.value,
        "reason": result.reason,
        "answer": result.answer,
        "attempts": result.attempts,
        "model_steps": result.model_steps,
        "tokens": {"input": result.tokens_in, "output": result.tokens_out, "total": result.tokens},
        "elapsed_s": round(result.elapsed_s, 6),
        "waits_s": [round(w, 6) for w in result.waits_s],
        "states": visited_states(result),
        "transitions": [transition_json(r) for r in result.transitions],
        "expect": {"passed": run.passed, "failures": run.failures},
    }


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def transition_line(record: TransitionRecord) -> str:
    latency = "-" if record.latency_ms is None else f"{record.latency_ms:.0f} ms"
    extra = ""
    if record.wait_s is not None:
        extra += f"  wait {record.wait_s:g} s"
    if record.reason is not None:
        extra += f"  ({record.reason})"
    return (
        f"  {record.seq:>3}  {record.from_state + ' -> ' + record.to_state:<20} "
        f"{record.trigger:<12} {_dash(record.tool):<15} {_dash(record.result_class):<18} "
        f"attempt {record.attempt:<3} {_dash(record.decision):<14} {latency:>8}{extra}"
    )


def run_text(run: ScenarioRun, index: int, repeat: int) -> str:
    result = run.result
    lines = [f"{run.fixture.name} [{index}/{repeat}]  run {result.run_id}"]
    lines.extend(transition_line(record) for record in result.transitions)
    waits = ", ".join(f"{w:g}" for w in result.waits_s)
    lines.append(
        f"  => {result.terminal.value} ({result.reason})  attempts {result.attempts}  "
        f"steps {result.model_steps}  tokens {result.tokens}  {result.elapsed_s:g} s  "
        f"waits [{waits}]"
    )
    if result.answer:
        lines.append(f"  answer: {result.answer}")
    if run.fixture.expect is not None:
        lines.append(
            "  expect: met" if run.passed else "  expect: FAILED: " + "; ".join(run.failures)
        )
    return "\n".join(lines)
