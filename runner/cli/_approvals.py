"""The command line's approval commands: `approvals`, `approve`, `deny` and `continue`.

`approve` and `deny` record the decision (with the approver's id) in the store's approval ledger,
then continue the waiting fixture run at once; `continue` continues a run whose proposals were
decided before (after a crash between the decision and the continuation, or a decision made
through the library). The confirm tokens' secret comes from `RUNNER_APPROVAL_SECRET`; tokens are
never printed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..base.clock import SystemClock
from ..base.errors import ApprovalRefused, ResumeRefused
from ..core.confirm import ApprovalSecret
from ..engine.approvals import approve, deny, pending_approvals
from ..harness.scenario import continue_fixture
from ..proof.replay import Recording
from ..proof.report import printable
from ..store.approvals import Proposal
from ..store.base import Store
from ..tools.mcp import McpConfig
from ..tools.mcp.pinning import recorded_pin
from ._arguments import run_id_text, seconds
from ._common import EXIT_EXPECTATION_FAILED, WORLD, contracts_for, open_store
from ._distributed import drive_lease
from ._outcome import print_scenario
from ._stored import stored_holds
from ._tool_commands import ended_run_json


def add_approval_commands(
    commands: argparse._SubParsersAction[Any],
    with_db: Callable[[argparse.ArgumentParser], None],
) -> None:
    """`approvals`, `approve`, `deny`, `continue` (with_db adds --db to each)."""
    listing = commands.add_parser("approvals", help="list proposals waiting for a decision")
    listing.add_argument("--json", action="store_true", help="print one JSON object per proposal")
    with_db(listing)
    for verb, purpose in (("approve", "approve"), ("deny", "deny")):
        sub = commands.add_parser(
            verb, help=f"{purpose} a run's pending proposal, then continue the run"
        )
        sub.add_argument("run_id", type=run_id_text)
        sub.add_argument("operation", nargs="?", default=None, help="operation key or tool name")
        sub.add_argument("--approver", required=True, help="who decides (recorded)")
        sub.add_argument("--note", default=None, help="why (recorded)")
        if verb == "approve":
            sub.add_argument(
                "--ttl", type=seconds, default=1800.0, help="confirm token lifetime, seconds"
            )
        sub.add_argument("--json", action="store_true", help="print the continuation as JSON")
        _with_mcp(sub)
        with_db(sub)
    again = commands.add_parser(
        "continue", help="continue a run whose proposals are decided (e.g. after a crash)"
    )
    again.add_argument("run_id", type=run_id_text)
    again.add_argument("--json", action="store_true", help="print the continuation as JSON")
    _with_mcp(again)
    with_db(again)


def _with_mcp(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--mcp", type=Path, default=None, help="how to reach the MCP servers the run pinned"
    )


def _mcp_refused(store: Store, args: argparse.Namespace) -> None:
    """A run that pinned MCP servers is continued only with --mcp: checked before deciding."""
    header = store.header(args.run_id)
    if header is not None and args.mcp is None and recorded_pin(header.annotations) is not None:
        raise ResumeRefused(args.run_id, "it called MCP servers: decide it with --mcp CONFIG")


def _proposal_json(proposal: Proposal) -> dict[str, object]:
    return {
        "run_id": proposal.run_id,
        "operation_key": proposal.operation_key,
        "tool": proposal.tool,
        "tenant": proposal.tenant,
        "summary": proposal.summary,
        "params": proposal.params,
        "params_hash": proposal.params_hash,
        "reasons": proposal.reasons,
        "provenance": proposal.provenance,
        "proposed_at": proposal.created_at.isoformat(),
    }


def approvals_command(args: argparse.Namespace) -> int:
    store = open_store(args.db, must_exist=True, read_only=True)
    try:
        pending = pending_approvals(store)
    finally:
        store.close()
    for proposal in pending:
        if args.json:
            print(json.dumps(_proposal_json(proposal), sort_keys=True))
        else:
            why = ", ".join(proposal.reasons)
            print(printable(f"{proposal.run_id}  {proposal.operation_key}  ({why})"))
            print(printable(f"    {proposal.summary}"))
    if not args.json:
        print(f"{len(pending)} pending")
    return 0


def decide_command(args: argparse.Namespace) -> int:
    """`approve` / `deny`: record the decision, then continue the run."""
    secret = ApprovalSecret.from_env()  # before anything is recorded: the continuation needs it
    store = open_store(args.db, must_exist=True)
    now = SystemClock().now()
    try:
        _mcp_refused(store, args)
        if args.command == "approve":
            ttl = timedelta(seconds=args.ttl)
            approve(
                store,
                args.run_id,
                args.operation,
                approver=args.approver,
                secret=secret,
                now=now,
                ttl=ttl,
                note=args.note,
            )
        else:
            deny(
                store, args.run_id, args.operation, approver=args.approver, now=now, note=args.note
            )
    finally:
        store.close()
    return continue_command(args, secret)


def continue_command(args: argparse.Namespace, secret: ApprovalSecret | None = None) -> int:
    secret = secret or ApprovalSecret.from_env()
    contracts = contracts_for(args.contracts)
    store = open_store(args.db, must_exist=True)
    try:
        with drive_lease(store, args.db, args.run_id):
            outcome = continue_fixture(
                args.run_id,
                contracts,
                store,
                world=WORLD,
                secret=secret,
                now=SystemClock().now(),  # checked as it starts: after the lease is held
                store_dir=args.db.folder,
                mcp=McpConfig.load(args.mcp) if args.mcp is not None else None,
            )
    except ApprovalRefused as exc:
        if exc.problem != "continued":
            raise
        if args.json and exc.continued_as is not None:  # as `resume --json` of an ended run
            print(json.dumps(_ended_json(store, exc.continued_as, args), sort_keys=True))
        else:
            print(printable(str(exc).removeprefix("approval refused (continued): ")))
        return 0  # as `resume` reports a run that already ended
    finally:
        store.close()
    print_scenario(outcome, f"{outcome.fixture.name} (continued)", args.json, continuation=True)
    return 0 if outcome.passed else EXIT_EXPECTATION_FAILED


def _ended_json(store: Store, run_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The continuation that already ended, as `resume --json` prints an ended run."""
    recording = Recording.from_store(store, run_id)
    summary = store.summary(run_id)
    assert summary is not None  # `begin_continuation` found it ended
    return ended_run_json(recording, summary, stored_holds(recording, args.db.folder))
