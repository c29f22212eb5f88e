"""Stored rows as values and back, shared by the SQLite and PostgreSQL stores: canonical JSON that
reads back, a row decoded or `StoreCorrupt` naming it, a run's listing, an operation's row."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import TypeAdapter

from .._jsonsafe import clean_text, safe_str
from ..errors import StoreCorrupt, StoreError
from ..operations import Operation, OperationStatus
from ..trace import HEADER_ADAPTER, SUMMARY_ADAPTER
from .base import RunListing, UnreadableRun

T = TypeVar("T")


def _json(value: Any) -> str:
    """Canonical JSON that reads back: lone surrogates (no UTF-8 text holds them) become U+FFFD,
    and NaN or infinity (no JSON reader need accept them) is refused with `StoreError`."""
    try:  # the common case in C: orjson, whose text is kept when it reads back as `value`
        fast = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if orjson.loads(fast) == value:  # NaN or infinity came out null, a tuple a list...
            return fast.decode()
    except (TypeError, ValueError, RecursionError):  # surrogates, big integers, other keys
        pass
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"not stored: the value is not JSON ({safe_str(exc)})") from exc
    return clean_text(text)


def _fast_json(value: Any, adapter: Any) -> str:
    """A dataclass as JSON: orjson on the hot path, pydantic for what orjson refuses."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, an integer past 64 bits...
        return _json(adapter.dump_python(value, mode="json"))


_ROW_MAKERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _row_maker(kind: type) -> Callable[[Any], dict[str, Any]]:
    """A function from a `kind` instance to the dict of its fields, without those that are None
    where None is the default. Generated once per dataclass as straight-line code (as
    `dataclasses` makes `__init__`): a loop over the fields, or orjson's own walk of a slots
    dataclass, cost about twice as much per row."""
    lines = ["def row(value):", "    kept = {}"]
    for field in dataclasses.fields(kind):
        if field.default is None:
            lines += [
                f"    item = value.{field.name}",
                f"    if item is not None: kept[{field.name!r}] = item",
            ]
        else:
            lines.append(f"    kept[{field.name!r}] = value.{field.name}")
    lines.append("    return kept")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    maker: Callable[[Any], dict[str, Any]] = namespace["row"]
    _ROW_MAKERS[kind] = maker
    return maker


def _row_json(value: Any, adapter: Any) -> str:
    """A dataclass as a row's JSON, leaving out the fields that are None by default (about a
    third of a transition's text: most of its 25 fields are None on any one move); reading
    the row back gives them their default. What orjson refuses goes as `_fast_json` does."""
    maker = _ROW_MAKERS.get(type(value)) or _row_maker(type(value))
    try:
        return orjson.dumps(maker(value)).decode()
    except TypeError:  # as `_fast_json`: the whole value by pydantic
        return _json(adapter.dump_python(value, mode="json"))


def _read_json(adapter: TypeAdapter[T], text: Any, path: Path | str, row: str) -> T:
    """One stored row decoded, or `StoreCorrupt` naming the row (never a bare parse error)."""
    try:
        return adapter.validate_json(text)
    except (ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
        first = safe_str(exc).splitlines()
        problem = first[-1].strip() if first else type(exc).__name__
        raise StoreCorrupt(f"{path}: {row} cannot be read back ({problem})") from exc


def listing(
    run_id: Any, header: Any, summary: Any, where: Path | str
) -> RunListing | UnreadableRun:
    """One `runs` row: the run's listing, or (unreadable) the run named in its place."""
    try:
        return RunListing(
            header=_read_json(HEADER_ADAPTER, header, where, f"run {run_id} header"),
            summary=(
                _read_json(SUMMARY_ADAPTER, summary, where, f"run {run_id} summary")
                if summary
                else None
            ),
        )
    except StoreCorrupt as exc:
        return UnreadableRun(run_id=str(run_id), problem=str(exc))


def operation_of(row: tuple[Any, ...], moment: Callable[[Any], datetime]) -> Operation:
    """An `operations` row (`OPERATION_COLUMNS`) as an `Operation`; `moment` reads a timestamp."""
    key, tenant, tool, run_id, params_hash, status, created_at, expires_at, result, dispatch = row
    return Operation(
        key=key,
        tenant=tenant,
        tool=tool,
        run_id=run_id,
        params_hash=params_hash,
        status=OperationStatus(status),
        created_at=moment(created_at),
        expires_at=moment(expires_at),
        result=json.loads(result) if result else None,
        dispatch=dispatch,
    )


OPERATION_COLUMNS = (
    "key, tenant, tool, run_id, params_hash, status, created_at, expires_at, result, dispatch"
)
