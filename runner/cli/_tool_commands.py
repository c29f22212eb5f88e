"""The command line's tool and fixture commands, and the JSON of `runs` and of an ended `resume`.

`runner contracts export --module pkg.mod [--module ...] [--out DIR] [--check]` imports each
module (the working directory first on the import path, as `python -m` would have it) and writes
`<name>.json` for every contract it declares (`runner.tools.declare.declared_in`). `runner
fixtures check PATH...` reports what the runner would refuse in each fixture's script
(`_fixture_check.py`, over the travel world's fixtures). Both exit 0 when all is well, 1 when
something needs a look (a warning, an exported file that differs), 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError, RunnerError
from ..proof.replay import Recording
from ..proof.report import RunView, printable, requests_sent, stored_run_json
from ..record.trace import RunSummary
from ..store.base import RunListing, UnreadableRun
from ..tools.contracts import CompiledContract
from ..tools.declare import contract_json, declared_in

EXIT_NEEDS_A_LOOK = 1


def add_tool_commands(
    parser: argparse.ArgumentParser,
    contract_commands: argparse._SubParsersAction[Any],
    fixture_commands: argparse._SubParsersAction[Any],
) -> None:
    """`contracts export`, `fixtures check`, then `--verbose` on every subcommand (call last)."""
    export = contract_commands.add_parser(
        "export", help="write the JSON of contracts declared in Python"
    )
    export.add_argument(
        "--module",
        action="append",
        required=True,
        metavar="PKG.MOD",
        help="a module declaring contracts (DeclaredTools or CompiledContract globals); repeatable",
    )
    export.add_argument("--out", type=Path, default=None, help="write DIR/<name>.json")
    export.add_argument("--tool", action="append", default=None, help="only this tool; repeatable")
    export.add_argument(
        "--check", action="store_true", help="with --out: exit 1 if a file differs, write nothing"
    )
    check = fixture_commands.add_parser(
        "check", help="warn where a fixture's scripted calls or responses would be refused"
    )
    check.add_argument("paths", nargs="+", type=Path, help="fixture files or folders")
    accept_verbose_anywhere(parser)


def accept_verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """`--verbose` after a subcommand too (`runner run X --verbose`), not only before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument(
                    "--verbose",
                    action="store_true",
                    default=argparse.SUPPRESS,  # absent here: keep what the main parser set
                    help="log every transition to stderr (structlog)",
                )
                accept_verbose_anywhere(sub)


def run_tool_command(args: argparse.Namespace) -> int:
    """`contracts export` (`fixtures check`: `_fixture_check.py`)."""
    return _export(args)


def _import(name: str) -> Any:
    cwd = str(Path.cwd())
    if cwd not in sys.path:  # the `runner` script's path does not hold the working directory
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except RunnerError:  # e.g. a declaration the runner refuses: its own one-line error
        raise
    except Exception as exc:  # the user's module failed: named in one line, not a traceback
        raise ConfigError(
            f"--module {name} cannot be imported: {type(exc).__name__}: {exc}"
        ) from exc


def _declared(args: argparse.Namespace) -> list[CompiledContract]:
    found: dict[str, CompiledContract] = {}
    for name in args.module:
        for compiled in declared_in(_import(name)):
            known = found.get(compiled.name)
            if known is not None and known is not compiled:
                raise ConfigError(f"contract {compiled.name} is declared by two modules")
            found[compiled.name] = compiled
    if args.tool is not None:
        missing = sorted(set(args.tool) - set(found))
        if missing:
            raise ConfigError(f"--tool {', '.join(missing)}: not declared by the modules given")
        found = {name: found[name] for name in args.tool}
    if not found:
        raise ConfigError(f"no contracts declared in {', '.join(args.module)}")
    return list(found.values())


def _export(args: argparse.Namespace) -> int:
    declared = _declared(args)
    if args.out is None:
        if args.check:
            raise ConfigError("--check compares with files: give --out DIR")
        if len(declared) > 1:
            names = ", ".join(c.name for c in declared)
            raise ConfigError(f"{len(declared)} contracts ({names}): give --out DIR or one --tool")
        sys.stdout.write(contract_json(declared[0]))
        return 0
    differs = 0
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
    for compiled in declared:
        path = args.out / f"{compiled.name}.json"
        text = contract_json(compiled)
        if args.check:
            current = path.read_text(encoding="utf-8") if path.is_file() else None
            if current != text:
                differs += 1
                state = "is missing" if current is None else "differs from its declaration"
                print(printable(f"{path} {state}"))
            continue
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
        print(printable(f"wrote {path}"))
    return EXIT_NEEDS_A_LOOK if differs else 0


def ended_run_json(recording: Recording, summary: RunSummary, holds: int | None) -> dict[str, Any]:
    """`resume --json` of a run that already ended: the stored run as `show --json` prints it,
    with the holds its supplier database has now (as a resumed run reports them)."""
    view = RunView.of_stored(recording.header, summary, recording.transitions)
    view.holds = holds
    sent = requests_sent(recording.turns)
    return {**stored_run_json(recording.header, view, sent), "already_ended": True}


def listing_json(listing: RunListing | UnreadableRun) -> dict[str, Any]:
    """One line of `runs --json`."""
    if isinstance(listing, UnreadableRun):
        return {"run_id": listing.run_id, "unreadable": listing.problem}
    header, summary = listing.header, listing.summary
    return {
        "run_id": header.run_id,
        "fixture": header.name,
        "started": header.started_at.isoformat(),
        "terminal": summary.terminal if summary else None,
        "reason": summary.reason if summary else None,
        "attempts": summary.attempts if summary else None,
        "unreadable": None,
    }
