"""What the command line's commands share: the contracts and policy a flag names, the store file
a command opens, where a store's simulated worlds live, and one-line errors."""

from __future__ import annotations

from pathlib import Path

from ..contracts import ContractSet, load_contracts
from ..errors import LoadError
from ..policy import Policy
from ..sim import naive_policy
from ..store import SqliteStore
from ..travel import (
    SEMANTIC_RULES,
    contracts_dir,
    load_travel_contracts,
)

EXIT_EXPECTATION_FAILED = 1
DEFAULT_DB = Path("runs.sqlite")


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


def open_store(path: Path, *, must_exist: bool, read_only: bool = False) -> SqliteStore:
    """The store at `path`; reading commands open it read-only (nothing created or migrated)."""
    if (must_exist or read_only) and not path.exists():
        raise LoadError(f"store {path} does not exist")
    return SqliteStore(path, read_only=read_only)


def world_dir(db: Path) -> Path:
    """Where runs stored in `db` keep their simulated world: beside it, by absolute path."""
    db = db.resolve()
    return db.parent / f"{db.name}.world"


def one_line(message: str) -> str:
    """An error is one line on stderr, whatever line breaks its message carries."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())
