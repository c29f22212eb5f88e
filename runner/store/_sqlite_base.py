"""Opening SQLite files safely: WAL, versioned schema with forward migrations, clear errors.

Shared by the run store and the simulated supplier database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from .. import _failpoints
from ..errors import StoreCorrupt, StoreError, StoreLocked

Synchronous = Literal["NORMAL", "FULL"]


def translate(path: Path | str, exc: sqlite3.Error) -> StoreError:
    """One clear, typed error for what SQLite reports."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreLocked(f"{path}: locked by another process ({text})")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return StoreCorrupt(f"{path}: not a readable runner database ({text})")
    return StoreError(f"{path}: {text}")


def open_database(
    path: Path | str,
    *,
    kind: str,
    migrations: Sequence[str],
    synchronous: Synchronous = "NORMAL",
    busy_timeout_s: float = 2.0,
) -> sqlite3.Connection:
    """Open (creating if needed) and migrate a database whose schema is `migrations`.

    `PRAGMA user_version` is the number of migrations applied. A file from a newer runner (a
    higher version) is refused rather than guessed at.
    """
    try:
        conn = sqlite3.connect(
            str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > len(migrations):
            raise StoreCorrupt(
                f"{path}: {kind} schema version {version} is newer than this runner knows "
                f"({len(migrations)}); upgrade runner"
            )
        for number in range(version, len(migrations)):
            with transaction(conn, path):
                for statement in migrations[number].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={number + 1}")
    except sqlite3.Error as exc:
        conn.close()
        raise translate(path, exc) from exc
    except StoreError:
        conn.close()
        raise
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection, path: Path | str) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error: all or nothing."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc
    try:
        yield conn
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise translate(path, exc) from exc
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise translate(path, exc) from exc
    _failpoints.committed()
