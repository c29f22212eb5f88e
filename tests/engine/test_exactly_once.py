"""A write happens once: reconciliation by key, the naive policy's two holds, mismatches, resume."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runner.base.clock import FakeClock
from runner.core.sim import naive_policy
from runner.harness.fixtures import load_fixture
from runner.store import MemoryStore, SqliteStore
from runner.tools.contracts import ContractSet
from runner.tools.invocation import Principal, ToolInvocation
from runner.travel.environment import HoldRoom
from runner.travel.scenario import resume_fixture, run_fixture
from runner.travel.supplier import SupplierDatabase
from tests.support.paths import FIXTURES
from tests.support.travel import HOLD_ARGS


def test_default_policy_makes_one_hold_and_naive_makes_two(
    tmp_path: Path, contracts: ContractSet
) -> None:
    fixture = load_fixture(FIXTURES / "hold_timeout_after_commit.yaml", contracts)
    default = run_fixture(fixture, contracts, MemoryStore(), world_dir=tmp_path / "a")
    naive = run_fixture(
        fixture, contracts, MemoryStore(), policy=naive_policy(), world_dir=tmp_path / "b"
    )
    assert default.holds == 1 and default.passed
    assert naive.holds == 2
    assert "holds: expected 1, got 2" in naive.failures  # the check catches the broken runner
    naive_keys = {op.key for op in naive.result.operations}
    assert len(naive_keys) == 2  # a fresh key on retry is the bug


def test_reconciliation_uses_the_same_key_for_the_retry(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "hold_not_committed.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    keys = [inv.operation_key for inv in outcome.environment.tools["hold_room"].invocations]
    lookups = outcome.environment.tools["lookup_hold"].invocations
    assert len(keys) == 2 and keys[0] == keys[1]
    assert [inv.operation_key for inv in lookups] == [keys[0]]
    assert outcome.holds == 1


def test_inconclusive_reconciliation_issues_no_second_write(contracts: ContractSet) -> None:
    fixture = load_fixture(FIXTURES / "hold_reconcile_inconclusive.yaml", contracts)
    outcome = run_fixture(fixture, contracts, MemoryStore())
    assert len(outcome.environment.tools["hold_room"].invocations) == 1
    assert outcome.result.terminal.value == "unknown"
    [operation] = outcome.result.operations
    assert operation.status == "unknown"
    assert outcome.result.transitions[-1].operation_key == operation.key


def test_a_mismatched_payload_on_an_existing_key_is_refused(tmp_path: Path) -> None:
    supplier = SupplierDatabase(tmp_path / "s.sqlite")
    tool = HoldRoom([], FakeClock(), supplier)

    def invoke(args: dict[str, Any]) -> Any:
        invocation = ToolInvocation(
            call_id="c",
            tool="hold_room",
            arguments=args,
            tenant="t",
            principal=Principal(id="p", scopes=frozenset()),
            credentials={},
            operation_key="t:hold_room:k",
            timeout_s=5,
        )
        return asyncio.run(tool(invocation)).payload

    assert invoke(HOLD_ARGS)["status"] == "ok"
    refused = invoke({**HOLD_ARGS, "guests": 2})
    assert refused["error_code"] == "idempotency_mismatch"
    assert supplier.active_holds() == 1
    supplier.close()


@pytest.mark.parametrize("crash_after_commit", [True, False])
def test_resume_after_dying_mid_write_makes_exactly_one_hold(
    tmp_path: Path, contracts: ContractSet, crash_after_commit: bool
) -> None:
    """Die inside hold_room (after or before the supplier commits), then resume from the store."""
    fixture = load_fixture(FIXTURES / "hold_timeout_after_commit.yaml", contracts)
    store = SqliteStore(tmp_path / "runs.sqlite")
    original = HoldRoom.__call__

    async def dying(self: HoldRoom, invocation: ToolInvocation) -> Any:
        if crash_after_commit:
            self._supplier.hold(
                invocation.operation_key or "",
                invocation.tenant,
                {"tenant": invocation.tenant, **invocation.arguments},
                self._clock.now(),
            )
        # Stands in for the process dying: the run's own cancellation is the one thing a tool
        # cannot turn into an outcome (any exception it raises is classified).
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)

    HoldRoom.__call__ = dying  # type: ignore[method-assign]
    try:
        with pytest.raises(asyncio.CancelledError):
            run_fixture(fixture, contracts, store, world_dir=tmp_path / "world")
    finally:
        HoldRoom.__call__ = original  # type: ignore[method-assign]
    [listing] = store.runs()
    assert listing.summary is None
    resumed = resume_fixture(listing.header.run_id, contracts, store)
    assert resumed.result.terminal.value == "complete"
    assert resumed.holds == 1
    seqs = [r.seq for r in store.transitions(listing.header.run_id)]
    assert seqs == list(range(1, len(seqs) + 1))
    classes = [r.result_class for r in resumed.result.transitions if r.trigger == "classify"]
    assert "unknown_outcome" in classes  # the lost write was looked up, not re-sent blindly
    store.close()
