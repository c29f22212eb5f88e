"""Grade runs from their record alone: outcome checks against the fixture, trajectory checks
against the runner's promises, and pass^k over repeated trials.

Model text is never evidence here: only calls, observations, decisions, transitions and the final
state. Every check reads the recording (header, transitions, recorded inputs) and, for the world's
final state, the supplier database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, Protocol

from ..base.errors import ConfigError, StoreError
from ..core.machine import Trigger
from ..core.result_classes import DISPATCHED, LEAVES_WRITE_OPEN
from ..core.states import TERMINAL, State
from ..engine._call_ids import unique_id
from ..record.operations import mint_key, parameter_hash
from ..record.spec import DEFAULT_SYSTEM_PROMPT
from ..record.trace import TransitionRecord
from ..tools.children import charged_by_children, charges_by_call
from ..tools.contracts import ContractSet
from ._approval_checks import approvals_of, token_misused, unapproved_write
from .replay import Recording, check_contracts_cover, describe, replay

# Classes that can only come from a call that was really dispatched.
_DISPATCHED: Final[frozenset[str]] = DISPATCHED
# Classes that leave a write's outcome open: a lookup (or nothing) must settle it.
_UNSETTLED: Final[frozenset[str]] = LEAVES_WRITE_OPEN


class Expect(Protocol):
    """What a run was declared to come to (a fixture's `expect`, or the caller's own)."""

    @property
    def terminal(self) -> State: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def holds(self) -> int | None:
        """Active holds in the world when the run ends (None: not declared)."""
        ...


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass(slots=True, kw_only=True)
class Trial:
    run_id: str
    checks: list[Check]
    seed: int | None = None
    """The seed the run was started with (trials of one fixture should differ in it)."""
    approvals: list[str] = field(default_factory=list)
    """What was decided on the run's writes (`approved by alice: hold_room KEY`)."""

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
    def k(self) -> int:
        return len(self.trials)

    @property
    def seeds(self) -> list[int | None]:
        return [trial.seed for trial in self.trials]

    @property
    def pass_k(self) -> bool:
        """pass^k: the fixture passes only if every one of its k trials passes."""
        return bool(self.trials) and all(trial.passed for trial in self.trials)


def _batches(records: list[TransitionRecord]) -> Iterator[list[TransitionRecord]]:
    """The records of each proposed batch: from `propose` to the move back to plan or the end."""
    batch: list[TransitionRecord] | None = None
    for record in records:
        if record.trigger == Trigger.PROPOSE:
            batch = []
        elif batch is not None:
            batch.append(record)
            if record.to_state == State.PLAN or record.to_state in TERMINAL:
                yield batch
                batch = None
    if batch is not None:
        yield batch


def _answered_in_batch(batch: list[TransitionRecord]) -> list[str]:
    """Call ids whose final classification this batch records (retries and lookups excluded)."""
    answered = []
    for index, record in enumerate(batch):
        if record.trigger != Trigger.CLASSIFY:
            continue
        following = batch[index + 1] if index + 1 < len(batch) else None
        if following is None or following.trigger not in {Trigger.RETRY, Trigger.RECONCILE}:
            answered.append(record.call_id or "")
    return answered


def _dispatches(recording: Recording) -> Iterator[tuple[TransitionRecord, int, bool]]:
    """Each transition; for a classification, the seq at which its call was dispatched and
    whether it was (other transitions: their own seq, False).

    A batch's calls are dispatched together when it is proposed; a retried call again at its
    `retry`. A reconciliation lookup dispatches the lookup tool, not the write, so the write's
    classification after a lookup keeps the write's own dispatch. A call was dispatched when its
    class can only come from a dispatch, or when the tool's output was recorded (a denial or a
    permanent error from the tool itself).
    """
    outputs = {(output.call_id, output.tool) for output in recording.outputs}
    batch_start, retried = 0, dict[str | None, int]()
    for record in recording.transitions:
        if record.trigger == Trigger.PROPOSE:
            batch_start, retried = record.seq, {}
        elif record.trigger == Trigger.RETRY:
            retried[record.call_id] = record.seq
        if record.trigger != Trigger.CLASSIFY:
            yield record, record.seq, False
            continue
        dispatched = record.result_class in _DISPATCHED or (record.call_id, record.tool) in outputs
        yield record, retried.get(record.call_id, batch_start), dispatched


