"""Command-line argument types: every flag's range checked where it is parsed, one line if not.

A value argparse refuses becomes one `error: ...` line on stderr and exit 2, like every other
error of the command line (`runner.cli`), instead of argparse's usage block.
"""

from __future__ import annotations

import argparse
import math
from typing import Final, NoReturn

from ..core.budget import MAX_DEADLINE_S

EXIT_BAD_INPUT: Final = 2
"""The command line's exit code for bad input, argument mistakes included."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one `error: ...` line (exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def count(text: str) -> int:
    """A whole number of at least 1 (repeats, trials, attempts, steps, tokens)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def seed(text: str) -> int:
    """A seed of 0 or more: `random.Random` seeds -n exactly like n, so a negative seed lies."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def port_number(text: str) -> int:
    """A TCP port to listen on: 0 (any free one) to 65535."""
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {text}")
    return value


def run_id_text(text: str) -> str:
    """A run id given on the command line: text that can be UTF-8 (the shell passes any bytes,
    which Python keeps as lone surrogates: no store can look such an id up)."""
    if not is_utf8(text):
        raise argparse.ArgumentTypeError(
            "a run id is UTF-8 text, and this one has bytes that are not"
        )
    return text


def is_utf8(text: str) -> bool:
    """Whether `text` (an argument, which may hold any bytes) can be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def dollars(text: str) -> float:
    """A money budget in US dollars: finite and above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an amount of dollars, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite amount above 0, got {text}")
    return value


def seconds(text: str) -> float:
    """A deadline in seconds: finite, above 0, and no longer than `Limits` allows."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds above 0 and at most {MAX_DEADLINE_S:g}, got {text}"
        )
    return value
