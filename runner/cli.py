"""The `runner` command: run fixtures; resume, show and list stored runs; check contracts."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from . import log
from ._arguments import EXIT_BAD_INPUT, ArgumentParser, count, seconds, seed
from ._tool_commands import (
    add_tool_commands,
    ended_run_json,
    listing_json,
    run_tool_command,
)
from .budget import Limits
from .contracts import ContractSet, load_contracts
from .errors import LoadError, RunnerError, StoreCorrupt, StoreError
from .grading import FixtureGrade, grade
from .models import live_model
from .models.base import ModelAdapter
from .policy import Policy
from .recording import RAW_OUTCOME_ADAPTER, Responded
from .replay import Recording, describe, replay, stored_limits
from .report import (
    RunView,
    context_table,
    grade_json,
    grade_text,
    printable,
    printable_json,
    replay_json,
    run_json,
    run_text,
    side_by_side,
)
from .sim import naive_policy
from .store import FanoutStore, JsonlLog, SqliteStore
from .store.base import RunListing, Store, UnreadableRun
from .travel import (
    SEMANTIC_RULES,
    SYSTEM_PROMPT,
    contracts_dir,
    fixtures_dir,
    load_travel_contracts,
)
from .travel.fixture_check import check_command
from .travel.fixtures import Expect, Fixture, collect_fixture_paths, load_fixture
from .travel.scenario import ScenarioRun, resume_fixture, run_fixture, stored_fixture, stored_world
from .travel.supplier import SupplierDatabase, locate

EXIT_EXPECTATION_FAILED = 1
DEFAULT_DB = Path("runs.sqlite")


def _contracts(directory: Path | None) -> ContractSet:
    if directory is None or directory.resolve() == contracts_dir():
        return load_travel_contracts()
    return load_contracts(directory, SEMANTIC_RULES)


def _policy(value: str | None) -> Policy | None:
    if value is None:
        return None
    if value == "default":
        return Policy()
    if value == "naive":  # a simulation of the broken runner, to show the checks catch it
        return naive_policy()
    return Policy.load(Path(value))


def _with_model(sub: argparse.ArgumentParser, purpose: str) -> None:
    sub.add_argument("--model", default=None, help=f"{purpose}: openai:MODEL or anthropic:MODEL")
    sub.add_argument("--base-url", default=None, help="with --model: the provider's endpoint")
    sub.add_argument("--fallback-model", default=None, help="with --model: same-family fallback")


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="runner", description=__doc__)
    parser.add_argument(
        "--contracts", type=Path, default=None, help="contracts folder (default: the bundled ones)"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="log every transition to stderr (structlog)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def with_db(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--db", type=Path, default=DEFAULT_DB, help="SQLite store (default: runs.sqlite)"
        )

    run = commands.add_parser("run", help="run fixture scenarios and check their expectations")
    run.add_argument("paths", nargs="+", type=Path, help="fixture files or folders")
    run.add_argument("--repeat", type=count, default=1, help="run each fixture N times, each clean")
    run.add_argument("--json", action="store_true", help="print one JSON object per run")
    run.add_argument("--log", type=Path, default=None, help="also append a JSONL log to FILE")
    run.add_argument("--seed", type=seed, default=0, help="seed for backoff jitter (default 0)")
    run.add_argument("--policy", default=None, help="default, naive (simulation), or a file")
    _with_model(run, "plan with a live model")
    with_db(run)

    resume = commands.add_parser("resume", help="continue a run that was killed")
    resume.add_argument("run_id")
    _with_model(resume, "the live model the run was started with (default: from its header)")
    resume.add_argument("--json", action="store_true", help="print the run as one JSON object")
    with_db(resume)

    show = commands.add_parser("show", help="print a stored run's trajectory")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print the run as one JSON object")
    with_db(show)

    replay = commands.add_parser(
        "replay", help="re-drive a stored run (or a JSONL log) from its recorded inputs"
    )
    replay.add_argument("source", help="a RUN_ID in --db, or a JSONL log file")
    replay.add_argument("--run", default=None, help="with a log file: only this run")
    replay.add_argument(
        "--policy", default=None, help="counterfactual: default, naive (simulation), or a file"
    )
    for bound, kind in (
        ("max_attempts", count),
        ("max_model_steps", count),
        ("max_tokens", count),
        ("max_seconds", seconds),
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
    artifact.add_argument("run_id")
    artifact.add_argument("call_id")
    with_db(artifact)

    runs = commands.add_parser("runs", help="list stored runs")
    runs.add_argument("--json", action="store_true", help="print one JSON object per run")
    with_db(runs)

    _contracts_and_fixtures_parsers(parser, commands)  # last: it adds --verbose to all
    return parser


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


def _open_store(path: Path, *, must_exist: bool, read_only: bool = False) -> SqliteStore:
    """The store at `path`; reading commands open it read-only (nothing created or migrated)."""
    if (must_exist or read_only) and not path.exists():
        raise LoadError(f"store {path} does not exist")
    return SqliteStore(path, read_only=read_only)


def _print_scenario(outcome: ScenarioRun, heading: str, as_json: bool) -> None:
    view = RunView.of_result(outcome.result, outcome.holds)
    expect = {"passed": outcome.passed, "failures": outcome.failures}
    if as_json:
        print(json.dumps(run_json(view, expect), sort_keys=True))
        return
    print(run_text(view, heading))
    if outcome.fixture.expect is not None:
        verdict = "met" if outcome.passed else "FAILED: " + "; ".join(outcome.failures)
        print(f"  expect: {printable(verdict)}")
    print()


def _model(args: argparse.Namespace) -> ModelAdapter | None:
    if args.model is None:
        if args.base_url is not None or args.fallback_model is not None:
            raise LoadError("--base-url and --fallback-model go with --model")
        return None
    return live_model(args.model, base_url=args.base_url, fallback_model=args.fallback_model)


def _world_dir(db: Path) -> Path:
    """Where runs stored in `db` keep their simulated world: beside it, by absolute path."""
    db = db.resolve()
    return db.parent / f"{db.name}.world"


def _run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise LoadError(f"--repeat must be at least 1, got {args.repeat}")
    contracts = _contracts(args.contracts)
    policy = _policy(args.policy)
    fixtures = [load_fixture(path, contracts) for path in collect_fixture_paths(args.paths)]
    model = _model(args)
    store: Store = _open_store(args.db, must_exist=False)
    if args.log is not None:
        store = FanoutStore(store, JsonlLog(args.log))
    world = _world_dir(args.db)
    failed = passed = 0
    try:
        for fixture in fixtures:
            for index in range(1, args.repeat + 1):
                outcome = run_fixture(
                    fixture,
                    contracts,
                    store,
                    seed=args.seed,
                    policy=policy,
                    world_dir=world,
                    model=model,
                )
                _print_scenario(outcome, f"{fixture.name} [{index}/{args.repeat}]", args.json)
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
    contracts = _contracts(args.contracts)
    store = _open_store(args.db, must_exist=True)
    try:
        summary = store.summary(args.run_id)
        if summary is not None:
            if args.json:  # the stored run as `show --json` prints it, marked as not resumed
                recording = Recording.from_store(store, args.run_id)
                holds = _stored_holds(recording, args.db.resolve().parent)
                ended = ended_run_json(recording.header, summary, recording.transitions, holds)
                print(json.dumps(ended, sort_keys=True))
                return 0
            print(
                printable(f"run {args.run_id} already ended: {summary.terminal} ({summary.reason})")
            )
            return 0
        outcome = resume_fixture(
            args.run_id, contracts, store, model=_model(args), store_dir=args.db.resolve().parent
        )
    finally:
        store.close()
    _print_scenario(outcome, f"{outcome.fixture.name} (resumed)", args.json)
    return 0 if outcome.passed else EXIT_EXPECTATION_FAILED


def _show(args: argparse.Namespace) -> int:
    store = _open_store(args.db, must_exist=True, read_only=True)
    try:
        header = store.header(args.run_id)
        if header is None:
            raise LoadError(f"no run {args.run_id} in {args.db}")
        view = RunView.of_stored(header, store.summary(args.run_id), store.transitions(args.run_id))
    finally:
        store.close()
    if args.json:
        print(json.dumps(run_json(view, None), sort_keys=True))
    else:
        print(run_text(view, header.name))
        print(context_table(view))
    return 0


def _artifact(args: argparse.Namespace) -> int:
    store = _open_store(args.db, must_exist=True, read_only=True)
    try:
        if store.header(args.run_id) is None:
            raise LoadError(f"no run {args.run_id} in {args.db}")
        outputs = [o for o in store.outputs(args.run_id) if o.call_id == args.call_id]
    finally:
        store.close()
    if not outputs:
        raise LoadError(f"run {args.run_id} has no tool output for call {args.call_id}")
    outcome = outputs[-1].outcome  # the last try is the one the model was shown
    if isinstance(outcome, Responded):
        text = json.dumps(outcome.payload, indent=2, sort_keys=True, ensure_ascii=False)
    else:
        text = json.dumps(RAW_OUTCOME_ADAPTER.dump_python(outcome, mode="json"), indent=2)
    print(printable_json(text))
    return 0


def _runs(args: argparse.Namespace) -> int:
    store = _open_store(args.db, must_exist=True, read_only=True)
    try:
        everything = store.runs()
    finally:
        store.close()
    listings = [listing for listing in everything if isinstance(listing, RunListing)]
    if args.json:
        for listing in everything:
            print(json.dumps(listing_json(listing), sort_keys=True))
            if isinstance(listing, UnreadableRun):
                print(f"error: {listing.problem}", file=sys.stderr)
        return EXIT_BAD_INPUT if len(listings) < len(everything) else 0
    width = max([len(listing.header.name) for listing in listings] + [len("fixture")])
    reasons = max([len(x.summary.reason) for x in listings if x.summary] + [len("reason")])
    print(
        f"{'run_id':<36}  {'started':<25}  {'fixture':<{width}}  {'terminal':<9}  "
        f"{'reason':<{reasons}}  attempts"
    )
    for listing in everything:
        if isinstance(listing, UnreadableRun):  # named in its place; the rest still listed
            print(f"{listing.run_id:<36}  (unreadable: see stderr)")
            print(f"error: {listing.problem}", file=sys.stderr)
            continue
        header, summary = listing.header, listing.summary
        terminal = summary.terminal if summary else "(running)"
        reason = summary.reason if summary else "-"
        attempts = str(summary.attempts) if summary else "-"
        print(
            printable(
                f"{header.run_id:<36}  {header.started_at.isoformat():<25}  "
                f"{header.name:<{width}}  {terminal:<9}  {reason:<{reasons}}  {attempts}"
            )
        )
    return EXIT_BAD_INPUT if len(listings) < len(everything) else 0


def _recordings(args: argparse.Namespace) -> list[Recording]:
    source = Path(args.source)
    if source.suffix == ".jsonl" or source.is_file():
        recordings = Recording.from_log(source)
        if args.run is not None:
            recordings = [r for r in recordings if r.header.run_id == args.run]
        if not recordings:
            raise LoadError(f"no run{' ' + args.run if args.run else ''} in {source}")
        return recordings
    if args.run is not None:
        raise LoadError(f"--run picks a run from a log file, and {source} is not a file")
    store = _open_store(args.db, must_exist=True, read_only=True)
    try:
        return [Recording.from_store(store, args.source)]
    finally:
        store.close()


def _replay(args: argparse.Namespace) -> int:
    contracts = _contracts(args.contracts)
    policy = _policy(args.policy)
    diverged = False
    for recording in _recordings(args):
        overrides = {
            name: getattr(args, name)
            for name in ("max_attempts", "max_model_steps", "max_tokens", "max_seconds")
            if getattr(args, name) is not None
        }
        limits = None
        if overrides:
            try:
                limits = Limits.model_validate({**recording.header.limits, **overrides})
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(part) for part in problem["loc"])
                raise LoadError(f"limits for the replay: {where}: {problem['msg']}") from exc
        # Runs stored before headers recorded the prompt were all told the travel world's.
        outcome = replay(
            recording, contracts, policy=policy, limits=limits, system_prompt=SYSTEM_PROMPT
        )
        diverged |= not outcome.changes and not outcome.identical
        sentence = describe(outcome)
        if args.json:
            print(json.dumps(replay_json(outcome, sentence), sort_keys=True))
            continue
        print(printable(f"{recording.header.name}  run {recording.header.run_id}"))
        if outcome.changes or outcome.divergence is not None:
            print(side_by_side(recording.transitions, outcome.replayed.records))
        print(f"  {printable(sentence)}\n")
    return EXIT_EXPECTATION_FAILED if diverged else 0


def _stored_holds(recording: Recording, store_dir: Path) -> int | None:
    recorded = stored_world(recording.header).get("supplier_db")
    path = locate(recorded, store_dir) if recorded else None
    if path is None:
        return None
    supplier = SupplierDatabase.open_existing(path, read_only=True)
    try:
        return supplier.active_holds()
    finally:
        supplier.close()


def _stored_expect(recording: Recording) -> Expect | None:
    """The expectations of the fixture a run recorded; `StoreCorrupt` if it no longer loads."""
    document = stored_fixture(recording.header)
    try:
        return Fixture.model_validate(document).expect if document else None
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise StoreCorrupt(
            f"run {recording.header.run_id}: its stored fixture does not load: "
            f"{where}: {problem['msg']}"
        ) from exc


def _grade(args: argparse.Namespace) -> int:
    if args.trials < 1:
        raise LoadError(f"--trials must be at least 1, got {args.trials}")
    contracts = _contracts(args.contracts)
    grades: dict[str, FixtureGrade] = {}
    stored = args.stored is not None
    if stored and args.paths:
        raise LoadError("grade takes fixture paths or --stored RUN_ID..., not both")
    if stored and args.policy is not None:
        raise LoadError("--policy has no effect on --stored runs (they ran under their own)")
    unreadable = 0
    store = _open_store(args.db, must_exist=stored, read_only=stored)
    try:
        if args.stored is not None:
            run_ids = args.stored or [
                item.header.run_id if isinstance(item, RunListing) else item.run_id
                for item in store.runs()
            ]
            for run_id in run_ids:
                try:
                    recording = Recording.from_store(store, run_id)
                    expect = _stored_expect(recording)
                    stored_limits(recording.header)
                    holds = _stored_holds(recording, args.db.resolve().parent)
                except StoreError as exc:  # named; the other runs are still graded
                    named = str(exc) if run_id in str(exc) else f"run {run_id}: {exc}"
                    print(f"error: {printable(_one_line(named))}", file=sys.stderr)
                    unreadable += 1
                    continue
                trial = grade(recording, contracts, expect, holds)
                name = recording.header.name
                grades.setdefault(name, FixtureGrade(fixture=name)).trials.append(trial)
        else:
            if not args.paths:
                raise LoadError("grade needs fixture paths, or --stored to grade stored runs")
            policy = _policy(args.policy)
            world = _world_dir(args.db)
            for path in collect_fixture_paths(args.paths):
                fixture = load_fixture(path, contracts)
                graded = grades.setdefault(fixture.name, FixtureGrade(fixture=fixture.name))
                for index in range(args.trials):  # trials differ: a seed each, recorded
                    outcome = run_fixture(
                        fixture,
                        contracts,
                        store,
                        seed=args.seed + index,
                        policy=policy,
                        world_dir=world,
                    )
                    recording = Recording.from_store(store, outcome.result.run_id)
                    graded.trials.append(grade(recording, contracts, fixture.expect, outcome.holds))
    finally:
        store.close()
    ordered = list(grades.values())
    base_seed = None if args.stored is not None else args.seed
    if args.json:
        print(json.dumps(grade_json(ordered, base_seed), sort_keys=True))
    else:
        print(grade_text(ordered, base_seed))
    if unreadable:
        return EXIT_BAD_INPUT
    return 0 if ordered and all(g.pass_k for g in ordered) else EXIT_EXPECTATION_FAILED


def _check_contracts(args: argparse.Namespace) -> int:
    if args.contracts_command != "check":
        return run_tool_command(args)
    contracts = _contracts(args.contracts)
    print(f"ok: {len(contracts)} contracts compiled ({', '.join(sorted(contracts))})")
    return 0


def _fixtures(args: argparse.Namespace) -> int:
    if args.fixtures_command == "path":
        print(fixtures_dir())
        return 0
    return check_command(args.paths, _contracts(args.contracts))


_COMMANDS = {
    "run": _run,
    "resume": _resume,
    "show": _show,
    "runs": _runs,
    "replay": _replay,
    "grade": _grade,
    "artifact": _artifact,
    "contracts": _check_contracts,
    "fixtures": _fixtures,
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
        print(f"error: {printable(_one_line(str(exc)))}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _one_line(message: str) -> str:
    """An error is one line on stderr, whatever line breaks its message carries."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


if __name__ == "__main__":
    sys.exit(main())
