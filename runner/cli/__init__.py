"""The `runner` command: run fixtures; resume, show and list stored runs; check contracts.

A face: it may import every layer, the travel world included; it wires the travel world
(`_common.WORLD`) to the harness that runs fixtures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ..base import log
from ..base.errors import LoadError, RunnerError, StoreError
from ..harness.fixtures import collect_fixture_paths, load_fixture
from ..harness.scenario import resume_fixture, run_fixture
from ..models import live_model
from ..models.base import ModelAdapter
from ..proof.replay import Recording
from ..proof.report import printable
from ..record.spec import DURABILITIES
from ..record.trace import Durability
from ..store import FanoutStore, JsonlLog
from ..store.base import Store
from ..tools.mcp import McpConfig, McpTools
from ._app import add_app_arguments, resume_with_app
from ._approvals import (
    add_approval_commands,
    approvals_command,
    continue_command,
    decide_command,
)
from ._arguments import (
    EXIT_BAD_INPUT,
    ArgumentParser,
    count,
    dollars,
    run_id_text,
    seconds,
    seed,
)
from ._common import (
    EXIT_EXPECTATION_FAILED,
    WORLD,
    contracts_for,
    database,
    default_database,
    one_line,
    open_store,
    policy_for,
    world_dir,
)
from ._distributed import (
    add_distributed_parsers,
    drive_lease,
    submit_command,
    worker_command,
)
from ._fixture_check import check_command
from ._outcome import print_scenario
from ._serve import add_serve_parser, serve_command
from ._stored import (
    artifact_command,
    grade_command,
    replay_command,
    runs_command,
    show_command,
    stored_holds,
)
from ._tool_commands import add_tool_commands, ended_run_json, run_tool_command


def _with_model(sub: argparse.ArgumentParser, purpose: str) -> None:
    sub.add_argument("--model", default=None, help=f"{purpose}: openai:MODEL or anthropic:MODEL")
    sub.add_argument("--base-url", default=None, help="with --model: the provider's endpoint")
    sub.add_argument("--fallback-model", default=None, help="with --model: same-family fallback")


def _with_mcp(sub: argparse.ArgumentParser, purpose: str) -> None:
    sub.add_argument("--mcp", type=Path, default=None, help=purpose)


def _with_durability(sub: argparse.ArgumentParser, default: Durability | None) -> None:
    """`--durability`; `default` None: as the stored run began (`resume`)."""
    sub.add_argument(
        "--durability",
        choices=DURABILITIES,
        default=default,
        help="commit every transition or each step's together "
        f"(default: {default or 'as the run began'}); a "
        "write's intent and outcome are committed before anything depends on them either way",
    )


def _parser() -> argparse.ArgumentParser:
    # the docstring's first paragraph: the rest is for the code's readers, not the command's
    parser = ArgumentParser(prog="runner", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--contracts", type=Path, default=None, help="contracts folder (default: the bundled ones)"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="log every transition to stderr (structlog)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def with_db(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--db",
            type=database,
            default=default_database(),
            help="SQLite file or postgresql:// URL (default: $RUNNER_DB, else runs.sqlite)",
        )

    run = commands.add_parser("run", help="run fixture scenarios and check their expectations")
    run.add_argument("paths", nargs="+", type=Path, help="fixture files or folders")
    run.add_argument("--repeat", type=count, default=1, help="run each fixture N times, each clean")
    run.add_argument("--json", action="store_true", help="print one JSON object per run")
    run.add_argument("--log", type=Path, default=None, help="also append a JSONL log to FILE")
    run.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="seed for backoff jitter; copy i of --repeat (from 0) runs with SEED + i (default 0)",
    )
    run.add_argument("--policy", default=None, help="default, naive (simulation), or a file")
    _with_mcp(run, "MCP servers config (YAML/JSON): their tools too")
    _with_model(run, "plan with a live model")
    with_db(run)
    _with_durability(run, "transition")

    resume = commands.add_parser("resume", help="continue a run that was killed")
    resume.add_argument("run_id", type=run_id_text)
    _with_model(resume, "the live model the run was started with (default: from its header)")
    _with_mcp(resume, "how to reach the MCP servers the run pinned")
    add_app_arguments(resume, "a run your application started")
    resume.add_argument("--json", action="store_true", help="print the run as one JSON object")
    with_db(resume)
    _with_durability(resume, None)

    show = commands.add_parser("show", help="print a stored run's trajectory")
    show.add_argument("run_id", type=run_id_text)
    show.add_argument("--json", action="store_true", help="print the run as one JSON object")
    with_db(show)

    _replay_parser(commands, with_db)

    grade = commands.add_parser(
        "grade", help="grade fixtures over K clean trials each, or runs already stored"
    )
    grade.add_argument("paths", nargs="*", type=Path, help="fixture files or folders to run")
    grade.add_argument("--trials", type=count, default=1, help="trials per fixture (pass^k)")
    grade.add_argument(
        "--stored",
        nargs="*",
        default=None,
        metavar="RUN_ID",
        help="grade runs stored in --db instead (all of them when no id is given)",
    )
    grade.add_argument(
        "--policy", default=None, help="default, naive (simulation), or a policy file"
    )
    grade.add_argument(
        "--seed", type=seed, default=0, help="trial i runs with seed SEED + i (default 0)"
    )
    grade.add_argument("--json", action="store_true", help="print the grades as JSON")
    with_db(grade)

    artifact = commands.add_parser("artifact", help="print a tool call's full stored output")
    artifact.add_argument("run_id", type=run_id_text)
    artifact.add_argument("call_id")
    with_db(artifact)

    runs = commands.add_parser("runs", help="list stored runs")
    runs.add_argument("--json", action="store_true", help="print one JSON object per run")
    with_db(runs)

    for add_commands in (add_approval_commands, add_distributed_parsers, add_serve_parser):
        add_commands(commands, with_db)
    _contracts_and_fixtures_parsers(parser, commands)  # last: it adds --verbose to all
    return parser


def _replay_parser(
    commands: argparse._SubParsersAction[ArgumentParser],
    with_db: Callable[[argparse.ArgumentParser], None],
) -> None:
    replay = commands.add_parser(
        "replay", help="re-drive a stored run (or a JSONL log) from its recorded inputs"
    )
    replay.add_argument("source", help="a RUN_ID in --db, or a JSONL log file")
    replay.add_argument(
        "--run", type=run_id_text, default=None, help="with a log file: only this run"
    )
    replay.add_argument(
        "--policy", default=None, help="counterfactual: default, naive (simulation), or a file"
    )
    for bound, kind in (
        ("max_attempts", count),
        ("max_model_steps", count),
        ("max_tokens", count),
        ("max_seconds", seconds),
        ("max_cost_usd", dollars),
    ):
        replay.add_argument(
            f"--{bound.replace('_', '-')}",
            dest=bound,
            type=kind,
            default=None,
            help=f"counterfactual: another {bound}",
        )
    replay.add_argument("--json", action="store_true", help="print one JSON object per replay")
    with_db(replay)


def _contracts_and_fixtures_parsers(
    parser: ArgumentParser, commands: argparse._SubParsersAction[ArgumentParser]
) -> None:
    contracts = commands.add_parser("contracts", help="work with tool contracts")
    contract_commands = contracts.add_subparsers(dest="contracts_command", required=True)
    contract_commands.add_parser("check", help="compile every contract")
    fixtures = commands.add_parser("fixtures", help="the bundled fixtures; check fixture files")
    fixture_commands = fixtures.add_subparsers(dest="fixtures_command", required=True)
    fixture_commands.add_parser("path", help="print the bundled fixtures folder (any install)")
    add_tool_commands(parser, contract_commands, fixture_commands)  # last: adds --verbose to all


def _model(args: argparse.Namespace) -> ModelAdapter | None:
    if args.model is None:
        if args.base_url is not None or args.fallback_model is not None:
            raise LoadError("--base-url and --fallback-model go with --model")
        return None
    return live_model(args.model, base_url=args.base_url, fallback_model=args.fallback_model)


def _same_file(log: Path, db: Path | None) -> bool:
    """Whether the log would be appended to the SQLite file itself or one of its own (the WAL,
    the shared-memory index, a journal), by any name (a link): SQLite's checkpoint overwrote
    what was appended (or deleted the file), and the store was then no log either."""
    if db is None:
        return False
    store = db.resolve()
    own = [store, *(store.with_name(store.name + end) for end in ("-wal", "-shm", "-journal"))]
    if log.resolve() in own:
        return True
    return log.exists() and any(path.exists() and os.path.samefile(log, path) for path in own)


def _run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise LoadError(f"--repeat must be at least 1, got {args.repeat}")
    contracts = contracts_for(args.contracts)
    policy = policy_for(args.policy)
    mcp = McpTools.connect_sync(McpConfig.load(args.mcp)) if args.mcp is not None else None
    if mcp is not None:  # pinned once: every run of this command keeps this tool list
        contracts = mcp.contract_set(contracts.values())
        for problem in mcp.unused_overlays():
            print(f"warning: MCP {printable(problem)}", file=sys.stderr)
    fixtures = [load_fixture(path, contracts) for path in collect_fixture_paths(args.paths)]
    model = _model(args)
    if args.log is not None and _same_file(args.log, args.db.path):
        raise LoadError(f"--log {args.log} is the store itself (--db): name another file")
    store: Store = open_store(args.db, must_exist=False)
    leases = store  # a PostgreSQL store's leases are its own, whatever log is beside it
    if args.log is not None:
        store = FanoutStore(store, JsonlLog(args.log))
    world = world_dir(args.db)
    failed = passed = 0
    try:
        for fixture in fixtures:
            for index in range(1, args.repeat + 1):
                run_id = str(uuid.uuid4())  # minted here, so its lease is held before it begins
                with drive_lease(leases, args.db, run_id):
                    outcome = run_fixture(
                        fixture,
                        contracts,
                        store,
                        world=WORLD,
                        seed=args.seed + index - 1,  # each copy its own draws, as grade's trials
                        policy=policy,
                        world_dir=world,
                        model=model,
                        mcp=mcp,
                        durability=args.durability,
                        run_id=run_id,
                    )
                print_scenario(outcome, f"{fixture.name} [{index}/{args.repeat}]", args.json)
                passed += outcome.passed
                failed += not outcome.passed
    except StoreError as exc:  # the run stopped where its record stops: it can go on from there
        raise StoreError(
            f"{exc}; any run it stopped shows as (running) in `runner runs --db {args.db}`, "
            f"and `runner resume RUN_ID --db {args.db}` continues it"
        ) from exc
    finally:
        store.close()
    if not args.json:
        print(
            f"{len(fixtures)} fixtures x {args.repeat}: "
            f"{passed} runs met expectations, {failed} did not"
        )
    return EXIT_EXPECTATION_FAILED if failed else 0


def _resume(args: argparse.Namespace) -> int:
    if args.app is not None and (args.model is not None or args.mcp is not None):
        raise LoadError("--app builds the run's model and tools: give neither --model nor --mcp")
    contracts = contracts_for(args.contracts)
    store = open_store(args.db, must_exist=True)
    try:
        summary = store.summary(args.run_id)
        if summary is not None:
            if args.json:  # the stored run as `show --json` prints it, marked as not resumed
                recording = Recording.from_store(store, args.run_id)
                holds = stored_holds(recording, args.db.folder)
                ended = ended_run_json(recording, summary, holds)
                print(json.dumps(ended, sort_keys=True))
                return 0
            print(
                printable(f"run {args.run_id} already ended: {summary.terminal} ({summary.reason})")
            )
            return 0
        if args.app is not None:  # a run an embedded application started
            with drive_lease(store, args.db, args.run_id):
                resume_with_app(args, store)
        else:
            with drive_lease(store, args.db, args.run_id):
                outcome = resume_fixture(
                    args.run_id,
                    contracts,
                    store,
                    world=WORLD,
                    model=_model(args),
                    store_dir=args.db.folder,
                    mcp=McpConfig.load(args.mcp) if args.mcp is not None else None,
                    durability=args.durability,
                )
    finally:
        store.close()
    if args.app is not None:  # the resumed run as `show` prints it, from the store
        return show_command(args)
    print_scenario(outcome, f"{outcome.fixture.name} (resumed)", args.json)
    return 0 if outcome.passed else EXIT_EXPECTATION_FAILED


def _check_contracts(args: argparse.Namespace) -> int:
    if args.contracts_command != "check":
        return run_tool_command(args)
    contracts = contracts_for(args.contracts)
    print(f"ok: {len(contracts)} contracts compiled ({', '.join(sorted(contracts))})")
    return 0


def _fixtures(args: argparse.Namespace) -> int:
    if args.fixtures_command == "path":
        print(WORLD.fixtures_dir())
        return 0
    return check_command(args.paths, contracts_for(args.contracts))


_COMMANDS = {
    "run": _run,
    "resume": _resume,
    "show": show_command,
    "runs": runs_command,
    "replay": replay_command,
    "grade": grade_command,
    "artifact": artifact_command,
    "approvals": approvals_command,
    "approve": decide_command,
    "deny": decide_command,
    "continue": continue_command,
    "contracts": _check_contracts,
    "fixtures": _fixtures,
    "submit": submit_command,
    "worker": worker_command,
    "serve": serve_command,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `runner ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    log.configure(level=logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return _COMMANDS[args.command](args)
    except RunnerError as exc:
        print(f"error: {printable(one_line(str(exc)))}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
