"""Bad input and bad days at the command line: one `error: ...` line, exit 2, no traceback.

Every flag's out-of-range values, documents that are not UTF-8 or nest without end, a locked
store and a store whose disk fills up mid-run.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from runner.cli import main
from tests.support.paths import FIXTURES, ROOT

SERVICE = str(ROOT / "examples" / "service.yaml")

FIXTURE = str(FIXTURES / "rate_limited.yaml")


def _fails(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI in-process; it must exit 2 with exactly one `error:` line and nothing else."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse exits instead of returning
        code = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.startswith("error: "), captured.err
    assert captured.err.count("\n") == 1 and captured.err.endswith("\n"), captured.err
    assert "Traceback" not in captured.err + captured.out
    return captured.err


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A store holding one finished run: (db, run_id)."""
    db = str(tmp_path_factory.mktemp("stored") / "runs.sqlite")
    assert main(["run", FIXTURE, "--db", db, "--json"]) == 0
    conn = sqlite3.connect(db)
    (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    conn.close()
    return db, run_id


REPLAY_BOUNDS = [
    ("--max-attempts", "-1"),
    ("--max-attempts", "0"),
    ("--max-attempts", "2.5"),
    ("--max-model-steps", "0"),
    ("--max-tokens", "-5"),
    ("--max-seconds", "nan"),
    ("--max-seconds", "inf"),
    ("--max-seconds", "-inf"),
    ("--max-seconds", "0"),
    ("--max-seconds", "-1"),
    ("--max-seconds", "1e400"),
    ("--max-seconds", "1e12"),
    ("--max-seconds", "soon"),
]


@pytest.mark.parametrize(("flag", "value"), REPLAY_BOUNDS)
def test_an_out_of_range_replay_bound_is_one_line(
    flag: str, value: str, stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    err = _fails(["replay", run_id, "--db", db, f"{flag}={value}"], capsys)
    assert flag in err and value in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", FIXTURE, "--repeat", "0"],
        ["run", FIXTURE, "--repeat", "-1"],
        ["run", FIXTURE, "--repeat", "many"],
        ["run", FIXTURE, "--seed", "-1"],  # random.Random(-1) is random.Random(1)
        ["run", FIXTURE, "--seed", "0.5"],
        ["run", FIXTURE, "--base-url", "http://127.0.0.1:1/v1"],  # without --model: ignored
        ["run", FIXTURE, "--fallback-model", "other"],
        ["run", FIXTURE, "--model", "nonsense"],
        ["grade", FIXTURE, "--trials", "0"],
        ["grade", FIXTURE, "--trials", "-3"],
        ["run"],
        ["frobnicate"],
        ["run", FIXTURE, "--no-such-flag"],
        ["serve", "--config", SERVICE, "--port", "99999"],  # was bind()'s OverflowError
        ["serve", "--config", SERVICE, "--port", "-1"],
    ],
)
def test_a_meaningless_flag_is_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fails([*argv, "--db", str(tmp_path / "runs.sqlite")] if len(argv) > 1 else argv, capsys)
    assert not (tmp_path / "runs.sqlite").exists()  # refused before anything was created


