"""`runner fixtures check`: the harness's script checks (`runner.harness.checks`) over fixture
files, one line a finding, then a tally and the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

from ..base.errors import FixtureError
from ..harness.checks import check_script
from ..harness.fixtures import collect_fixture_paths, expand_fixture_paths, load_fixture
from ..proof.report import printable
from ..tools.contracts import ContractSet
from ._arguments import EXIT_BAD_INPUT

EXIT_NEEDS_A_LOOK = 1


def check_command(paths: list[Path], contracts: ContractSet) -> int:
    """`runner fixtures check PATH...`: every finding, one line each, then a tally. Exit 0 when
    all is well, 1 on a warning, 2 when a fixture cannot be read or a path is not there (named;
    the others are still checked)."""
    warnings = notes = 0
    files, missing = expand_fixture_paths(paths)
    if not files and not missing:
        collect_fixture_paths(paths)  # its error: no fixture files found
    for path in missing:  # named like a file that does not load; the others are still checked
        print(f"error: {printable(FixtureError(path, 'no such file or folder'))}", file=sys.stderr)
    unreadable = len(missing)
    for path in files:
        try:
            fixture = load_fixture(path, contracts)
        except FixtureError as exc:  # named; the other fixtures are still checked
            print(f"error: {printable(exc)}", file=sys.stderr)
            unreadable += 1
            continue
        for finding in check_script(fixture, contracts):
            print(printable(f"{path}: {finding.line()}"))
            notes += finding.anticipated
            warnings += not finding.anticipated
    print(
        f"{len(files) + len(missing)} fixtures checked: {warnings} warnings, {notes} notes "
        f"(scripted on purpose), {unreadable} unreadable"
    )
    if unreadable:
        return EXIT_BAD_INPUT
    return EXIT_NEEDS_A_LOOK if warnings else 0
