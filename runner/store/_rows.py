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
from pydantic import TypeAdapter, ValidationError

from ..base._jsonsafe import clean_text, safe_str
from ..base.errors import StoreCorrupt, StoreError
from ..core.states import OperationStatus
from ..record.operations import Operation
from ..record.trace import (
    HEADER_ADAPTER,
    SUMMARY_ADAPTER,
    LastMove,
    TransitionRecord,
    summary_unbacked,
)
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
_NESTED_MAKERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _maker(kind: type, *, as_row: bool) -> Callable[[Any], dict[str, Any]]:
    """A function from a `kind` instance to the dict of its fields, generated once per dataclass
    as straight-line code (as `dataclasses` makes `__init__`): a loop over the fields, or
    orjson's own walk of a slots dataclass, cost two to four times as much.

    `as_row`: a row's top level, which leaves out the fields that are None where None is the
    default. Otherwise the dict orjson itself writes for a dataclass: every field in order,
    None too, none whose name starts with an underscore."""
    lines = ["def row(value):", "    kept = {}"]
    for field in dataclasses.fields(kind):
        if as_row and field.default is None:
            lines += [
                f"    item = value.{field.name}",
                f"    if item is not None: kept[{field.name!r}] = item",
            ]
        elif as_row or not field.name.startswith("_"):
            lines.append(f"    kept[{field.name!r}] = value.{field.name}")
    lines.append("    return kept")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # field names only, from the dataclass
    maker: Callable[[Any], dict[str, Any]] = namespace["row"]
    (_ROW_MAKERS if as_row else _NESTED_MAKERS)[kind] = maker
    return maker


def _nested(value: Any) -> dict[str, Any]:
    """orjson's `default` for a dataclass inside a row (an observation, a tool call, an outcome):
    the dict orjson would write for it (`_maker`). Anything else is refused as orjson refuses
    it, with a TypeError."""
    kind = type(value)
    maker = _NESTED_MAKERS.get(kind)
    if maker is None:
        if not dataclasses.is_dataclass(kind) or isinstance(value, type):
            raise TypeError(f"Type is not JSON serializable: {kind.__name__}")
        maker = _maker(kind, as_row=False)
    return maker(value)


def _row_json(value: Any, adapter: Any) -> str:
    """A dataclass as a row's JSON, leaving out the fields that are None by default (about a
    third of a transition's text: most of its 25 fields are None on any one move); reading
    the row back gives them their default. The dataclasses inside it are written as orjson
    writes them (`_nested`). What orjson refuses goes as `_fast_json` does."""
    maker = _ROW_MAKERS.get(type(value)) or _maker(type(value), as_row=True)
    try:
        return orjson.dumps(
            maker(value), default=_nested, option=orjson.OPT_PASSTHROUGH_DATACLASS
        ).decode()
    except TypeError:  # as `_fast_json`: the whole value by pydantic
        return _json(adapter.dump_python(value, mode="json"))


def _read_json(adapter: TypeAdapter[T], text: Any, path: Path | str, row: str) -> T:
    """One stored row decoded, or `StoreCorrupt` naming the row (never a bare parse error)."""
    try:
        return adapter.validate_json(text)
    except ValidationError as exc:  # its first problem, where it is (not pydantic's help URL)
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = f"{where}: {first['msg']}" if where else first["msg"]
        raise StoreCorrupt(f"{path}: {row} cannot be read back ({safe_str(problem)})") from exc
    except (ValueError, RecursionError) as exc:
        problem = safe_str(exc) or type(exc).__name__
        raise StoreCorrupt(f"{path}: {row} cannot be read back ({problem})") from exc


def in_order(
    records: list[TransitionRecord], path: Path | str, run_id: str, after: int = 0
) -> list[TransitionRecord]:
    """A run's transitions as read (those after seq `after`), or `StoreCorrupt` where one is
    missing or out of place: a row deleted or edited outside the runner. A log with a gap
    neither replays nor proves anything, so no reader shows it as if it were whole."""
    for expected, record in enumerate(records, after + 1):
        if record.seq != expected:
            raise StoreCorrupt(
                f"{path}: run {run_id} transition seq {record.seq} where {expected} belongs "
                "(a gap or an edit)"
            )
    return records


def listing(
    run_id: Any, header: Any, summary: Any, where: Path | str, last: Any = None
) -> RunListing | UnreadableRun:
    """One `runs` row: the run's listing, or (unreadable) the run named in its place. `last`:
    the run's last transition as stored, read for an ended run: a summary it does not back
    (edited, or its terminal row removed) is not listed as the run's outcome."""
    try:
        read = (
            _read_json(SUMMARY_ADAPTER, summary, where, f"run {run_id} summary")
            if summary
            else None
        )
        if read is not None:
            unbacked = summary_unbacked(str(run_id), read, _last_move(run_id, last, where))
            if unbacked is not None:
                raise StoreCorrupt(f"{where}: {unbacked}")
        return RunListing(
            header=_read_json(HEADER_ADAPTER, header, where, f"run {run_id} header"),
            summary=read,
        )
    except StoreCorrupt as exc:
        return UnreadableRun(run_id=str(run_id), problem=str(exc))


def _last_move(run_id: Any, last: Any, where: Path | str) -> LastMove | None:
    """Seq, state, reason and attempts of a stored transition (None: there is none), read with
    orjson alone: a listing reads one for every ended run."""
    if last is None:
        return None
    try:
        data = orjson.loads(last)
        seq, state, reason = data["seq"], data["to_state"], data.get("reason")
        attempt = data.get("attempt", 0)
        if (
            isinstance(seq, int)
            and isinstance(state, str)
            and isinstance(reason, str | None)
            and type(attempt) is int
        ):
            return seq, state, reason, attempt
    except (orjson.JSONDecodeError, TypeError, KeyError):
        pass
    raise StoreCorrupt(f"{where}: run {run_id} last transition cannot be read back")


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
