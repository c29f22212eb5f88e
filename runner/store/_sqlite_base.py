"""Opening SQLite files safely: WAL, versioned schema with forward migrations, clear errors.

Shared by the run store and the simulated supplier database.

- Migrating happens inside one `BEGIN IMMEDIATE` transaction that reads the schema version only
  once it holds the write lock, so processes opening a brand-new file at once migrate it once.
- A read-only opening (`mode=ro`) never creates, migrates or writes anything. In a folder where
  SQLite cannot create the `-wal`/`-shm` files beside the database it falls back to `immutable=1`,
  which is only sound because nobody can write there either; a write-ahead log left in such a
  folder would be ignored by `immutable`, so that case is refused instead of read stale.
- Every transaction is all or nothing, including when SQLite rolled it back itself (disk full,
  I/O error): the rollback is issued only while a transaction is still open.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

from ..base import _failpoints
from ..base.errors import StoreCorrupt, StoreError, StoreLocked

Synchronous = Literal["NORMAL", "FULL"]

# Primary result codes (sqlite3 exposes them only from Python 3.11; the numbers are stable).
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14


def _code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", -1)) & 0xFF


def translate(path: Path | str, exc: sqlite3.Error) -> StoreError:
    """One clear, typed error for what SQLite reports."""
    text = str(exc)
    code = _code(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreLocked(f"{path}: locked by another process ({text})")
    if code == _SQLITE_FULL:
        return StoreError(f"{path}: disk or database full, the write was not kept ({text})")
    if code == _SQLITE_IOERR:
        return StoreError(f"{path}: I/O error, the write was not kept ({text})")
    if code == _SQLITE_READONLY:
        return StoreError(f"{path}: cannot write, the file or its folder is read-only ({text})")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return StoreCorrupt(f"{path}: not a readable runner database ({text})")
    return StoreError(f"{path}: {text}")


def _text(raw: bytes) -> str | bytes:
    """A TEXT value as str; bytes that are not UTF-8 stay bytes, so the reader of that one row
    refuses it by name (SQLite's own decoding would fail the whole query: every run of `runs`)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


BUSY_TIMEOUT_S: Final = 2.0
"""How long a write waits for another connection's lock before it is `StoreLocked`."""

OPENING_TIMEOUT_S: Final = 15.0
"""How long opening a new file waits for another connection's lock (setting WAL, migrating):
48 processes opening one new file at once on two loaded cores queued past 2 s. An existing file
waits the usual busy timeout, so a store another writer holds is reported as soon as before."""


def open_database(
    path: Path | str,
    *,
    kind: str,
    migrations: Sequence[str],
    synchronous: Synchronous = "NORMAL",
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    read_only: bool = False,
) -> sqlite3.Connection:
    """Open (creating if needed) and migrate a database whose schema is `migrations`.

    `PRAGMA user_version` is the number of migrations applied. A file from a newer runner (a
    higher version) is refused rather than guessed at. With `read_only`, the file must exist at
    the current version and is opened so that nothing can be written.
    """
    if read_only:
        return _open_read_only(Path(path), kind=kind, migrations=migrations, timeout=busy_timeout_s)
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    # A new file waits longer: processes starting at once on it each set it up in turn.
    timeout = max(busy_timeout_s, OPENING_TIMEOUT_S) if new else busy_timeout_s
    try:
        conn = sqlite3.connect(
            str(path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    conn.text_factory = _text
    try:
        _write_ahead(conn, timeout)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        _migrate(conn, path, kind, migrations)
        if new:
            conn.execute(f"PRAGMA busy_timeout={round(busy_timeout_s * 1000)}")  # then as asked
    except sqlite3.Error as exc:
        conn.close()
        raise translate(path, exc) from exc
    except StoreError:
        conn.close()
        raise
    return conn


def _write_ahead(conn: sqlite3.Connection, timeout: float) -> None:
    """`PRAGMA journal_mode=WAL`, tried again for up to `timeout` while the file is locked.

    Switching a new file to WAL takes its exclusive lock from a shared one. Two connections
    doing so at once would wait on each other, so SQLite answers one "locked" at once instead
    of calling its busy handler (which the connection's timeout sets): with many processes
    opening one new file, the timeout alone does not cover it (seen: 1 in 48 under load)."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)  # the other opener finishes its switch (one is enough: WAL persists)
        pause = min(pause * 2, 0.1)


def _version(
    conn: sqlite3.Connection, path: Path | str, kind: str, migrations: Sequence[str]
) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(migrations):
        raise StoreCorrupt(
            f"{path}: {kind} schema version {version} is newer than this runner knows "
            f"({len(migrations)}); upgrade runner"
        )
    return version


def statements(script: str) -> Iterator[str]:
    """`script`'s statements one by one: split at each ';' that ends a complete statement (not
    the ones inside a trigger's BEGIN ... END)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip().strip(";"):
                yield pending
            pending = ""
    if pending.strip().strip(";"):
        yield pending


def _migrate(
    conn: sqlite3.Connection, path: Path | str, kind: str, migrations: Sequence[str]
) -> None:
    """Apply the missing migrations in one write transaction.

    The schema version is read only once the write lock is held: a version read before it could
    be stale by the time it is acted on (another process migrating the same new file). With no
    migration due, the version is written back unchanged: one small real write that proves, before
    anything else happens, that the file can be written at all (a read-only file takes the lock).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn, path, kind, migrations)
        if version == len(migrations):
            conn.execute(f"PRAGMA user_version={version}")
        for number in range(version, len(migrations)):
            for statement in statements(migrations[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={number + 1}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    if version < len(migrations):
        _failpoints.committed()


def _open_read_only(
    path: Path, *, kind: str, migrations: Sequence[str], timeout: float
) -> sqlite3.Connection:
    if not path.is_file():
        raise StoreError(f"{path}: no such {kind} file")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        conn = _connect_checked(uri, path, kind, migrations, timeout)
    except sqlite3.OperationalError as exc:
        if _code(exc) not in {_SQLITE_CANTOPEN, _SQLITE_READONLY}:
            raise translate(path, exc) from exc
        # SQLite could not create the -wal/-shm files: the folder is read-only.
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(
                f"{path}: its write-ahead log {wal.name} holds writes that cannot be read in a "
                "read-only folder; open the store once where it can be written"
            ) from exc
        try:
            conn = _connect_checked(uri + "&immutable=1", path, kind, migrations, timeout)
        except sqlite3.Error as again:
            raise translate(path, again) from again
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    return conn


def _connect_checked(
    uri: str, path: Path, kind: str, migrations: Sequence[str], timeout: float
) -> sqlite3.Connection:
    """A read-only connection whose schema is known to be the current one."""
    conn = sqlite3.connect(
        uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
    )
    conn.text_factory = _text
    try:
        conn.execute("PRAGMA query_only=ON")
        version = _version(conn, path, kind, migrations)
        if version == 0:
            raise StoreError(f"{path}: not a {kind} (no schema; nothing was ever stored in it)")
        if version < len(migrations):
            raise StoreError(
                f"{path}: {kind} schema version {version} is older than this runner's "
                f"({len(migrations)}); open it once for writing to upgrade it"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already (it does on disk full, I/O errors)."""
    if conn.in_transaction:
        # The original error is the one to report; nothing was kept either way.
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


@contextmanager
def transaction(conn: sqlite3.Connection, path: Path | str) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error: all or nothing."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    try:
        yield conn
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        _rollback(conn)
        raise translate(path, exc) from exc
    except BaseException:
        _rollback(conn)
        raise
    _failpoints.committed()
