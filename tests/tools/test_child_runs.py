"""Child runs on a shared budget: a tool implemented as a child run, its limits carved from what
the parent has left, its attempts charged to the parent, its terminal (any) received by the
parent as a typed observation; both records linked, and show, replay and grade follow the link."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from runner import Limits, MemoryStore, ScriptedModel, SqliteStore
from runner.cli import main
from runner.proof.api import grade_run_sync, replay_run_sync
from runner.store.base import RunListing, Store
from runner.tools.children import children_of, family_ids, parent_of
from runner.travel.bundled import contracts_dir
from tests.support.children_world import (
    CHILD_TOOL,
    FAMILIES,
    Family,
    build,
    family_contracts,
    load_family,
    resume_family,
    run_family,
)

PATHS = sorted(FAMILIES.glob("*.yaml"))


def child_ids(store: Store, parent: str) -> list[str]:
    return [child for _, child in children_of(store.outputs(parent))]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_family_ends_as_declared_three_times_with_both_records_linked(path: Path) -> None:
    family = load_family(path)
    for _ in range(3):
        store = MemoryStore()
        outcome = run_family(family, store)
        assert outcome.failures == [], outcome.failures
        parent, child = outcome.parent, outcome.child
        assert child is not None
        assert child_ids(store, parent.run_id) == [child.run_id]  # the parent links its child
        child_header = store.header(child.run_id)
        assert child_header is not None and parent_of(child_header) == parent.run_id
        assert family_ids(store, parent.run_id) == [parent.run_id, child.run_id]
        # Charged: the parent's attempts are its own and every one of the child's.
        own = max(r.attempt for r in parent.transitions) - child.attempts
        assert own >= 1 and parent.attempts == own + child.attempts
        assert parent.tokens_in >= child.tokens_in


def test_the_childs_limits_are_carved_from_what_the_parent_has_left() -> None:
    family = load_family(FAMILIES / "child_exhausts_carved_budget.yaml")
    store = MemoryStore()
    outcome = run_family(family, store)
    assert outcome.child is not None
    header = store.header(outcome.child.run_id)
    assert header is not None
    carved = Limits.model_validate(header.limits)
    parent = family.parent.budget
    assert carved.max_attempts == parent.max_attempts - 1 == 3  # its own cap is 8
    assert carved.max_model_steps == parent.max_model_steps - 1  # the parent's one request
    assert carved.max_tokens <= parent.max_tokens
    assert carved.max_seconds <= min(parent.max_seconds, 120 * 0.95)
    assert outcome.parent.attempts == parent.max_attempts  # never more
    assert (outcome.child.terminal.value, outcome.child.reason) == ("abstain", "attempts")
    assert (outcome.parent.terminal.value, outcome.parent.reason) == ("abstain", "attempts")


def test_two_children_in_one_reply_share_what_is_left() -> None:
    """The first child holds what is left while it runs; the second is carved from the rest
    (nothing), so together they never take more than the parent had."""
    family = load_family(FAMILIES / "child_completes.yaml")
    turn = family.parent.model[0].model_dump()
    call = turn["tool_calls"][0]
    twice = {"tool_calls": [{**call, "id": "c-1"}, {**call, "id": "c-2", "args": {
        "question": "wheelchair-accessible flights SFO to HND, 2027-04-01..03"}}]}  # fmt: skip
    parent = family.parent.model_copy(
        update={
            "budget": Limits(max_attempts=5),
            "model": [type(family.parent.model[0]).model_validate(twice), family.parent.model[1]],
            "expect": None,
        }
    )
    store = MemoryStore()
    outcome = run_family(
        Family(parent=parent, child=family.child.model_copy(update={"expect": None})), store
    )
    classes = [
        (r.call_id, r.result_class, r.reason)
        for r in outcome.parent.transitions
        if r.trigger == "classify"
    ]
    assert classes[0][:2] == ("c-1", "ok")
    assert classes[1][1] == "permanent" and classes[1][2] == "budget_exhausted"
    first = store.header(child_ids(store, outcome.parent.run_id)[0])
    assert first is not None and first.limits["max_attempts"] == 3  # 5, less the two calls
    assert outcome.parent.attempts <= 5


def test_parent_and_child_replay_exactly_and_grade(tmp_path: Path) -> None:
    contracts = family_contracts()
    for path in PATHS:
        store = SqliteStore(tmp_path / f"{path.stem}.db")
        outcome = run_family(load_family(path), store, world=tmp_path / path.stem)
        for run_id in family_ids(store, outcome.parent.run_id):
            replayed = replay_run_sync(store, run_id, contracts)
            assert replayed.identical, (path.stem, run_id, replayed.divergence)
            trial = grade_run_sync(store, run_id, contracts)
            assert trial.passed, (path.stem, trial.failed)
        store.close()


def _contracts_folder(folder: Path) -> Path:
    """The travel contracts and the child-run tool's, as files the command line loads."""
    shutil.copytree(contracts_dir(), folder)
    for name, compiled in family_contracts().items():
        if not (folder / f"{name}.json").exists():
            data = compiled.contract.model_dump(mode="json", exclude_defaults=True)
            (folder / f"{name}.json").write_text(json.dumps(data))
    return folder


