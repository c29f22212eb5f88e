"""One id per tool call for the whole run, whatever ids the model sent.

A model may send two calls with one id, or reuse an id from an earlier turn. Results are paired
with calls by id (in the transcript, in replay, in grading, in `runner artifact`), so a repeated
id is renamed at `plan`, deterministically: the second use of `c` becomes `c_dup2`, the third
`c_dup3` (skipping any id already taken). The suffix keeps to the letters, digits, `_` and `-`
every provider accepts in a tool-call id. The recording keeps the ids as the model sent them;
replay and grading rename them the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..models.base import ToolCall


def unique_id(call_id: str, taken: set[str]) -> str:
    """`call_id`, or the first `call_id_dupN` (N from 2) not in `taken`; the result is taken."""
    unique, number = call_id, 2
    while unique in taken:
        unique, number = f"{call_id}_dup{number}", number + 1
    taken.add(unique)
    return unique


def unique_calls(calls: Iterable[ToolCall], taken: set[str]) -> tuple[ToolCall, ...]:
    """The calls with every id unique in the run (`taken`: the ids earlier calls have)."""
    renamed = []
    for call in calls:
        unique = unique_id(call.id, taken)
        renamed.append(call if unique == call.id else dataclasses.replace(call, id=unique))
    return tuple(renamed)
