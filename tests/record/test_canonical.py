"""`canonical` (one write, one key: 4 and 4.0 are one value) keeps its meaning on its fast path
for plain leaves (issue 11: it ran for every call's fingerprint, at 30 us for ten arguments)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.record.operations import canonical


def reference(value: Any) -> Any:
    """What `canonical` said before its fast path."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: reference(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [reference(item) for item in value]
    return value


class Ratio(float):
    """A float subclass (numpy's float64 is one): still written as the integer it is."""


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.floats(allow_nan=False).map(Ratio)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300)
@given(VALUES)
def test_canonical_says_what_it_always_said(value: Any) -> None:
    got, want = canonical(value), reference(value)
    assert got == want
    assert type(got) is type(want)


def test_integral_floats_are_integers_anywhere() -> None:
    assert canonical({"n": 4.0, "xs": [1.0, 2.5, (Ratio(3.0),)], "b": True}) == {
        "n": 4,
        "xs": [1, 2.5, [3]],
        "b": True,
    }
