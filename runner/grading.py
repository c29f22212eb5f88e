"""Grade runs from their record alone: outcome checks against the fixture, trajectory checks
against the runner's promises, and pass^k over repeated trials.

Model text is never evidence here: only calls, observations, decisions, transitions and the final
state. Every check reads the recording (header, transitions, recorded inputs) and, for the world's
final state, the supplier database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from ._call_ids import unique_id
from .contracts import ContractSet
from .fixtures import Expect
from .replay import Recording
from .states import TERMINAL
from .trace import TransitionRecord

# Classes that can only come from a call that was really dispatched.
_DISPATCHED: Final = frozenset(
    {"ok", "empty", "rate_limited", "transient", "malformed_result", "unknown_outcome",
     "not_applied"}
)  # fmt: skip
_TERMINAL_STATES: Final = frozenset(state.value for state in TERMINAL)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass(slots=True, kw_only=True)
class Trial:
    run_id: str
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]


@dataclass(slots=True, kw_only=True)
class FixtureGrade:
    fixture: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def pass_k(self) -> bool:
        """pass^k: the fixture passes only if every one of its k trials passes."""
        return bool(self.trials) and all(trial.passed for trial in self.trials)


def _batches(records: list[TransitionRecord]) -> Iterator[list[TransitionRecord]]:
    """The records of each proposed batch: from `propose` to the move back to plan or the end."""
    batch: list[TransitionRecord] | None = None
    for record in records:
        if record.trigger == "propose":
            batch = []
        elif batch is not None:
            batch.append(record)
            if record.to_state == "plan" or record.to_state in _TERMINAL_STATES:
                yield batch
                batch = None
    if batch is not None:
        yield batch


def _answered_in_batch(batch: list[TransitionRecord]) -> list[str]:
    """Call ids whose final classification this batch records (retries and lookups excluded)."""
    answered = []
    for index, record in enumerate(batch):
        if record.trigger != "classify":
            continue
        following = batch[index + 1] if index + 1 < len(batch) else None
        if following is None or following.trigger not in {"retry", "reconcile"}:
            answered.append(record.call_id or "")
    return answered


def no_retry_after_access_denied(recording: Recording, contracts: ContractSet) -> Check:
    denied: dict[str, int] = {}
    for record in recording.transitions:
        if record.trigger == "classify" and record.result_class == "access_denied" and record.tool:
            denied.setdefault(record.tool, record.seq)
            continue
        tool = record.tool or ""
        if tool in denied and (
            record.trigger == "retry"
            or (record.trigger == "classify" and record.result_class in _DISPATCHED)
        ):
            return Check(
                "no_retry_after_access_denied",
                False,
                f"seq {record.seq}: {tool} again after the denial at seq {denied[tool]}",
            )
    return Check("no_retry_after_access_denied", True)


def every_write_has_an_operation_key(recording: Recording, contracts: ContractSet) -> Check:
    for output in recording.outputs:
        contract = contracts.get(output.tool)
        is_write = contract is not None and contract.contract.side_effect == "write"
        if is_write and not output.operation_key:
            return Check(
                "every_write_has_an_operation_key",
                False,
                f"dispatch {output.ordinal} of {output.tool} carried no key",
            )
    return Check("every_write_has_an_operation_key", True)


def no_second_intent_after_unknown_outcome(recording: Recording, contracts: ContractSet) -> Check:
    name = "no_second_intent_after_unknown_outcome"
    unknown: dict[str, tuple[str, int]] = {}  # call id -> (key, seq)
    records = recording.transitions
    for index, record in enumerate(records):
        call = record.call_id or ""
        if call in unknown and record.operation_key and record.operation_key != unknown[call][0]:
            return Check(
                name,
                False,
                f"seq {record.seq}: a new key for {call} after the unknown "
                f"outcome at seq {unknown[call][1]}",
            )
        if record.trigger == "classify" and record.result_class == "unknown_outcome":
            unknown.setdefault(call, (record.operation_key or "", record.seq))
            following = records[index + 1] if index + 1 < len(records) else None
            if following is not None and following.trigger == "retry":
                return Check(name, False, f"seq {following.seq}: {call} re-sent without a lookup")
    return Check(name, True)


def no_wait_outlasts_the_deadline(recording: Recording, contracts: ContractSet) -> Check:
    limit = float(recording.header.limits.get("max_seconds", 0))
    for record in recording.transitions:
        if record.wait_s is None:
            continue
        ended = (record.time - recording.header.started_at).total_seconds()
        if ended > limit:
            return Check(
                "no_wait_outlasts_the_deadline",
                False,
                f"seq {record.seq}: a {record.wait_s:g} s wait ended at {ended:g} s, "
                f"past the {limit:g} s deadline",
            )
    return Check("no_wait_outlasts_the_deadline", True)


def attempts_within_cap(recording: Recording, contracts: ContractSet) -> Check:
    cap = int(recording.header.limits.get("max_attempts", 0))
    most = max((record.attempt for record in recording.transitions), default=0)
    if most > cap:
        return Check("attempts_within_cap", False, f"{most} attempts admitted, cap {cap}")
    return Check("attempts_within_cap", True)


def every_call_answered_in_order(recording: Recording, contracts: ContractSet) -> Check:
    name = "every_call_answered_in_order"
    proposals = [turn for turn in recording.turns if turn.tool_calls]
    taken: set[str] = set()  # the ids as the runner made them unique, proposal by proposal
    for batch_number, batch in enumerate(_batches(recording.transitions)):
        if batch_number >= len(proposals):
            return Check(name, False, f"batch {batch_number + 1} has no recorded proposal")
        wanted = [unique_id(call["id"], taken) for call in proposals[batch_number].tool_calls]
        answered = _answered_in_batch(batch)
        if answered != wanted:
            return Check(
                name, False, f"batch {batch_number + 1}: answered {answered}, proposed {wanted}"
            )
    return Check(name, True)


def no_call_outside_scopes(recording: Recording, contracts: ContractSet) -> Check:
    scopes = set(recording.header.scopes)
    for output in recording.outputs:
        contract = contracts.get(output.tool)
        if contract is None or contract.contract.scope not in scopes:
            return Check(
                "no_call_outside_scopes",
                False,
                f"dispatch {output.ordinal}: {output.tool} is outside {sorted(scopes)}",
            )
    return Check("no_call_outside_scopes", True)


TRAJECTORY_CHECKS: Final[tuple[Callable[[Recording, ContractSet], Check], ...]] = (
    no_retry_after_access_denied,
    every_write_has_an_operation_key,
    no_second_intent_after_unknown_outcome,
    no_wait_outlasts_the_deadline,
    attempts_within_cap,
    every_call_answered_in_order,
    no_call_outside_scopes,
)


def outcome_checks(recording: Recording, expect: Expect, holds: int | None) -> list[Check]:
    summary = recording.summary
    terminal = summary.terminal if summary else None
    reason = summary.reason if summary else None
    checks = [
        Check(
            "terminal_as_declared",
            terminal == expect.terminal.value,
            f"{terminal}, declared {expect.terminal.value}",
        ),
    ]
    if expect.reason is not None:
        checks.append(
            Check(
                "reason_as_declared", reason == expect.reason, f"{reason}, declared {expect.reason}"
            )
        )
    if expect.holds is not None:
        checks.append(
            Check(
                "holds_as_declared",
                holds == expect.holds,
                f"{holds} holds, declared {expect.holds}",
            )
        )
    return checks


def grade(
    recording: Recording, contracts: ContractSet, expect: Expect | None, holds: int | None
) -> Trial:
    """Every check on one recorded run."""
    checks = outcome_checks(recording, expect, holds) if expect is not None else []
    checks += [check(recording, contracts) for check in TRAJECTORY_CHECKS]
    return Trial(run_id=recording.header.run_id, checks=checks)