@pytest.mark.parametrize(
    "argv",
    [
        ["grade", FIXTURE, "--stored"],  # fixture paths and stored runs at once
        ["grade", "--stored", "--policy", "naive"],  # stored runs ran under their own policy
    ],
)
def test_grade_flags_that_cannot_go_together_are_one_line(
    argv: list[str], stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = stored
    assert "--stored" in _fails([*argv, "--db", db], capsys)


def test_replay_run_with_a_stored_run_is_refused(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    assert "--run" in _fails(["replay", run_id, "--db", db, "--run", "other"], capsys)


def test_a_bound_in_range_still_replays(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = stored
    assert main(["replay", run_id, "--db", db, "--max-seconds", "1e9", "--max-attempts", "1"]) == 0
    assert "would have stopped" in capsys.readouterr().out


# -- documents --------------------------------------------------------------------------------

DEEP = 100_000


def _deep_json() -> str:
    return '{"name": ' + "[" * DEEP + "]" * DEEP + "}"


def _deep_json_mapping() -> str:
    return '{"name": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}"


def _deep_yaml() -> str:
    return "name: " + "[" * DEEP + "]" * DEEP + "\n"


def _alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    return "\n".join(lines) + "\n"


BAD_DOCUMENTS = {
    "not_utf8": (b"name: caf\xe9\ndescription: x\n", "not valid UTF-8 at line 1"),
    "deep_list": (_deep_json().encode(), "nested too deeply"),
    "deep_mapping": (_deep_json_mapping().encode(), "nested too deeply"),
    "deep_yaml": (_deep_yaml().encode(), "nested too deeply"),
    "deep_but_parseable": (("name: " + "[" * 150 + "]" * 150 + "\n").encode(), "nested too deeply"),
    "recursive_alias": (b"name: &loop [*loop]\n", "contains itself"),
    "alias_bomb": (_alias_bomb().encode(), "expands to more than"),
    # Past Python's 4,300-digit limit for int(): a ValueError that json and yaml let through.
    "huge_number": (('{"name": ' + "9" * 5000 + "}\n").encode(), "a number too long to read"),
}


def _is_yaml_only(problem: str) -> bool:
    return problem in {"deep_yaml", "recursive_alias", "alias_bomb", "deep_but_parseable"}


@pytest.mark.parametrize("problem", sorted(BAD_DOCUMENTS))
def test_a_bad_fixture_file_is_one_line(
    problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, expected = BAD_DOCUMENTS[problem]
    path = tmp_path / (
        "bad.yaml" if _is_yaml_only(problem) or problem == "not_utf8" else "bad.json"
    )
    path.write_bytes(body)
    err = _fails(["run", str(path), "--db", str(tmp_path / "runs.sqlite")], capsys)
    assert str(path) in err and expected in err, err


@pytest.mark.parametrize("problem", sorted(BAD_DOCUMENTS))
def test_a_bad_policy_file_is_one_line(
    problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, expected = BAD_DOCUMENTS[problem]
    path = tmp_path / "policy.yaml"
    path.write_bytes(body)
    argv = ["run", FIXTURE, "--policy", str(path), "--db", str(tmp_path / "runs.sqlite")]
    err = _fails(argv, capsys)
    assert str(path) in err and expected in err, err


@pytest.mark.parametrize(("body", "kind"), [("[]", "list"), ("false", "bool"), ("0", "int"),
                                            ('""', "str"), ("42", "int")])  # fmt: skip
def test_a_policy_file_that_is_not_a_mapping_is_one_line(
    body: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[]`, `false`, `0` and `""` were read as the default policy, silently; `42` was refused
    as `policy p.yaml: : Input should be a valid dictionary` (an empty field name)."""
    path = tmp_path / "policy.yaml"
    path.write_text(body + "\n")
    argv = ["run", FIXTURE, "--policy", str(path), "--db", str(tmp_path / "runs.sqlite")]
    err = _fails(argv, capsys)
    assert err == f"error: policy {path}: must be a mapping of policy fields, not {kind}\n"


@pytest.mark.parametrize(
    "problem",
    [p for p in sorted(BAD_DOCUMENTS) if not _is_yaml_only(p) or p == "deep_but_parseable"],
)
def test_a_bad_contract_file_is_one_line(
    problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, expected = BAD_DOCUMENTS[problem]
    folder = tmp_path / "contracts"
    shutil.copytree(ROOT / "contracts", folder)
    if problem == "deep_but_parseable":
        body = ('{"name": ' + "[" * 150 + "]" * 150 + "}").encode()
    (folder / "search_flights.json").write_bytes(body)
    err = _fails(["--contracts", str(folder), "contracts", "check"], capsys)
    assert "search_flights.json" in err and expected in err, err


@pytest.mark.parametrize("problem", ["not_utf8", "deep_list", "deep_mapping", "huge_number"])
def test_a_bad_log_is_one_line_naming_the_line(
    problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    assert main(["run", FIXTURE, "--db", str(tmp_path / "r.sqlite"), "--log", str(good)]) == 0
    capsys.readouterr()
    lines = good.read_bytes().splitlines(keepends=True)
    body = BAD_DOCUMENTS[problem][0].replace(b"\n", b" ")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines[:2]) + body + b"\n" + b"".join(lines[2:]))
    err = _fails(["replay", str(bad)], capsys)
    assert f"log {bad}, line 3: " in err, err
    assert BAD_DOCUMENTS[problem][1].removesuffix(" at line 1") in err


# -- bad days ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_locked_store_is_one_line_and_reading_goes_on(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer blocked past the busy timeout (2 s) gets StoreLocked; readers are not blocked."""
    db, run_id = stored
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        err = _fails(["run", FIXTURE, "--db", db], capsys)
        assert f"{db}: locked by another process" in err
        assert main(["runs", "--db", db]) == 0
        assert run_id in capsys.readouterr().out
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def _limit_file_size(limit: int) -> None:
    """In the child: files may not grow past `limit` bytes (write fails with EFBIG, not SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _runner(
    argv: list[str], cwd: Path, limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=None if limit is None else (lambda: _limit_file_size(limit)),
    )


@pytest.mark.slow
def test_a_write_error_mid_run_is_one_line_and_the_run_resumes(tmp_path: Path) -> None:
    """The operating system refuses to let any file grow past a limit, as a full disk would: the
    run stops with one line naming the store, and `runner resume` finishes it afterwards.

    Where in the run the limit bites depends on page layout, so several limits are tried; at
    least one must stop the run after it began (the others stop it before, or not at all).
    """
    resumed_runs = 0
    for limit_kib in (24, 32, 40, 48):
        folder = tmp_path / str(limit_kib)
        folder.mkdir()
        db = folder / "runs.sqlite"
        made = _runner(["run", str(FIXTURES / "access_denied.yaml"), "--db", str(db)], folder)
        assert made.returncode == 0, made.stderr  # the store exists; the limit is on what follows
        stopped = _runner(["run", FIXTURE, "--db", str(db)], folder, limit=limit_kib * 1024)
        if stopped.returncode == 0:
            continue  # it fit
        assert stopped.returncode == 2, stopped.stdout + stopped.stderr
        first_line = re.sub(r"^error: run \S+ could not be begun: ", "error: ", stopped.stderr)
        assert first_line.startswith(f"error: {db}: "), stopped.stderr
        assert "I/O error" in stopped.stderr, stopped.stderr
        assert stopped.stderr.count("\n") == 1 and "Traceback" not in stopped.stderr
        listed = _runner(["runs", "--db", str(db)], folder)
        assert listed.returncode == 0, listed.stderr
        unfinished = [line.split()[0] for line in listed.stdout.splitlines() if "(running)" in line]
        if not unfinished:
            continue  # stopped before the run began: nothing to resume
        resumed = _runner(["resume", unfinished[0], "--db", str(db), "--json"], folder)
        assert resumed.returncode == 0, resumed.stderr
        report = json.loads(resumed.stdout)
        assert report["terminal"] == "complete" and report["expect"]["passed"]
        resumed_runs += 1
    assert resumed_runs >= 1


def test_a_full_disk_under_the_jsonl_log_is_one_line_and_the_run_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/full answers every write with ENOSPC; the log's buffered line must not then crash
    the close with a traceback of its own."""
    db = str(tmp_path / "runs.sqlite")
    err = _fails(["run", FIXTURE, "--db", db, "--log", "/dev/full"], capsys)
    assert err.startswith("error: cannot write log /dev/full: No space left on device; ")
    assert main(["runs", "--db", db]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "(running)" in line]
    assert main(["resume", line.split()[0], "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["expect"]["passed"]


def test_reading_an_empty_file_as_a_store_is_one_line_and_leaves_it_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "runs.sqlite"
    empty.touch()
    assert "not a runner store" in _fails(["runs", "--db", str(empty)], capsys)
    assert empty.read_bytes() == b""  # not migrated into a store by a reading command


@pytest.mark.parametrize("value", [".inf", ".nan", "-1", "1e12"])
def test_a_fixture_deadline_out_of_range_is_one_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An infinite deadline is no bound at all; one past ~31 years is past the clock's dates."""
    text = Path(FIXTURE).read_text()
    assert "max_seconds: 30" in text
    path = tmp_path / "endless.yaml"
    path.write_text(text.replace("max_seconds: 30", f"max_seconds: {value}"))
    err = _fails(["run", str(path), "--db", str(tmp_path / "runs.sqlite")], capsys)
    assert f"fixture {path}: budget.max_seconds" in err


@pytest.mark.parametrize(
    ("fixture", "start"),
    [
        ("rate_limited.yaml", "9999-12-31T23:59:58Z"),
        ("hold_timeout_after_commit.yaml", "9999-12-31T12:00:00Z"),
    ],
)
def test_a_fixture_clock_too_close_to_the_last_date_is_one_line_and_stores_nothing(
    fixture: str, start: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It ran, overflowed mid-run (a stamp, or a write's key expiring a day on) with a
    traceback, and left the run `running` for good: no resume, replay or grade could read it."""
    kept = [
        line
        for line in (FIXTURES / fixture).read_text().splitlines()
        if not line.startswith("clock:")
    ]
    path = tmp_path / "late.yaml"
    path.write_text("\n".join([*kept, f'clock: {{start: "{start}"}}', ""]))
    db = tmp_path / "runs.sqlite"
    err = _fails(["run", str(path), "--db", str(db)], capsys)
    assert f"fixture {path}: clock.start: " in err and "9000-01-01" in err
    assert not db.exists()


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("max_attempts: 8", "max_attempts: 100000000000000000000000000", "/budget/max_attempts"),
        ("waits_s: []", "waits_s: [.nan]", "/expect/waits_s/0"),
        # free-form: a JSON dump writes it null, so the run saw NaN and its resume null
        (
            "price_usd: 1180",
            "price_usd: .nan",
            "/environment/search_flights/0/respond/options/0/price_usd",
        ),
    ],
)  # fmt: skip
def test_a_fixture_value_that_is_not_plain_json_is_refused_by_file_before_any_run(
    old: str, new: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It passed `fixtures check`, and `runner run good.yaml bad.yaml` ran and stored good.yaml
    before failing with a line naming neither the file nor the field (the run's header keeps
    the fixture as JSON, and that check came only when the run began)."""
    good = FIXTURES / "read_only_success.yaml"
    assert old in good.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace(old, new))
    db = tmp_path / "runs.sqlite"
    err = _fails(["run", str(good), str(bad), "--db", str(db)], capsys)
    assert err.startswith(f"error: fixture {bad}: not plain JSON at {where}: "), err
    assert not db.exists()
    assert main(["fixtures", "check", str(bad)]) == 2
    assert f"fixture {bad}: not plain JSON at {where}" in capsys.readouterr().err


@pytest.mark.parametrize("log", ["runs.sqlite", "./runs.sqlite-wal", "runs.sqlite-shm"])
def test_a_log_naming_the_store_itself_is_one_line(
    log: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--log runs.sqlite --db runs.sqlite` ran, exit 0, and kept no log: SQLite's checkpoint
    overwrote every appended line, and `replay runs.sqlite` then read no log either."""
    monkeypatch.chdir(tmp_path)
    err = _fails(["run", FIXTURE, "--db", "runs.sqlite", "--log", log], capsys)
    assert err == f"error: --log {Path(log)} is the store itself (--db): name another file\n"
    assert list(tmp_path.iterdir()) == []


def test_a_log_that_is_a_link_to_the_store_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hard link has another name: the lines went into the database file."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", FIXTURE, "--db", "runs.sqlite"]) == 0
    Path("linked.jsonl").hardlink_to("runs.sqlite")
    capsys.readouterr()
    err = _fails(["run", FIXTURE, "--db", "runs.sqlite", "--log", "linked.jsonl"], capsys)
    assert "is the store itself" in err


def test_a_store_in_a_missing_folder_or_none_at_all_is_one_line_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both were sqlite3's `unable to open database file` (`--db ''` as the folder `.`)."""
    missing = tmp_path / "nope" / "runs.sqlite"
    err = _fails(["run", FIXTURE, "--db", str(missing)], capsys)
    assert err == f"error: store {missing}: its folder {missing.parent} does not exist\n"
    err = _fails(["run", FIXTURE, "--db", ""], capsys)
    assert err == "error: --db names no file: give a SQLite file or a postgresql:// URL\n"
    err = _fails(["run", FIXTURE, "--db", str(tmp_path)], capsys)
    assert err == f"error: store {tmp_path} is a folder: name a SQLite file in it\n"
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    err = _fails(["run", FIXTURE, "--db", str(a_file / "runs.sqlite")], capsys)
    assert err == f"error: store {a_file / 'runs.sqlite'}: {a_file} is a file, not a folder\n"


def test_serve_on_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """It was uvicorn's `ERROR: [Errno 98] ...` and exit 3."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--config", SERVICE, "--port", str(port)]) == 2
    err = capsys.readouterr().err  # before the app is built: nothing else said, nothing run
    assert err.startswith(f"error: cannot listen on 127.0.0.1:{port}: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "RUN"],
        ["resume", "RUN"],
        ["artifact", "RUN", "call_1_0"],
        ["approve", "RUN", "--approver", "a"],
        ["deny", "RUN", "--approver", "a"],
        ["continue", "RUN"],
        ["replay", "RUN"],
    ],
)
def test_a_run_id_that_is_not_utf8_is_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shell passes any bytes; Python keeps the ones that are not UTF-8 as lone surrogates,
    which no store can look up (`UnicodeEncodeError` from sqlite3 and psycopg before)."""
    db = tmp_path / "runs.sqlite"
    assert main(["run", FIXTURE, "--db", str(db)]) == 0
    capsys.readouterr()
    not_utf8 = b"\xff\xfe".decode("utf-8", "surrogateescape")
    line = _fails([not_utf8 if a == "RUN" else a for a in argv] + ["--db", str(db)], capsys)
    assert "UTF-8" in line, line
