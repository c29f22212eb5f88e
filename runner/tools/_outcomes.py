"""How a tool call ended besides a `ToolResponse`, named alike in a recording and its replay:
the exceptions the runner itself raises for a call (`MalformedOutput`, `ResponseLost`,
`ReplayedError`) and the `Type: message` text every exception is recorded and classified by.
"""

from __future__ import annotations

from typing import Final

from ..base._jsonsafe import clean_text, safe_str


class ReplayedError(Exception):
    """An exception re-raised from a recording, keeping the original's type name."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class ResponseLost(TimeoutError):
    """A write's response was never recorded because the runner stopped while it was in flight."""


class MalformedOutput(Exception):
    """A tool answered with something other than a `ToolResponse` whose payload is plain JSON."""


MALFORMED_OUTPUT: Final = "runner:MalformedOutput"
"""The recorded type name of `MalformedOutput`: no tool's own exception class is named so."""


def exception_name(exc: BaseException) -> str:
    if isinstance(exc, MalformedOutput):
        return MALFORMED_OUTPUT
    return exc.type_name if isinstance(exc, ReplayedError) else clean_text(type(exc).__name__)


def describe_exception(exc: BaseException) -> str:
    """`Type: message`, stable across a recording and its replay (and always valid UTF-8)."""
    text = safe_str(exc)
    return f"{exception_name(exc)}: {text}" if text else exception_name(exc)