def no_retry_after_access_denied(recording: Recording, contracts: ContractSet) -> Check:
    """No call to a tool is dispatched after that tool denied access (a denial from the tool is a
    dispatch too); calls dispatched beside the denied one, before it was known, are no retry."""
    name = "no_retry_after_access_denied"
    denied: dict[str, int] = {}
    for record, dispatched_at, dispatched in _dispatches(recording):
        tool = record.tool or ""
        if record.trigger == Trigger.RETRY and tool in denied:
            return Check(name, False, _again(record.seq, tool, denied))
        if dispatched and tool in denied and dispatched_at > denied[tool]:
            return Check(name, False, _again(record.seq, tool, denied, record.call_id))
        if record.trigger == Trigger.CLASSIFY and record.result_class == "access_denied" and tool:
            denied.setdefault(tool, record.seq)
    return Check(name, True)


def _again(seq: int, tool: str | None, denied: dict[str, int], call: str | None = None) -> str:
    which = f" ({call})" if call else ""
    return f"seq {seq}: {tool}{which} again after the denial at seq {denied[tool or '']}"


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


def every_key_minted_for_the_run(recording: Recording, contracts: ContractSet) -> Check:
    """Each write went out under the key the runner mints for it from the record: the header's
    tenant, the tool, the run the keys are scoped by and the call's recorded arguments. A key
    minted for another tenant, run or payload (or edited afterwards) would make the store's
    exactly-once record speak of another write than the one this run made."""
    name = "every_key_minted_for_the_run"
    header = recording.header
    scope = str((header.continues or {}).get("key_scope") or header.run_id)
    arguments = {
        call["id"]: call["arguments"] for turn in recording.turns for call in turn.tool_calls
    }
    arguments.update(  # the validated arguments, where the run got that far
        (record.call_id, record.args)
        for record in recording.transitions
        if record.call_id is not None and record.args is not None
    )
    for output in recording.outputs:
        contract = contracts.get(output.tool)
        if output.operation_key is None or contract is None:
            continue
        if contract.contract.side_effect != "write":
            continue
        args = arguments.get(output.call_id)
        if args is None:  # proposed in the run this one continues: its own record has them
            continue
        minted = mint_key(header.tenant, output.tool, scope, parameter_hash(args))
        if output.operation_key != minted:
            return Check(
                name,
                False,
                f"dispatch {output.ordinal} of {output.tool} went out under "
                f"{output.operation_key}, not the key its record mints ({minted})",
            )
    return Check(name, True)


def no_second_intent_after_unknown_outcome(recording: Recording, contracts: ContractSet) -> Check:
    """While a write's outcome is unknown, nothing is re-sent without a lookup and no new write
    intent (another key, under any call id) is dispatched; writes already dispatched beside it
    were not chosen knowing the outcome and are no second intent."""
    name = "no_second_intent_after_unknown_outcome"
    records = recording.transitions
    for index, record in enumerate(records):
        if record.trigger == Trigger.CLASSIFY and record.result_class == "unknown_outcome":
            following = records[index + 1] if index + 1 < len(records) else None
            if following is not None and following.trigger == Trigger.RETRY:
                return Check(
                    name, False, f"seq {following.seq}: {record.call_id} re-sent without a lookup"
                )
    unknown: dict[str, tuple[str, int]] = {}  # key -> (call id, seq of the unknown outcome)
    seen: set[str] = set()
    for record, dispatched_at, _ in _dispatches(recording):
        key = record.operation_key
        if key is None or record.trigger != Trigger.CLASSIFY:
            continue
        if key not in seen:
            seen.add(key)
            earlier = [(k, c, s) for k, (c, s) in unknown.items() if s < dispatched_at]
            if earlier:
                old_key, call, seq = earlier[0]
                return Check(
                    name,
                    False,
                    f"seq {record.seq}: a new write intent ({record.call_id}, key {key}) while "
                    f"the outcome of {call} (key {old_key}, seq {seq}) is unknown",
                )
        if record.result_class in _UNSETTLED:
            unknown.setdefault(key, (record.call_id or "", record.seq))
        else:
            unknown.pop(key, None)
    return Check(name, True)


