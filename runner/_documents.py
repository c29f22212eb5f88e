"""Reading input documents defensively: bytes that are not UTF-8, nesting that blows the stack.

Fixtures, contracts, policy files and JSONL logs come from people and other programs. Each
loader turns these problems into its own typed error naming the file; this module only finds
them. Parsers (json, yaml) and validators (pydantic, jsonschema) recurse once per level of
nesting, so a document nested a hundred thousand levels deep raises `RecursionError` deep inside
them; a document that gets through is also checked here, without recursion, against a depth no
real input needs and which every later stage (validation, rendering, storage) can take.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

MAX_DEPTH: Final = 100
"""Levels of nested lists and mappings a document may have. Real inputs need under 10; stored
inside a run header a document must stay well within the 255 levels that orjson writes and
pydantic's JSON parser reads back."""

MAX_VALUES: Final = 1_000_000
"""Values a document may expand to (YAML aliases can make a small file expand exponentially)."""

TOO_DEEP: Final = f"nested too deeply (at most {MAX_DEPTH} levels of lists and mappings)"
TOO_LONG_NUMBER: Final = "a number too long to read (Python reads at most 4300 digits)"
"""json and yaml raise a bare ValueError for an integer literal past `int`'s digit limit."""


class DocumentProblem(ValueError):
    """Why a document cannot be read; the loader adds which file it was."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line
        """The line it was found on, where one is known (0 otherwise)."""
        super().__init__(message)


def read_text(path: Path) -> str:
    """The file as UTF-8 text. Raises `OSError` as `open` does, `DocumentProblem` for bad bytes."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DocumentProblem(
            f"not valid UTF-8 at line {line} (byte {exc.start}: {data[exc.start : exc.end]!r})",
            line,
        ) from exc


def check_shape(document: Any) -> None:
    """Raise `DocumentProblem` when `document` nests deeper than `MAX_DEPTH`, expands to more
    than `MAX_VALUES` values, or contains itself (a recursive YAML alias).

    Iterative, and each container is measured once however often aliases repeat it.
    """
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    open_ids: set[int] = set()
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        node, children_done = stack.pop()
        children = _children(node)
        if children is None:
            continue
        key = id(node)
        if children_done:
            open_ids.discard(key)
            inner = [c for c in children if _children(c) is not None]
            depth[key] = 1 + max((depth[id(c)] for c in inner), default=0)
            size[key] = 1 + len(children) - len(inner) + sum(size[id(c)] for c in inner)
            if depth[key] > MAX_DEPTH:
                raise DocumentProblem(TOO_DEEP)
            if size[key] > MAX_VALUES:
                raise DocumentProblem(f"expands to more than {MAX_VALUES} values")
            continue
        if key in depth:
            continue
        if key in open_ids:
            raise DocumentProblem("contains itself (a recursive alias)")
        if len(open_ids) >= MAX_DEPTH:
            raise DocumentProblem(TOO_DEEP)
        open_ids.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children)


def _children(node: Any) -> list[Any] | None:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if isinstance(node, list | tuple):
        return list(node)
    return None
