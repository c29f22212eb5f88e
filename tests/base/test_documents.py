"""The input-document checks: UTF-8 named by line and byte, nesting and expansion measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.base._documents import MAX_DEPTH, MAX_VALUES, DocumentProblem, check_shape, read_text

EXAMPLES = 200

documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=40,
)


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return 1 + max((_depth(v) for v in node), default=0)
    return 0


def _nest(levels: int) -> list[Any]:
    document: list[Any] = []
    for _ in range(levels - 1):
        document = [document]
    return document


@settings(max_examples=EXAMPLES, deadline=None)
@given(documents, st.integers(min_value=0, max_value=MAX_DEPTH + 5))
def test_depth_is_measured_exactly(document: Any, wrap: int) -> None:
    """A document passes exactly when it nests at most MAX_DEPTH levels, however it is built."""
    for _ in range(wrap):
        document = {"k": [document]}
    if _depth(document) <= MAX_DEPTH:
        check_shape(document)
    else:
        with pytest.raises(DocumentProblem, match="nested too deeply"):
            check_shape(document)


def test_a_hundred_thousand_levels_are_refused_without_recursing() -> None:
    with pytest.raises(DocumentProblem, match="nested too deeply"):
        check_shape(_nest(100_000))
    check_shape(_nest(MAX_DEPTH))


def test_shared_values_count_every_time_they_appear() -> None:
    """YAML aliases share one object; what it expands to is what later stages must handle."""
    leaf = list(range(100))
    document: list[Any] = leaf
    for _ in range(3):
        document = [document] * 100  # 100 ** 4 = 10 ** 8 values from 100 + 300 distinct ones
    with pytest.raises(DocumentProblem, match=f"more than {MAX_VALUES}"):
        check_shape(document)


def test_a_document_containing_itself_is_refused() -> None:
    loop: list[Any] = []
    loop.append({"again": loop})
    with pytest.raises(DocumentProblem, match="contains itself"):
        check_shape(loop)


def test_bad_bytes_are_named_by_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a: 1\nb: 2\nc: caf\xe9\n")
    with pytest.raises(DocumentProblem, match=r"not valid UTF-8 at line 3 \(byte 16: b'\\xe9'\)"):
        read_text(path)
