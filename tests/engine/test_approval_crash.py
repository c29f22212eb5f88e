"""Crash between approval and commit, then go on: a real `runner approve` subprocess is killed with
SIGKILL after its 1st, 2nd, ... durable commit (the decision, the token's use, each transition,
the intent, the supplier's hold), then the operator goes on (`runner approve` again if the decision
was never kept, else `runner continue`, which resumes the continuation): exactly one hold, one
continuation, ending `complete`, its log without a gap."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.core.confirm import ApprovalSecret
from runner.engine.approvals import approve
from runner.store import SqliteStore
from runner.travel.approval_play import holds_of
from tests.support.crash_sweep import runner_process
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.slow

FIXTURE = FIXTURES / "approval" / "hold_approved.yaml"
SECRET = "the-runtime-secret-for-the-tests-0001"


def _runner(
    args: list[str], cwd: Path, kill_after: int | None = None
) -> subprocess.CompletedProcess[str]:
    return runner_process(args, cwd, kill_after, env_extra={"RUNNER_APPROVAL_SECRET": SECRET})


def _waiting_run(folder: Path) -> tuple[Path, str]:
    folder.mkdir()
    db = folder / "runs.sqlite"
    done = _runner(["run", str(FIXTURE), "--db", str(db)], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    store = SqliteStore(db)
    run_id = store.runs()[0].header.run_id  # type: ignore[union-attr]
    store.close()
    return db, run_id


def _state(db: Path, waiting: str) -> tuple[str, list[str], int | None, list[str]]:
    """The proposal's status, the continuations' terminals, the holds, and problems."""
    store = SqliteStore(db)
    try:
        status = store.proposals(waiting)[0].status
        problems: list[str] = []
        terminals = []
        for listing in store.runs()[1:]:
            run_id = listing.header.run_id  # type: ignore[union-attr]
            records = store.transitions(run_id)
            if [r.seq for r in records] != list(range(1, len(records) + 1)):
                problems.append(f"{run_id}: a gap in its log")
            ends = [
                r for r in records if r.to_state in {"complete", "abstain", "escalate", "unknown"}
            ]
            if len(ends) > 1:
                problems.append(f"{run_id}: {len(ends)} terminal transitions")
            summary = store.summary(run_id)
            terminals.append(summary.terminal if summary else "(running)")
        return status, terminals, holds_of(store, waiting), problems
    finally:
        store.close()


def test_a_crash_anywhere_between_approval_and_commit_ends_with_exactly_one_hold(
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    point = 0
    while True:
        point += 1
        assert point < 60, "the approval never completed"
        db, waiting = _waiting_run(tmp_path / f"p{point}")
        approve = ["approve", waiting, "--approver", "alice", "--db", str(db)]
        killed = _runner(approve, db.parent, kill_after=point)
        if killed.returncode == 0:
            break  # every commit point has been swept
        status, _, _, _ = _state(db, waiting)
        again = approve if status == "pending" else ["continue", waiting, "--db", str(db)]
        went_on = _runner(again, db.parent)
        status, terminals, holds, found = _state(db, waiting)
        where = f"crash point {point} ({' '.join(again[:1])} after it)"
        if went_on.returncode != 0:
            problems.append(f"{where}: exit {went_on.returncode}: {went_on.stderr.strip()}")
        if status != "approved" or terminals != ["complete"] or holds != 1:
            problems.append(f"{where}: {status}, continuations {terminals}, {holds} holds")
        problems += [f"{where}: {problem}" for problem in found]
    assert point > 8, f"only {point - 1} commit points: the sweep did not reach the commit"
    assert not problems, "\n".join(problems)


def test_a_crash_before_the_run_waits_resumes_to_one_pending_proposal(tmp_path: Path) -> None:
    """`runner run` killed after each durable commit of a run that ends waiting for approval,
    then `runner resume`: the run ends escalate (approval_required) with exactly one pending
    proposal (re-driving the admission finds the one already recorded) and no hold."""
    problems: list[str] = []
    point = 0
    while True:
        point += 1
        assert point < 40, "the run never completed"
        folder = tmp_path / f"p{point}"
        folder.mkdir()
        db = folder / "runs.sqlite"
        killed = _runner(["run", str(FIXTURE), "--db", str(db)], folder, kill_after=point)
        if killed.returncode == 0:
            break
        store = SqliteStore(db)
        runs = store.runs()
        store.close()
        if not runs:
            continue  # died before the run began
        run_id = runs[0].header.run_id  # type: ignore[union-attr]
        resumed = _runner(["resume", run_id, "--db", str(db)], folder)
        store = SqliteStore(db)
        summary = store.summary(run_id)
        proposals = store.proposals(run_id)
        holds = holds_of(store, run_id)
        store.close()
        where = f"crash point {point}"
        if resumed.returncode not in (0, 1):
            problems.append(f"{where}: resume exit {resumed.returncode}: {resumed.stderr.strip()}")
        if summary is None or (summary.terminal, summary.reason) != (
            "escalate",
            "approval_required",
        ):
            problems.append(f"{where}: ended {summary}")
        if [p.status for p in proposals] != ["pending"] or holds not in (0, None):
            problems.append(f"{where}: proposals {[p.status for p in proposals]}, {holds} holds")
    assert point > 4
    assert not problems, "\n".join(problems)


def test_continue_after_a_crash_goes_on_once_the_token_has_expired(tmp_path: Path) -> None:
    """The continuation checked the token when it started; asking again after a crash resumes it
    even when the token has expired since (it used to be refused `expired`, the run left
    `running` with its write's outcome never settled)."""
    db, waiting = _waiting_run(tmp_path / "w")
    args = ["--db", str(db)]
    killed = _runner(["approve", waiting, "--approver", "alice", "--ttl", "1", *args], db.parent, 9)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    time.sleep(1.2)  # the token is now expired
    done = _runner(["continue", waiting, *args], db.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    status, terminals, holds, problems = _state(db, waiting)
    assert (status, terminals, holds, problems) == ("approved", ["complete"], 1, [])
    again = _runner(["continue", waiting, *args], db.parent)  # ended: reported, not refused
    assert again.returncode == 0 and "which ended complete" in again.stdout, again.stderr


@pytest.mark.parametrize("kill_after", [2, 3])
def test_a_continuation_killed_before_it_re_drove_anything_re_drives_the_waiting_run(
    tmp_path: Path, kill_after: int
) -> None:
    """Killed once its header (and maybe one transition) is stored, the continuation used to be
    resumed from its own, still empty, recording: it called the search again live (here the
    script was spent: a tool error) and its write lost the provenance of its arguments."""
    db, waiting = _waiting_run(tmp_path / "w")
    store = SqliteStore(db)
    try:
        approve(
            store,
            waiting,
            approver="alice",
            secret=ApprovalSecret(SECRET),
            now=datetime.now(UTC),
        )
    finally:
        store.close()
    args = ["continue", waiting, "--db", str(db)]
    killed = _runner(args, db.parent, kill_after)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    done = _runner(args, db.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    store = SqliteStore(db)
    try:
        (continued,) = [r.header.run_id for r in store.runs()[1:]]  # type: ignore[union-attr]
        records = store.transitions(continued)
        assert [r.result_class for r in records if r.trigger == "classify"] == ["ok", "ok"]
        (hold,) = [r for r in records if r.tool == "hold_room"]
        assert hold.provenance and hold.provenance["hotel_id"] == "tool:search_hotels:call_1_0"
        assert holds_of(store, waiting) == 1
    finally:
        store.close()
    replayed = _runner(["replay", continued, "--db", str(db)], db.parent)  # its record is whole
    assert replayed.returncode == 0 and "identical" in replayed.stdout, replayed.stdout
