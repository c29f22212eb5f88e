"""The checker of the docs' blocks fails a page that does not do what it shows: wrong output, a
fragment its file does not hold, Python that raises; and the normalization rule hides only ids,
digests, clocks and timings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sybil.example import SybilFailure

from tests.support.doc_examples import blocks, lines_match, normalize, run_page

FENCE = "```"


def _page(tmp_path: Path, body: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(body.replace("'''", FENCE), encoding="utf-8")
    return page


def test_a_console_block_whose_output_differs_fails(tmp_path: Path) -> None:
    page = _page(tmp_path, "'''console\n$ echo hello\ngoodbye\n'''\n")
    with pytest.raises(SybilFailure, match="goodbye"):
        run_page(page, tmp_path)


def test_exports_and_files_carry_from_one_console_block_to_the_next(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "'''console\n$ export WHO=runner; echo made > made.txt\n'''\n\n"
        "'''console\n$ echo $WHO; cat made.txt\nrunner\nmade\n'''\n",
    )
    run_page(page, tmp_path)


def test_python_that_raises_fails_and_blocks_share_a_namespace(tmp_path: Path) -> None:
    ok = _page(tmp_path, "'''python\nvalue = 2\n'''\n\n'''python\nassert value == 2\n'''\n")
    run_page(ok, tmp_path)
    bad = _page(tmp_path, "'''python\nassert 1 == 2, 'wrong'\n'''\n")
    with pytest.raises(AssertionError, match="wrong"):
        run_page(bad, tmp_path)


def test_a_fragment_its_file_does_not_hold_fails(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "<!-- fragment of examples/cost_budget.py -->\n'''python\nthis_line_is_nowhere()\n'''\n",
    )
    with pytest.raises(SybilFailure, match="this_line_is_nowhere"):
        run_page(page, tmp_path)


def test_what_a_block_is_comes_from_its_language_and_the_comment_before_it(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "<!-- fmt: off -->\n<!-- typecheck-only: needs a key -->\n'''python\nx = 1\n'''\n"
        "'''python\ny = 1\n'''\n'''sh\nmake run\n'''\n"
        "<!-- output of examples/approvals.py -->\n'''text\nA-1\n'''\n'''console\n$ true\n'''\n",
    )
    assert [block.kind for block in blocks(page)] == [
        "typecheck",
        "run",
        "shown",
        "output",
        "console",
    ]


def test_normalize_hides_ids_digests_clocks_and_timings_only() -> None:
    line = (
        "run 43845046-9f23-4df0-8a43-ad805e7952af  06ca164b  at 2026-12-04T10:00:00Z"
        "   12 ms  wait 0.422211 s  key t:op:4d05de9b361d76364314be9f38b88aa8  attempt 2"
    )
    assert normalize(line) == (
        "run <id> <id> at <time> <duration> wait <duration> key t:op:<digest> attempt 2"
    )
    assert normalize("attempts 2  steps 3") != normalize("attempts 3  steps 3")


@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=8), st.integers(0, 8), st.integers(0, 8))
def test_an_ellipsis_stands_for_any_run_of_lines(lines: list[str], cut: int, span: int) -> None:
    cut = min(cut, len(lines))
    end = min(cut + span, len(lines))
    assert lines_match([*lines[:cut], "...", *lines[end:]], lines)
    assert lines_match(lines, lines)
    assert not lines_match([*lines, "z"], lines)


def test_shown_output_is_what_the_python_blocks_printed(tmp_path: Path) -> None:
    good = "'''python\nprint('run 1 ended')\n'''\n\n<!-- output -->\n'''text\nrun 1 ended\n'''\n"
    run_page(_page(tmp_path, good), tmp_path)
    with pytest.raises(SybilFailure, match="run 1 ended"):
        run_page(_page(tmp_path, good.replace("text\nrun 1", "text\nrun 2")), tmp_path)
