"""MkDocs hook: `reference/cli.md`, written at build time from the command's own parser.

The page is generated into the build only (`on_files` adds it as a virtual file): there is no
copy of it in `docs/` to go stale, and whatever `runner.cli._parser()` says (every subcommand,
its usage, arguments and help) is what the page says.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from runner.cli import _parser

PAGE = "reference/cli.md"
WIDTH = 88
"""Usage lines wrap here, whatever the terminal that runs the build."""

INTRO = """\
# Command line

Generated from the command's own parser when the site is built, so it says what `runner --help`
and `runner COMMAND --help` say. `python -m runner ...` is the same command.

Every command reads and writes one store: `--db` takes a SQLite file or a `postgresql://` URL;
without it, `$RUNNER_DB`, else `runs.sqlite` in the working directory. Exit codes: 0 when all is
well, 1 when a run or check did not meet its expectations (a failed `expect`, a replay
divergence, a failed grade, a fixture check's warning), 2 on bad input (a file that does not
load, a flag out of range, a store that cannot be used), always as one `error: ...` line on
stderr, never a traceback. The `--json` objects are described in
[`--json` output](json-output.md).
"""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=render(_parser())))
    return files


def render(parser: argparse.ArgumentParser) -> str:
    helps = _helps(parser)
    everywhere = {action.dest for action in parser._actions if action.option_strings}
    parts = [INTRO, "## Commands\n", _command_list(parser, helps)]
    parts.append(_section(parser, None, set()))
    parts += [_section(sub, helps[sub.prog], everywhere) for sub in _subcommands(parser)]
    return "\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every subcommand under `parser`, depth first, in the order the parser declares them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from _subcommands(sub)


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, by its full name (`runner contracts check`)."""
    found: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                found[sub.prog] = choice.help or ""
                found |= _helps(sub)
    return found


def _command_list(parser: argparse.ArgumentParser, helps: dict[str, str]) -> str:
    rows = ["| command | what it does |", "|---|---|"]
    rows += [
        f"| [`{sub.prog}`](#{_anchor(sub.prog)}) | {_cell(helps[sub.prog])} |"
        for sub in _subcommands(parser)
    ]
    return "\n".join(rows) + "\n"


def _anchor(prog: str) -> str:
    return prog.replace(" ", "-")


def _section(parser: argparse.ArgumentParser, summary: str | None, shown: set[str]) -> str:
    """One command's heading, help, usage and arguments; `summary` None: the top-level parser,
    whose options (`shown`) are described there once rather than under every subcommand."""
    if summary is None:
        lines = [
            "## Options of every command {#options}\n",
            "Given before the subcommand (`runner --verbose run ...`); `--verbose` may also "
            "follow it.\n",
        ]
    else:
        lines = [f"## `{parser.prog}` {{#{_anchor(parser.prog)}}}\n"]
        if summary:
            lines.append(_sentence(summary) + "\n")
    lines += ["```text", _usage(parser).rstrip(), "```\n"]
    table = _arguments(parser, shown)
    if table:
        lines.append(table)
    return "\n".join(lines)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help()


def _arguments(parser: argparse.ArgumentParser, shown: set[str]) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.dest in shown:
            continue  # --verbose, accepted after every subcommand too: described once, above
        name = formatter._format_action_invocation(action)
        notes = []
        if action.option_strings and action.required:
            notes.append("required")
        if not action.option_strings:
            notes.append(
                {"+": "one or more", "*": "any number", "?": "optional"}.get(str(action.nargs), "")
            )
        if isinstance(action, argparse._AppendAction) and "repeatable" not in (action.help or ""):
            notes.append("repeatable")
        what = action.help or ""
        if any(notes):
            what += f" ({', '.join(note for note in notes if note)})"
        rows.append(f"| `{name}` | {_cell(what)} |")
    if not rows:
        return ""
    return "\n".join(["| argument | meaning |", "|---|---|", *rows]) + "\n"


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _cell(text: str) -> str:
    """Text for a table cell: a pipe or angle bracket would end the cell or open a tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
