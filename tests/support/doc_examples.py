"""The code blocks of the README and the docs, found with Sybil and checked by kind.

What a block is comes from its fence's language and the HTML comment on the line before it
(`<!-- fmt: off -->` lines between them are skipped). The rules, as
`docs/reference/how-the-docs-are-tested.md` states them for writers:

- ` ```python `: run, in the page's order, every block of a page sharing one namespace, in the
  page's own temporary working directory;
- ` ```python ` after `<!-- fragment of examples/NAME.py -->`: not run; each stretch of its lines
  between `...` lines appears, in order, in that file;
- ` ```python ` after `<!-- typecheck-only: why -->`: type-checked with mypy strict;
- ` ```console `: each `$ command` line runs under bash in the page's working directory (the
  shell's exported variables carry from one command to the next), and the lines up to the next
  `$ ` line are its output, compared after `normalize`; an expected line `...` stands for any
  number of lines;
- ` ```text ` after `<!-- output -->`: what the page's Python blocks printed since the last such
  block, line for line after `normalize` (`...` as in console blocks);
- ` ```text ` after `<!-- output of examples/NAME.py -->`: its lines appear, in order and after
  `normalize`, in what that program prints;
- every other block (`sh`, `yaml`, `json`, plain `text`) is shown, not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

from sybil import Document, Example, Region
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

from tests.support.paths import ROOT

PAGES: tuple[Path, ...] = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
"""Every page whose blocks are checked."""

ELLIPSIS = "..."
_COMMENT = re.compile(r"<!--\s*(?P<body>.*?)\s*-->\s*\Z", re.DOTALL)
_FMT = re.compile(r"<!--\s*fmt:\s*(off|on)\s*-->")

# The one normalization rule: what differs from one run to the next (run ids and their 8-character
# prefixes, digests derived from them such as a child run's operation key, clocks, timings) is
# replaced by a placeholder on both sides, then runs of spaces become one (a placeholder's width
# differs from what it replaced, which moves the columns after it).
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_ID_PREFIX = re.compile(r"\b[0-9a-f]{8}\b")
_DIGEST = re.compile(r"\b[0-9a-f]{32,64}\b")
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?\b"
)
_DURATION = re.compile(r"(?<![\w.])\d+(\.\d+)? ?(ms|µs|us|s)\b")
_SPACES = re.compile(r"[ \t]+")


def normalize(line: str) -> str:
    """One line as it is compared: ids, timestamps and durations as placeholders, single spaces."""
    line = _UUID.sub("<id>", line)
    line = _TIMESTAMP.sub("<time>", line)
    line = _DIGEST.sub("<digest>", line)
    line = _ID_PREFIX.sub("<id>", line)
    line = _DURATION.sub("<duration>", line)
    return _SPACES.sub(" ", line).strip()


def lines_match(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether `actual` is `expected` line for line after `normalize`, an expected `...` line
    standing for any number of lines (none included)."""
    want = [normalize(line) for line in expected]
    got = [normalize(line) for line in actual]
    # reachable[j]: the expected lines so far can account for got[:j].
    reachable = [True] + [False] * len(got)
    for pattern in want:
        if pattern == ELLIPSIS:
            for j in range(1, len(got) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
            continue
        reachable = [False] + [
            reachable[j - 1] and got[j - 1] == pattern for j in range(1, len(got) + 1)
        ]
    return reachable[-1]


def appears_in_order(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether the expected lines appear in `actual` in order, others between them allowed."""
    return lines_match([ELLIPSIS, *(x for line in expected for x in (line, ELLIPSIS))], actual)


def fragment_appears(fragment: str, source: str) -> str | None:
    """None when each stretch of the fragment between `...` lines appears, in order and
    contiguous (blank lines and indentation aside), in `source`; else the first missing line."""
    have = [line.strip() for line in source.splitlines() if line.strip()]
    stretches: list[list[str]] = [[]]
    for line in fragment.splitlines():
        if line.strip() == ELLIPSIS:
            stretches.append([])
        elif line.strip():
            stretches[-1].append(line.strip())
    at = 0
    for stretch in filter(None, stretches):
        found = next(
            (i for i in range(at, len(have)) if have[i : i + len(stretch)] == stretch), None
        )
        if found is None:
            missing = next(
                (line for line in stretch if line not in have[at:]), stretch[0]
            )  # the line that is not there, or the stretch's first when all are but not together
            return missing
        at = found + len(stretch)
    return None


@dataclasses.dataclass(frozen=True)
class Command:
    """One `$ ` line of a console block and the output shown under it."""

    line: str
    expected: tuple[str, ...]


def commands(block: str) -> list[Command]:
    """The commands of a console block, each with the lines shown under it."""
    found: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"a console block starts with output, not a `$ ` line: {line!r}")
    return [Command(line, tuple(_trim(output))) for line, output in found]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


@dataclasses.dataclass
class Page:
    """A page's working state while its blocks run: its folder and its shell's exports."""

    folder: Path
    exports: Path
    printed: list[str] = dataclasses.field(default_factory=list)
    """What the page's Python blocks printed since the last `<!-- output -->` block."""

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.pop("RUNNER_KILL_AFTER_COMMITS", None)
        return env


def run_command(page: Page, command: Command) -> str | None:
    """Run one `$ ` line in the page's shell; None when its output is what the page shows."""
    script = (
        f"[ -f {page.exports} ] && . {page.exports}\n"
        f"{command.line}\n"
        f"status=$?\nexport -p > {page.exports}\nexit $status\n"
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=page.folder,
        env=page.environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    actual = _trim((done.stdout + done.stderr).splitlines())
    if lines_match(command.expected, actual):
        return None
    shown = "\n".join(command.expected)
    printed = "\n".join(actual)
    return (
        f"$ {command.line}\n--- the page shows:\n{shown}\n--- it printed "
        f"(exit {done.returncode}):\n{printed}"
    )


_PROGRAM_OUTPUT: dict[str, list[str]] = {}


def program_output(name: str, folder: Path) -> list[str]:
    """What `examples/NAME.py` prints (run once a process, from `folder`, not the checkout)."""
    if name not in _PROGRAM_OUTPUT:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / f"{name}.py")],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"examples/{name}.py exited {done.returncode}:\n{done.stderr}")
        _PROGRAM_OUTPUT[name] = done.stdout.splitlines()
    return _PROGRAM_OUTPUT[name]


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: its language, the comment before it (if any) and its text."""

    language: str
    marker: str
    source: str

    @property
    def kind(self) -> str:
        if self.language == "python":
            if self.marker.startswith("fragment of "):
                return "fragment"
            if self.marker.startswith("typecheck-only"):
                return "typecheck"
            return "run"
        if self.language == "console":
            return "console"
        if self.language == "text" and self.marker.startswith("output of "):
            return "output"
        if self.language == "text" and self.marker == "output":
            return "printed"
        return "shown"

    @property
    def example_file(self) -> str:
        """The `examples/NAME.py` a fragment or an output names."""
        return self.marker.split(" of ", 1)[1].strip()


def _marker(text: str, start: int) -> str:
    """The body of the HTML comment just before the fence at `start`, `fmt` comments aside."""
    before = text[:start].rstrip().splitlines()
    while before and _FMT.fullmatch(before[-1].strip()):
        before.pop()
    if not before:
        return ""
    found = _COMMENT.search(before[-1].strip())
    return found.group("body") if found and before[-1].strip().startswith("<!--") else ""


class _BlockParser:
    """A Sybil parser: every fenced block with a language, as a `Block`."""

    def __init__(self) -> None:
        self._lexer = FencedCodeBlockLexer(language=r"[\w-]+")

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self._lexer(document):
            block = Block(
                language=str(region.lexemes["language"]),
                marker=_marker(document.text, region.start),
                source=str(region.lexemes["source"]),
            )
            region.parsed = block
            region.evaluator = _evaluate
            yield region


_RUN_PYTHON = PythonEvaluator()


def _evaluate(example: Example) -> str | None:
    block: Block = example.parsed
    page: Page = example.namespace["__page__"]
    if block.kind == "run":
        lexeme = example.region.lexemes["source"]
        example.parsed = lexeme  # what PythonEvaluator compiles, with the page's line numbers
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                _RUN_PYTHON(example)
        finally:
            example.parsed = block
            page.printed.extend(printed.getvalue().splitlines())
        return None
    if block.kind == "printed":
        shown, got = _trim(block.source.splitlines()), list(page.printed)
        page.printed.clear()
        if lines_match(shown, got):
            return None
        return "the Python blocks above printed:\n" + "\n".join(got)
    if block.kind == "fragment":
        path = ROOT / block.example_file
        if not path.is_file():
            return f"a fragment of {block.example_file}, which does not exist"
        missing = fragment_appears(block.source, path.read_text(encoding="utf-8"))
        return None if missing is None else f"not in {block.example_file}: {missing!r}"
    if block.kind == "console":
        for command in commands(block.source):
            failure = run_command(page, command)
            if failure is not None:
                return failure
        return None
    if block.kind == "output":
        name = Path(block.example_file).stem
        printed = program_output(name, page.folder)
        shown = _trim(block.source.splitlines())
        if appears_in_order(shown, printed):
            return None
        return f"examples/{name}.py printed:\n" + "\n".join(printed)
    return None  # typecheck-only blocks are checked together (`typecheck_sources`); shown: none


def parse(path: Path) -> Document:
    """A page as Sybil reads it: its fenced blocks, each a `Block`, in order."""
    return Document.parse(str(path), _BlockParser())


def blocks(path: Path) -> list[Block]:
    return [example.parsed for example in parse(path)]


def typecheck_sources() -> list[tuple[str, str]]:
    """Every typecheck-only block of every page, as (a module name, its source)."""
    found: list[tuple[str, str]] = []
    for path in PAGES:
        for number, block in enumerate(b for b in blocks(path) if b.kind == "typecheck"):
            stem = re.sub(r"\W", "_", str(path.relative_to(ROOT).with_suffix("")))
            found.append((f"{stem}_{number}", textwrap.dedent(block.source)))
    return found


def run_page(path: Path, folder: Path) -> None:
    """Check every block of one page in order, from `folder` (its working directory)."""
    document = parse(path)
    document.namespace["__page__"] = Page(folder=folder, exports=folder / ".page-exports.sh")
    document.namespace["__name__"] = "__docs__"
    previous = Path.cwd()
    os.chdir(folder)
    try:
        for example in document:
            example.evaluate()
    finally:
        os.chdir(previous)
