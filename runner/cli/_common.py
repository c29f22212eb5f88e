"""What the command line's commands share: the contracts and policy a flag names, the store a
command opens (a SQLite file or a PostgreSQL URL), where a store's simulated worlds live, and
one-line errors."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError, LoadError
from ..core.policy import Policy
from ..core.sim import naive_policy
from ..harness.world import World
from ..store import SqliteStore
from ..store.base import Store
from ..store.urls import hide_password, is_database_url
from ..tools.contracts import ContractSet, load_contracts
from ..travel import (
    SEMANTIC_RULES,
    TRAVEL,
    contracts_dir,
    load_travel_contracts,
)

WORLD: World = TRAVEL
"""The world the command line plays fixtures in (the harness knows none): the travel demo."""

EXIT_EXPECTATION_FAILED = 1
DEFAULT_DB = "runs.sqlite"
WORLD_ENV = "RUNNER_WORLD"
"""Where runs on a PostgreSQL store keep their simulated worlds (default `./runner-world`): a
folder every worker of that store can reach."""


@dataclass(frozen=True, slots=True)
class Database:
    """What `--db` (or `RUNNER_DB`) names: a SQLite file or a PostgreSQL URL. Printed, it is the
    path, or the URL with its password hidden: the password never reaches a message or a log."""

    path: Path | None = None
    url: str | None = None

    def __str__(self) -> str:
        return hide_password(self.url) if self.url is not None else str(self.path)

    @property
    def folder(self) -> Path:
        """The folder that anchors a run's recorded world paths."""
        return self.path.resolve().parent if self.path is not None else world_dir(self)


def database(value: str) -> Database:
    """`--db`'s type: a PostgreSQL URL or a SQLite path."""
    return Database(url=value) if is_database_url(value) else Database(path=Path(value))


def default_database() -> str:
    return os.environ.get("RUNNER_DB") or DEFAULT_DB


def contracts_for(directory: Path | None) -> ContractSet:
    if directory is None or directory.resolve() == contracts_dir():
        return load_travel_contracts()
    return load_contracts(directory, SEMANTIC_RULES)


def policy_for(value: str | None) -> Policy | None:
    if value is None:
        return None
    if value == "default":
        return Policy()
    if value == "naive":  # a simulation of the broken runner, to show the checks catch it
        return naive_policy()
    return Policy.load(Path(value))


def open_store(db: Database, *, must_exist: bool, read_only: bool = False) -> Store:
    """The store `db` names; reading commands open a SQLite file read-only (nothing created or
    migrated). A PostgreSQL store is served to these synchronous commands on a loop of its own."""
    if db.url is not None:
        return _open_postgres(db.url)
    path = db.path
    assert path is not None  # a Database is one or the other
    if (must_exist or read_only) and not path.exists():
        raise LoadError(f"store {path} does not exist")
    if str(path) in ("", "."):  # `--db ''` read as the working directory
        raise LoadError("--db names no file: give a SQLite file or a postgresql:// URL")
    # sqlite3 says only `unable to open database file` of these
    if path.is_dir():
        raise LoadError(f"store {path} is a folder: name a SQLite file in it")
    if path.parent.exists() and not path.parent.is_dir():
        raise LoadError(f"store {path}: {path.parent} is a file, not a folder")
    if not path.parent.is_dir():
        raise LoadError(f"store {path}: its folder {path.parent} does not exist")
    return SqliteStore(path, read_only=read_only)


def _open_postgres(url: str) -> Store:
    try:
        from ..store.postgres import PostgresStore  # noqa: PLC0415  # the optional extra
    except ImportError as exc:
        raise ConfigError(
            f"--db {hide_password(url)} needs the PostgreSQL extra: "
            "pip install 'runner-fsm[postgres]'"
        ) from exc
    from ..store.adapters import BlockingStore  # noqa: PLC0415

    return BlockingStore(lambda: PostgresStore.open(url))


def world_dir(db: Database) -> Path:
    """Where runs stored in `db` keep their simulated world: beside a SQLite file, by absolute
    path; for a PostgreSQL store, `$RUNNER_WORLD` (default `./runner-world`)."""
    if db.path is None:
        return Path(os.environ.get(WORLD_ENV) or "runner-world").resolve()
    path = db.path.resolve()
    return path.parent / f"{path.name}.world"


def one_line(message: str) -> str:
    """An error is one line on stderr, whatever line breaks its message carries."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())