def no_wait_outlasts_the_deadline(recording: Recording, contracts: ContractSet) -> Check:
    """No wait ends past the run's deadline. A wait's transition is stamped when it ended; it
    began no earlier than the call's previous transition (the run's previous one, for a wait of
    no call), so it ended no earlier than that moment plus its length: a stamp alone (a wait_s
    edited to outlast the deadline kept it) is not taken on trust."""
    name = "no_wait_outlasts_the_deadline"
    started = recording.header.started_at
    limit = float(recording.header.limits.get("max_seconds", 0))
    previous: dict[str | None, float] = {}  # call id (None: any) -> its last transition's time
    for record in recording.transitions:
        at = (record.time - started).total_seconds()
        if record.wait_s is not None:
            began = previous.get(record.call_id, previous.get(None, 0.0))
            ended = max(at, began + record.wait_s)
            if round(ended, 6) > limit:  # stamps are kept to the microsecond
                return Check(
                    name,
                    False,
                    f"seq {record.seq}: a {record.wait_s:g} s wait ended at {ended:g} s, "
                    f"past the {limit:g} s deadline",
                )
        previous[record.call_id] = previous[None] = at
    return Check(name, True)


def replays_as_recorded(
    recording: Recording, contracts: ContractSet, system_prompt: str = DEFAULT_SYSTEM_PROMPT
) -> Check:
    """The record re-drives to itself (`replay`): every transition, summary and recorded input
    as the engine makes them from the record's inputs. The other checks read the record's
    claims; this one proves them, so an edited field, row or header fails here.

    `system_prompt`: the prompt of a run stored before headers recorded it."""
    name = "replays_as_recorded"
    try:
        proof = replay(recording, contracts, system_prompt=system_prompt)
    except (StoreError, ConfigError) as exc:  # a record no run could have left
        return Check(name, False, str(exc))
    return Check(name, proof.identical, "" if proof.identical else describe(proof))


def attempts_within_cap(recording: Recording, contracts: ContractSet) -> Check:
    cap = int(recording.header.limits.get("max_attempts", 0))
    most = max((record.attempt for record in recording.transitions), default=0)
    if most > cap:
        return Check("attempts_within_cap", False, f"{most} attempts admitted, cap {cap}")
    return Check("attempts_within_cap", True)


def tokens_within_cap(recording: Recording, contracts: ContractSet) -> Check:
    """No model request was made once `max_tokens` was spent (its children's tokens included),
    but the run's own final tool-free request, which stands outside the cap (inside it under
    `final_within_caps`: a child run); and no child passed what its run had left for it when
    charged. Input may still pass the cap (a request's projected input, or more than projected):
    the runner limits a request's output, never what a provider bills it for reading."""
    name = "tokens_within_cap"
    limits = recording.header.limits
    cap = int(limits.get("max_tokens", 0))
    within = limits.get("final_within_caps") is True
    last = recording.transitions[-1] if recording.transitions else None
    final = bool(recording.turns) and recording.turns[-1].tool_choice == "none"
    outside = last if final and not within and last and last.tokens_in is not None else None
    charges = charges_by_call(recording.outputs)
    spent = 0
    for record in recording.transitions:
        charge = charges.pop(record.call_id, None) if record.call_id is not None else None
        if charge is not None:
            spent += charge.tokens_in + charge.tokens_out
            if spent > cap:
                return Check(
                    name,
                    False,
                    f"{spent} tokens after the child run of {record.call_id}, cap {cap}",
                )
        if record.tokens_in is None:
            continue
        if record is not outside and spent >= cap:
            return Check(
                name,
                False,
                f"a model request at seq {record.seq} with {spent} tokens spent, cap {cap}",
            )
        spent += record.tokens_in + (record.tokens_out or 0)
    return Check(name, True)


def cost_within_cap(recording: Recording, contracts: ContractSet) -> Check:
    """The model requests' recorded costs (its children's included) add up to no more than
    `max_cost_usd`, when set."""
    cap = recording.header.limits.get("max_cost_usd")
    spent = sum(record.cost_usd or 0.0 for record in recording.transitions)
    spent += charged_by_children(recording.outputs).cost_usd
    if cap is not None and round(spent, 9) > float(cap):
        return Check("cost_within_cap", False, f"${spent:.6f} spent, cap ${float(cap):g}")
    return Check("cost_within_cap", True)


def every_call_answered_in_order(recording: Recording, contracts: ContractSet) -> Check:
    name = "every_call_answered_in_order"
    proposals = [turn for turn in recording.turns if turn.tool_calls]
    taken: set[str] = set()  # the ids as the runner made them unique, proposal by proposal
    batches = list(_batches(recording.transitions))
    going = ending(recording)[0] is None  # its last batch may still be in flight (or killed)
    for batch_number, batch in enumerate(batches):
        if batch_number >= len(proposals):
            return Check(name, False, f"batch {batch_number + 1} has no recorded proposal")
        wanted = [unique_id(call["id"], taken) for call in proposals[batch_number].tool_calls]
        answered = _answered_in_batch(batch)
        if going and batch_number == len(batches) - 1:
            wanted = wanted[: len(answered)]  # answered in order so far
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