def test_show_replay_and_grade_follow_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    store = SqliteStore(db)
    family = load_family(FAMILIES / "child_exhausts_carved_budget.yaml")
    outcome = run_family(family, store)
    store.close()
    assert outcome.child is not None
    parent_id, child_id = outcome.parent.run_id, outcome.child.run_id
    assert main(["show", parent_id, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert f"child run {child_id} (call" in shown and f"run {child_id}" in shown
    assert "abstain (attempts)" in shown
    assert main(["show", parent_id, "--db", str(db), "--json"]) == 0
    views = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [v["run_id"] for v in views] == [parent_id, child_id]
    assert views[0]["children"][0]["run_id"] == child_id
    folder = _contracts_folder(tmp_path / "contracts")
    assert main(["--contracts", str(folder), "replay", parent_id, "--db", str(db), "--json"]) == 0
    replays = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["run_id"], r["identical"]) for r in replays] == [(parent_id, True), (child_id, True)]
    args = ["--contracts", str(folder), "grade", "--stored", parent_id, "--db", str(db), "--json"]
    assert main(args) == 0
    graded = json.loads(capsys.readouterr().out)
    ids = [t["run_id"] for f in graded["fixtures"] for t in f["trials"]]
    assert ids == [parent_id, child_id] and graded["pass_k"] is True


def test_a_crash_in_a_child_resumes_from_the_parent(tmp_path: Path) -> None:
    """The process dies while the child's search is in flight (both runs unfinished); resuming
    the parent reconciles its call through the child lookup, which resumes the child to its end,
    and the parent goes on with the child's answer."""
    family = load_family(FAMILIES / "child_completes.yaml")
    slow = {"search_flights": [{**o.model_dump(exclude_unset=True), "latency_s": 5}
                               for o in family.child.environment["search_flights"]]}  # fmt: skip
    document = {**family.child.model_dump(exclude_unset=True), "environment": slow}
    family = Family(parent=family.parent, child=family.child.model_validate(document))
    db = tmp_path / "runs.db"
    store = SqliteStore(db)
    from runner import FakeClock  # noqa: PLC0415

    clock = FakeClock(family.parent.clock.start)
    _, parent_engine, spec = build(family, store, clock, tmp_path)

    async def crash() -> str:
        handle = parent_engine.start(spec, ScriptedModel(family.parent.model))
        while not _child_started(store):
            await asyncio.sleep(0.5)  # virtual time: the child's search takes 5 s
        (task,) = [t for t in asyncio.all_tasks() if t.get_name() == f"runner run {handle.run_id}"]
        task.cancel()  # the process dies: neither run gets a terminal record
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return handle.run_id

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        parent_id = runner.run(crash())
    assert store.summary(parent_id) is None
    (child_id,) = [i for i in _runs(store) if i != parent_id]
    assert store.summary(child_id) is None  # the child, too, stopped mid-run
    resumed = resume_family(family, store, parent_id, world=tmp_path)
    assert resumed.parent.terminal.value == "complete", resumed.parent.reason
    assert resumed.child is not None and resumed.child.run_id == child_id
    assert resumed.child.terminal.value == "complete"
    reconciled = [r for r in resumed.parent.transitions if r.trigger == "reconcile"]
    assert len(reconciled) == 1  # the lost call was looked up (the lookup resumed the child)
    assert child_ids(store, parent_id) == [child_id]
    # The call and the child's: the lookup admits no attempt, the child's are charged instead.
    assert resumed.parent.attempts == 1 + resumed.child.attempts
    replayed = replay_run_sync(store, parent_id, family_contracts())
    assert replayed.identical, replayed.divergence


