"""Reading input documents defensively: bytes that are not UTF-8, nesting that blows the stack.

Fixtures, contracts, policy files and JSONL logs come from people and other programs. Each
loader turns these problems into its own typed error naming the file; this module only finds
them. Parsers (json, yaml) and validators (pydantic, jsonschema) recurse once per level of
nesting, so a document nested a hundred thousand levels deep raises `RecursionError` deep inside
them; a document that gets through is also checked here, without recursion, against a depth no
real input needs and which every later stage (validation, rendering, storage) can take.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import yaml

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


def load_json(text: str) -> Any:
    """`json.loads`, refusing an object that names one key twice (`json` keeps the last silently,
    so a fixture's second `expect:` or a contract's second `properties` would hide the first).
    Raises `json.JSONDecodeError` for bad syntax, `DocumentProblem` for a repeated key."""
    return json.loads(text, object_pairs_hook=_unique_pairs)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentProblem(f"key {key!r} appears twice in one object")
            seen.add(key)
    return mapping


def load_yaml(text: str) -> Any:
    """`yaml.safe_load`, refusing a mapping that names one key twice (PyYAML keeps the last
    silently). Raises `yaml.YAMLError` for bad syntax, `DocumentProblem` for a repeated key."""
    import yaml  # noqa: PLC0415  # only YAML documents need it, not every `import runner`

    return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass


_LOADER: list[type[yaml.SafeLoader]] = []


def _unique_key_loader() -> type[yaml.SafeLoader]:
    """The SafeLoader subclass, built on first use (so importing this module imports no yaml)."""
    if not _LOADER:
        import yaml  # noqa: PLC0415

        class UniqueKeyLoader(yaml.SafeLoader):
            def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *base` may override on purpose
                    key = self.construct_object(key_node, deep=True)
                    if isinstance(key, list | dict):
                        continue  # unhashable: SafeLoader refuses it with its own message
                    if key in seen:
                        line = key_node.start_mark.line + 1
                        raise DocumentProblem(f"key {key!r} appears twice (line {line})", line)
                    seen.add(key)
                return super().construct_mapping(node, deep=deep)

        _LOADER.append(UniqueKeyLoader)
    return _LOADER[0]


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
