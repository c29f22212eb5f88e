"""The command line's reading commands: `show`, `artifact`, `runs`, `replay` and `grade` (which
also runs fixtures to grade them). Reading commands open the store read-only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from ..base.errors import ConfigError, LoadError, StoreCorrupt, StoreError
from ..core.budget import Limits
from ..harness.fixtures import Expect, Fixture, collect_fixture_paths, load_fixture
from ..harness.scenario import run_fixture, stored_fixture, stored_world
from ..proof._approval_checks import grant_not_in_ledger, tokens_used_by_several_runs
from ..proof.grading import UNFINISHED, Check, FixtureGrade, grade
from ..proof.replay import Recording, describe, replay, stored_limits
from ..proof.report import (
    RunView,
    context_table,
    fallback_line,
    grade_json,
    grade_text,
    printable,
    printable_json,
    replay_json,
    requests_sent,
    run_text,
    side_by_side,
    started_as_line,
    stored_run_json,
)
from ..record.recording import RAW_OUTCOME_ADAPTER, Responded
from ..store.base import RunListing, Store, UnreadableRun
from ..tools.children import children_of, family_ids
from ..tools.contracts import ContractSet
from ..tools.mcp import with_recorded
from ._arguments import EXIT_BAD_INPUT, is_utf8
from ._common import (
    EXIT_EXPECTATION_FAILED,
    WORLD,
    contracts_for,
    one_line,
    open_store,
    policy_for,
    world_dir,
)
from ._tool_commands import (
    listing_json,
)


def show_command(args: argparse.Namespace) -> int:
    store = open_store(args.db, must_exist=True, read_only=True)
    try:
        header = store.header(args.run_id)
        if header is None:
            raise LoadError(f"no run {args.run_id} in {args.db}")
        views = []  # the run, then every child run it started (linked by its outputs)
        for run_id in family_ids(store, args.run_id):
            found = store.header(run_id)
            assert found is not None
            view = RunView.of_stored(found, store.summary(run_id), store.transitions(run_id))
            links = children_of(store.outputs(run_id))
            views.append((found, view, links, store.turns(run_id)))
    finally:
        store.close()
    for index, (found, view, links, turns) in enumerate(views):
        if args.json:
            data = stored_run_json(found, view, requests_sent(turns))
            if links:  # only a run that started child runs has the key
                data["children"] = [{"call_id": c, "run_id": r} for c, r in links]
            print(json.dumps(data, sort_keys=True))
            continue
        heading = found.name if index == 0 else f"child {found.name}"
        print(run_text(view, heading))
        print(started_as_line(found))
        if (line := fallback_line(found, requests_sent(turns))) is not None:
            print(line)
        for call_id, child in links:
            print(printable(f"  child run {child} (call {call_id})"))
        print(context_table(view))
    return 0


def artifact_command(args: argparse.Namespace) -> int:
    store = open_store(args.db, must_exist=True, read_only=True)
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


def runs_command(args: argparse.Namespace) -> int:
    store = open_store(args.db, must_exist=True, read_only=True)
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
    started = max([len(x.header.started_at.isoformat()) for x in listings] + [25])
    print(
        f"{'run_id':<36}  {'started':<{started}}  {'fixture':<{width}}  {'terminal':<9}  "
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
                f"{header.run_id:<36}  {header.started_at.isoformat():<{started}}  "
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
    if not is_utf8(args.source):
        raise LoadError(
            "no such log file, and a run id is UTF-8 text: this one has bytes that are not"
        )
    store = open_store(args.db, must_exist=True, read_only=True)
    try:  # a run and every child run it started
        return [Recording.from_store(store, i) for i in family_ids(store, args.source)]
    finally:
        store.close()


def replay_command(args: argparse.Namespace) -> int:
    contracts = contracts_for(args.contracts)
    policy = policy_for(args.policy)
    diverged = False
    for recording in _recordings(args):
        overrides = {
            name: getattr(args, name)
            for name in (
                "max_attempts",
                "max_model_steps",
                "max_tokens",
                "max_seconds",
                "max_cost_usd",
            )
            if getattr(args, name) is not None
        }
        limits = None
        if overrides:
            try:
                limits = Limits.model_validate({**recording.header.limits, **overrides})
            except ValidationError as exc:
                raise LoadError(f"limits for the replay: {_first_problem(exc)}") from exc
        # Runs stored before headers recorded the prompt were all told the travel world's.
        outcome = replay(
            recording,
            with_recorded(contracts, recording.header.annotations),  # its MCP tools, as pinned
            policy=policy,
            limits=limits,
            system_prompt=WORLD.system_prompt,
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


def stored_holds(recording: Recording, store_dir: Path) -> int | None:
    """The holds in a stored run's supplier database (None: it has none); `StoreError` when
    the database it records is gone (graded, it failed `holds_as_declared` with None holds)."""
    return WORLD.recorded_holds(stored_world(recording.header), store_dir, must_exist=True)


def _tokens_across_runs(recordings: list[Recording], grades: dict[str, FixtureGrade]) -> None:
    """A confirm token used by more than one stored run fails each of those runs' grade."""
    reused = tokens_used_by_several_runs(recordings)
    for grade_ in grades.values():
        for trial in grade_.trials:
            for token, runs in reused.items():
                if trial.run_id in runs:
                    others = ", ".join(run for run in runs if run != trial.run_id)
                    trial.checks.append(
                        Check("no_token_used_twice", False, f"token {token} also used by {others}")
                    )


