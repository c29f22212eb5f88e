"""Reading a store nobody may write: a read-only file, or a read-only folder.

CI runs as root, and root ignores file modes. To test for real, the commands run in a subprocess
whose capability bounding set lacks CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER
(`setpriv`): a process without them obeys file modes like any user, root included. Each case also
checks that a write through the same files really fails, so a setup that failed to take the
privilege away cannot pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.base.errors import StoreError
from runner.cli import main
from runner.store import SqliteStore
from tests.support.paths import FIXTURES
from tests.support.store_contract import header

pytestmark = pytest.mark.slow

FIXTURE = FIXTURES / "hold_not_committed.yaml"  # a write: the run has a supplier database too

_COMMANDS = """
import contextlib, io, json, sys
from runner.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException as exc:  # reported, not raised: the test names the command
            code = repr(exc)
    results.append([argv[0], code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def _stored_run(folder: Path) -> tuple[Path, str, str]:
    db = folder / "runs.sqlite"
    assert main(["run", str(FIXTURE), "--db", str(db), "--json"]) == 0
    store = SqliteStore(db, read_only=True)
    run_id = store.runs()[0].header.run_id
    call_id = next(o.call_id for o in store.outputs(run_id))
    store.close()
    return db, run_id, call_id


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file's digest; a reader's empty -wal or its -shm (shared memory, not data) aside."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and not path.name.endswith("-shm")
        and not (path.name.endswith("-wal") and path.stat().st_size == 0)
    }


def test_a_read_only_opening_creates_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id, _ = _stored_run(tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    store = SqliteStore(db, read_only=True)
    assert [listing.header.run_id for listing in store.runs()] == [run_id]
    assert store.transitions(run_id)
    with pytest.raises(StoreError, match="read-only"):
        store.begin_run(header())
    store.close()
    assert _snapshot(tmp_path) == before


def test_a_read_only_opening_never_creates_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such runner store"):
        SqliteStore(tmp_path / "missing.sqlite", read_only=True)
    assert list(tmp_path.iterdir()) == []


def _without_write_privilege() -> list[str]:
    """The command prefix that takes away root's power to ignore file modes (none for a user)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover - util-linux is in the CI image
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]


@pytest.fixture
def read_only_paths() -> Iterator[list[Path]]:
    """Paths made read-only by a test, given back their modes afterwards (so tmp can be cleaned)."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_reading_commands_work_on_a_read_only_store(
    what: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    read_only_paths: list[Path],
) -> None:
    db, run_id, call_id = _stored_run(tmp_path)
    capsys.readouterr()
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    folders = [tmp_path, *(path for path in tmp_path.rglob("*") if path.is_dir())]
    for path in files + (folders if what == "folder" else []):
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        read_only_paths.append(path)
    before = _snapshot(tmp_path)
    store = ["--db", str(db)]
    commands = [
        ["runs", *store],
        ["show", run_id, *store],
        ["show", run_id, "--json", *store],
        ["replay", run_id, *store],
        ["grade", "--stored", *store],
        ["artifact", run_id, call_id, *store],
        ["run", str(FIXTURE), *store],  # a write: it must fail, or the setup proves nothing
    ]
    done = subprocess.run(
        [*_without_write_privilege(), sys.executable, "-c", _COMMANDS, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    reads, write = results[:-1], results[-1]
    for command, code, out, err in reads:
        assert (command, code, err) == (command, 0, ""), out
    assert "identical" in reads[3][2]
    assert "holds_as_declared" not in reads[4][2]  # the supplier database was read too
    assert "pass^k" in reads[4][2] or "PASS" in reads[4][2]
    command, code, _, err = write
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "read-only" in err, err
    assert _snapshot(tmp_path) == before, err


_LEAVE_WAL = """
import os, sys
from runner.cli import main
from runner.store import SqliteStore
db, first, second = sys.argv[1:]
assert main(["run", first, "--db", db]) == 0
holder = SqliteStore(db)  # stays open, so the last writer's close does not checkpoint
holder._conn.execute("PRAGMA wal_autocheckpoint=0")
assert main(["run", second, "--db", db]) == 0
os._exit(0)  # killed, in effect: the second run lives only in the write-ahead log
"""


def test_a_read_only_folder_with_a_live_write_ahead_log(
    tmp_path: Path, read_only_paths: list[Path]
) -> None:
    """With its -shm file the log is read (the last run is listed); without it the store is
    refused by name, never read stale through `immutable`."""
    db = tmp_path / "runs.sqlite"
    second = FIXTURES / "access_denied.yaml"
    made = subprocess.run(
        [sys.executable, "-c", _LEAVE_WAL, str(db), str(FIXTURE), str(second)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    wal = tmp_path / "runs.sqlite-wal"
    assert wal.stat().st_size > 0
    tmp_path.chmod(0o555)
    read_only_paths.append(tmp_path)
    runs = [*_without_write_privilege(), sys.executable, "-m", "runner", "runs", "--db", str(db)]
    listed = subprocess.run(runs, capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    assert "hold_not_committed" in listed.stdout and "access_denied" in listed.stdout
    tmp_path.chmod(0o755)
    (tmp_path / "runs.sqlite-shm").unlink()
    tmp_path.chmod(0o555)
    refused = subprocess.run(runs, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: {db}: its write-ahead log runs.sqlite-wal holds writes that cannot be read in a "
        "read-only folder; open the store once where it can be written\n"
    )