def _runs(store: Store) -> list[str]:
    return [item.header.run_id for item in store.runs() if isinstance(item, RunListing)]


def _child_started(store: Store) -> bool:
    return any(
        parent_of(item.header) is not None and store.transitions(item.header.run_id)
        for item in store.runs()
        if isinstance(item, RunListing)
    )


def test_the_child_tool_is_a_write_with_a_runtime_lookup() -> None:
    contracts = family_contracts()
    tool, lookup = contracts[CHILD_TOOL].contract, contracts[f"{CHILD_TOOL}_lookup"].contract
    assert tool.side_effect == "write" and tool.reconcile_with == lookup.name
    assert lookup.audience == "runtime"


def test_a_child_spends_no_more_tokens_than_it_was_carved_its_final_request_included() -> None:
    """The child is carved what the parent has left; its next request, and its final one, would
    not fit, so it ends without them: the family never passes the parent's token cap before the
    parent's own final request, the one exception."""
    family = load_family(FAMILIES / "child_spends_carved_tokens.yaml")
    store = MemoryStore()
    outcome = run_family(family, store)
    assert outcome.failures == [], outcome.failures
    child = outcome.child
    assert child is not None
    carved = store.header(child.run_id)
    assert carved is not None and carved.limits["final_within_caps"] is True
    assert child.tokens_in + child.tokens_out <= carved.limits["max_tokens"]
    assert (child.reason, child.answer) == ("tokens", None)  # no final request: it did not fit
    parent = outcome.parent
    assert parent.tokens_in + parent.tokens_out <= family.parent.budget.max_tokens
    spec_header = store.header(parent.run_id)
    assert spec_header is not None and "final_within_caps" not in spec_header.limits


def test_a_family_that_passed_the_parents_tokens_fails_grading(tmp_path: Path) -> None:
    """`tokens_within_cap` reads the record: a child charged past what its parent had left, or
    a request made once the cap was spent, fails it."""
    from runner.proof.grading import tokens_within_cap  # noqa: PLC0415
    from runner.proof.replay import Recording  # noqa: PLC0415

    store = SqliteStore(tmp_path / "runs.db")
    outcome = run_family(load_family(FAMILIES / "child_spends_carved_tokens.yaml"), store)
    recording = Recording.from_store(store, outcome.parent.run_id)
    contracts = family_contracts()
    assert tokens_within_cap(recording, contracts).passed
    cap = int(recording.header.limits["max_tokens"])
    inflated = []
    for output in recording.outputs:
        payload = getattr(output.outcome, "payload", None)
        if isinstance(payload, dict) and "child_run" in payload:
            child = {**payload["child_run"], "tokens_in": cap}
            charged = replace(output.outcome, payload={**payload, "child_run": child})
            inflated.append(replace(output, outcome=charged))
        else:
            inflated.append(output)
    check = tokens_within_cap(replace(recording, outputs=inflated), contracts)
    assert not check.passed and "after the child run of call_1_0" in check.detail
    last = recording.transitions[-1]  # the parent's answer, asked once the child was charged
    assert last.tokens_in is not None and last.tokens_out is not None
    before = outcome.parent.tokens_in + outcome.parent.tokens_out - last.tokens_in - last.tokens_out
    tight = replace(recording.header, limits={**recording.header.limits, "max_tokens": before})
    check = tokens_within_cap(replace(recording, header=tight), contracts)
    assert not check.passed and "a model request at seq" in check.detail
    store.close()


