"""MkDocs hook: the exception tree on `reference/exceptions.md`, drawn from the classes.

The page is written by hand, around one marker line, `<!-- exception-tree -->`, which this hook
replaces at build time (`on_page_markdown`) with the drawing in `runner.base.errors`' docstring
and a table of every class in it: where to import it from and its docstring's summary. Nothing
generated is checked in. The build fails when the drawing and the classes' own hierarchy differ
(a class added, moved or removed without the drawing), so the page cannot show a tree that is
not the code's.
"""

from __future__ import annotations

import importlib
import inspect
import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

PAGE = "reference/exceptions.md"
MARKER = "<!-- exception-tree -->"
MODULES = ("runner.base.errors", "runner.service.errors")
"""Where the tree's classes are defined (`ApiError` is the service's)."""


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} has lost its {MARKER} line: the tree has nowhere to go")
    return markdown.replace(MARKER, render())


def render() -> str:
    from runner.base import errors  # noqa: PLC0415

    drawing = _drawing(errors.__doc__ or "")
    classes = _classes()
    drawn, actual = _edges(drawing), _hierarchy(classes["RunnerError"])
    if drawn != actual:
        missing = sorted(f"{a} > {b}" for a, b in actual - drawn)
        extra = sorted(f"{a} > {b}" for a, b in drawn - actual)
        raise PluginError(
            "runner.base.errors' drawing is not the classes' tree: "
            f"not drawn {missing}, drawn but not so {extra}"
        )
    rows = ["| exception | import it from | what it means |", "|---|---|---|"]
    for line in drawing:
        name = _name(line)
        cls = classes[name]
        rows.append(f"| `{name}` | `{_home(cls)}` | {_summary(cls)} |")
    return "\n".join(["```text", *drawing, "```", "", *rows, ""])


def _drawing(text: str) -> list[str]:
    """The tree's lines, from its `RunnerError` line to the block's end, unindented."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "RunnerError")
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    indent = lines[start].index("RunnerError")
    return [line[indent:] for line in lines[start:end]]


def _name(line: str) -> str:
    match = re.search(r"[A-Za-z_]\w*", line)
    if match is None:
        raise PluginError(f"no class name on the tree's line {line!r}")
    return match.group()


def _edges(drawing: list[str]) -> set[tuple[str, str]]:
    """(parent, child) for every line but the root's, read from where each name starts."""
    root = drawing[0].index("RunnerError")
    parents: list[str] = []
    edges = set()
    for line in drawing:
        name = _name(line)
        depth = (line.index(name) - root) // 4
        del parents[depth:]
        if parents:
            edges.add((parents[-1], name))
        parents.append(name)
    return edges


def _classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module_name
            ):
                found[name] = value
    return found


def _hierarchy(top: type[BaseException]) -> set[tuple[str, str]]:
    edges = set()
    for sub in top.__subclasses__():
        if sub.__module__.startswith("runner.") and not sub.__name__.startswith("_"):
            edges.add((top.__name__, sub.__name__))
            edges |= _hierarchy(sub)
    return edges


def _home(cls: type[BaseException]) -> str:
    """The shortest public module to import `cls` from: `runner` when it exports it."""
    import runner  # noqa: PLC0415

    return "runner" if cls.__name__ in runner.__all__ else cls.__module__


def _summary(cls: type[BaseException]) -> str:
    doc = inspect.getdoc(cls) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    return first.replace("|", "\\|")
