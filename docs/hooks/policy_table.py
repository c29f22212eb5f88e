"""MkDocs hook: the decision table on `reference/policy-format.md`, from the result classes'
registry (`runner.core.result_classes.CLASSES`), which the policy checks every table against.

The page is written by hand around one marker line, `<!-- policy-table -->`, replaced at build
time (`on_page_markdown`); nothing generated is checked in, so the page's defaults and allowed
decisions are the code's.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

PAGE = "reference/policy-format.md"
MARKER = "<!-- policy-table -->"


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} has lost its {MARKER} line: the table has nowhere to go")
    return markdown.replace(MARKER, render())


def render() -> str:
    from runner.core.result_classes import CLASSES  # noqa: PLC0415

    rows = [
        "| result class | default decision | a policy may choose | the rule |",
        "|---|---|---|---|",
    ]
    for kind, facts in CLASSES.items():
        default = f"`{facts.default.value}`" if facts.default is not None else "(none)"
        allowed = ", ".join(f"`{d.value}`" for d in sorted(facts.allowed)) or "(none)"
        rows.append(f"| `{kind}` | {default} | {allowed} | {facts.rule} |")
    return "\n".join(rows) + "\n"