def test_model_steps_of_a_child_are_charged_so_children_in_sequence_share_them() -> None:
    family = load_family(FAMILIES / "child_completes.yaml")
    turns = [turn.model_dump() for turn in family.parent.model]
    second = {"tool_calls": [{**turns[0]["tool_calls"][0], "id": "c-2", "args": {
        "question": "wheelchair-accessible flights SFO to HND, 2027-04-02..04"}}]}  # fmt: skip
    model_type = type(family.parent.model[0])
    parent = family.parent.model_copy(
        update={
            "budget": Limits(max_model_steps=8),
            "model": [
                family.parent.model[0],
                model_type.model_validate(second),
                family.parent.model[1],
            ],
            "expect": None,
        }
    )
    searches = family.child.environment["search_flights"]
    child = family.child.model_copy(
        update={
            "budget": Limits(max_model_steps=16),
            "environment": {"search_flights": [*searches, *searches]},  # one for each child
            "expect": None,
        }
    )
    store = MemoryStore()
    outcome = run_family(Family(parent=parent, child=child), store)
    first, later = (store.header(i) for i in child_ids(store, outcome.parent.run_id))
    assert first is not None and later is not None
    assert first.limits["max_model_steps"] == 8 - 1  # the parent's first request
    # the first child's 2 steps are charged, then the parent's second request: 8 - 1 - 2 - 1
    assert later.limits["max_model_steps"] == 4
    assert outcome.parent.model_steps == 3 + 2 + 2  # its own three, and each child's two


def test_cancelling_the_parent_cancels_the_child_in_flight_after_its_batch(
    tmp_path: Path,
) -> None:
    """The child's search is in flight when the parent is cancelled: the search finishes (a
    cancel never interrupts a tool), the child ends `cancelled` without asking its model again,
    and so does the parent, charged only what the child spent."""
    family = load_family(FAMILIES / "child_exhausts_carved_budget.yaml")
    slow = {"search_flights": [{**o.model_dump(exclude_unset=True), "latency_s": 5}
                               for o in family.child.environment["search_flights"]]}  # fmt: skip
    document = {**family.child.model_dump(exclude_unset=True), "environment": slow}
    family = Family(parent=family.parent, child=family.child.model_validate(document))
    store = SqliteStore(tmp_path / "runs.db")
    from runner import FakeClock  # noqa: PLC0415

    clock = FakeClock(family.parent.clock.start)
    _, parent_engine, spec = build(family, store, clock, tmp_path)

    async def cancel_mid_child() -> str:
        handle = parent_engine.start(spec, ScriptedModel(family.parent.model))
        while not _child_started(store):
            await asyncio.sleep(0.5)  # virtual time: the child's first search takes 5 s
        handle.cancel()
        await handle.result()
        return handle.run_id

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        parent_id = runner.run(cancel_mid_child())
    (child_id,) = child_ids(store, parent_id)
    child, parent = store.summary(child_id), store.summary(parent_id)
    assert child is not None and parent is not None
    assert (child.terminal, child.reason) == ("abstain", "cancelled")
    assert child.attempts == 1  # its search in flight finished; nothing was asked after it
    searched = [r for r in store.transitions(child_id) if r.trigger == "classify"]
    assert [r.result_class for r in searched] == ["empty"]
    assert (parent.terminal, parent.reason) == ("abstain", "cancelled")
    assert parent.attempts == 1 + child.attempts
    for run_id in (parent_id, child_id):
        assert replay_run_sync(store, run_id, family_contracts()).identical
    store.close()