def _without_holds(expect: Expect | None) -> Expect | None:
    return expect.model_copy(update={"holds": None}) if expect is not None else None


def _stored_expect(recording: Recording) -> Expect | None:
    """The expectations of the fixture a run recorded; `StoreCorrupt` if it no longer loads."""
    document = stored_fixture(recording.header)
    try:
        fixture = Fixture.model_validate(document) if document else None
        if fixture is not None and recording.header.continues is not None:
            return fixture.approval.expect if fixture.approval else None  # after the decision
        return fixture.expect if fixture else None
    except ValidationError as exc:
        raise StoreCorrupt(
            f"run {recording.header.run_id}: its stored fixture does not load: "
            f"{_first_problem(exc)}"
        ) from exc


def _first_problem(exc: ValidationError) -> str:
    """The first thing pydantic refused, as `where: what`."""
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}"


def _grade_stored(
    args: argparse.Namespace, store: Store, contracts: ContractSet, grades: dict[str, FixtureGrade]
) -> dict[str, str]:
    """Grade the stored runs `args.stored` names (all when none); returns the runs that could
    not be graded, each with why (each also named on stderr)."""
    not_graded: dict[str, str] = {}
    recordings: list[Recording] = []
    listed = store.runs()
    run_ids = [linked for named in args.stored for linked in family_ids(store, named)] or [
        item.header.run_id if isinstance(item, RunListing) else item.run_id for item in listed
    ]
    # A run waiting for approval shares its world with its continuation, which has
    # changed it since: its own holds can no longer be counted from that world.
    continued = {
        str(item.header.continues.get("run_id"))
        for item in listed
        if isinstance(item, RunListing) and item.header.continues
    }
    for run_id in run_ids:
        try:
            recording = Recording.from_store(store, run_id)
            if recording.summary is None:  # its terminal state is the one thing not yet known
                _not_graded(not_graded, run_id, UNFINISHED)
                continue
            expect = _stored_expect(recording)
            stored_limits(recording.header)
            holds = stored_holds(recording, args.db.folder)
            if run_id in continued:
                expect = _without_holds(expect)
        except StoreError as exc:  # unreadable
            _not_graded(not_graded, run_id, exc)
            continue
        pinned = with_recorded(contracts, recording.header.annotations)
        try:
            trial = grade(recording, pinned, expect, holds, system_prompt=WORLD.system_prompt)
        except ConfigError as exc:  # graded with other contracts than it ran with
            _not_graded(not_graded, run_id, exc)
            continue
        forged = grant_not_in_ledger(recording, store)
        if forged is not None:
            trial.checks.append(Check("no_write_without_required_approval", False, forged))
        name = recording.header.name
        grades.setdefault(name, FixtureGrade(fixture=name)).trials.append(trial)
        recordings.append(recording)
    _tokens_across_runs(recordings, grades)
    return not_graded


def _not_graded(not_graded: dict[str, str], run_id: str, exc: Exception | str) -> None:
    """Name a run that could not be graded, and why, on stderr and in `not_graded` (the other
    runs are still graded)."""
    named = str(exc) if run_id in str(exc) else f"run {run_id}: {exc}"
    print(f"error: {printable(one_line(named))}", file=sys.stderr)
    not_graded[run_id] = one_line(str(exc))


def grade_command(args: argparse.Namespace) -> int:
    if args.trials < 1:
        raise LoadError(f"--trials must be at least 1, got {args.trials}")
    contracts = contracts_for(args.contracts)
    grades: dict[str, FixtureGrade] = {}
    stored = args.stored is not None
    if stored and args.paths:
        raise LoadError("grade takes fixture paths or --stored RUN_ID..., not both")
    if stored and args.policy is not None:
        raise LoadError("--policy has no effect on --stored runs (they ran under their own)")
    not_graded: dict[str, str] = {}
    store = open_store(args.db, must_exist=stored, read_only=stored)
    try:
        if args.stored is not None:
            not_graded = _grade_stored(args, store, contracts, grades)
        else:
            if not args.paths:
                raise LoadError("grade needs fixture paths, or --stored to grade stored runs")
            policy = policy_for(args.policy)
            world = world_dir(args.db)
            for path in collect_fixture_paths(args.paths):
                fixture = load_fixture(path, contracts)
                graded = grades.setdefault(fixture.name, FixtureGrade(fixture=fixture.name))
                for index in range(args.trials):  # trials differ: a seed each, recorded
                    outcome = run_fixture(
                        fixture,
                        contracts,
                        store,
                        world=WORLD,
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
        print(json.dumps(grade_json(ordered, base_seed, not_graded), sort_keys=True))
    else:
        print(grade_text(ordered, base_seed, not_graded))
    if not_graded:
        return EXIT_BAD_INPUT
    return 0 if ordered and all(g.pass_k for g in ordered) else EXIT_EXPECTATION_FAILED