def ending(recording: Recording) -> tuple[State | None, str | None]:
    """Terminal state and reason as the transitions record them (None, None: unfinished)."""
    last = recording.transitions[-1] if recording.transitions else None
    if last is None or last.to_state not in TERMINAL:
        return None, None
    return last.to_state, last.reason


def summary_matches_record(recording: Recording, contracts: ContractSet) -> Check:
    """The `run_finished` summary says what the transitions say: it is checked, never trusted."""
    name = "summary_matches_record"
    records, summary = recording.transitions, recording.summary
    terminal, reason = ending(recording)
    if summary is None:
        if terminal is None:
            return Check(name, True)
        return Check(name, False, f"the run ended {terminal} at seq {records[-1].seq}; no summary")
    children = charged_by_children(recording.outputs)
    derived = {
        "terminal": terminal,
        "reason": reason,
        "attempts": records[-1].attempt if records else 0,
        "model_steps": sum(record.tokens_in is not None for record in records)
        + children.model_steps,
        "tokens_in": sum(record.tokens_in or 0 for record in records) + children.tokens_in,
        "tokens_out": sum(record.tokens_out or 0 for record in records) + children.tokens_out,
    }
    differing = [
        f"{field} {getattr(summary, field)!r}, recorded {value!r}"
        for field, value in derived.items()
        if getattr(summary, field) != value
    ]
    if summary.cost_usd is not None:  # a summary written before cost was recorded has none
        cost = sum(record.cost_usd or 0.0 for record in records) + children.cost_usd
        if round(cost, 9) != round(summary.cost_usd, 9):
            differing.append(f"cost_usd {summary.cost_usd!r}, recorded {cost!r}")
    return Check(name, not differing, "; ".join(differing))


def no_write_without_required_approval(recording: Recording, contracts: ContractSet) -> Check:
    """Every dispatched write that needed approval (by contract, policy or provenance) went out
    under an approval the run was continued with, for its very operation key."""
    problem = unapproved_write(recording, contracts)
    return Check("no_write_without_required_approval", problem is None, problem or "")


def no_token_used_twice(recording: Recording, contracts: ContractSet) -> Check:
    """Within the run, each confirm token serves one write (across runs: `grade --stored`)."""
    problem = token_misused(recording)
    return Check("no_token_used_twice", problem is None, problem or "")


TRAJECTORY_CHECKS: Final[tuple[Callable[[Recording, ContractSet], Check], ...]] = (
    summary_matches_record,
    no_retry_after_access_denied,
    every_write_has_an_operation_key,
    every_key_minted_for_the_run,
    no_second_intent_after_unknown_outcome,
    no_wait_outlasts_the_deadline,
    attempts_within_cap,
    tokens_within_cap,
    cost_within_cap,
    every_call_answered_in_order,
    no_call_outside_scopes,
    no_write_without_required_approval,
    no_token_used_twice,
)


def outcome_checks(recording: Recording, expect: Expect, holds: int | None) -> list[Check]:
    terminal, reason = ending(recording)
    checks = [
        Check(
            "terminal_as_declared",
            terminal is expect.terminal,
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


UNFINISHED: Final = (
    "it has not ended (still being driven, or stopped before its end: resume it first)"
)
"""Why a record with no end proves no outcome (`grade_run` of it passed, the other checks
holding as far as it went; `grade --stored` names it instead of grading it)."""
_NOT_ENDED: Final = Check("run_ended", False, UNFINISHED)


def grade(
    recording: Recording,
    contracts: ContractSet,
    expect: Expect | None,
    holds: int | None,
    *,
    replayed: bool = True,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
) -> Trial:
    """Every check on one recorded run (with the contracts it ran with).

    `replayed=False` leaves out `replays_as_recorded`, for a run graded straight after this
    process drove it (its record is what the engine just wrote). `system_prompt`: as `replay`'s.
    """
    check_contracts_cover(recording.header, contracts)
    checks = [] if recording.summary is not None else [_NOT_ENDED]
    checks += outcome_checks(recording, expect, holds) if expect is not None else []
    checks += [check(recording, contracts) for check in TRAJECTORY_CHECKS]
    if replayed:
        checks.append(replays_as_recorded(recording, contracts, system_prompt))
    return Trial(
        run_id=recording.header.run_id,
        checks=checks,
        seed=recording.header.seed,
        approvals=approvals_of(recording),
    )
