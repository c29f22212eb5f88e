"""Tool retrieval: offer a large catalogue a few tools at a time.

Every offered tool's schema is resent with every model request, and a model picks worse among
many tools than among few. When a run's allowed catalogue is larger than
`ToolRetrieval.max_offered`, each model request offers only the `top_k` tools most relevant to the
task and the latest turn, plus the `always` set; the request's transition names what it offered,
and a call to any other tool is answered `unknown_tool` with the names the model may use.

The retriever is a protocol: it scores every tool of the catalogue for a query. The default is
lexical BM25 (the `bm25s` package, the `retrieval` extra) over each tool's name, description and
argument names. Selection is deterministic: scores are rounded before ranking and ties go to the
catalogue's order, so a replay (or a resume on another host) offers exactly what the run did.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..base.errors import ConfigError
from ..models.base import ToolSpec
from ..models.transcript import (
    AssistantMessage,
    ToolResultMessage,
    Transcript,
    UserMessage,
    render_json,
)

SCORE_DIGITS: Final = 6
"""Scores are compared rounded to this many digits: float noise never reorders a tie."""


class ToolRetrieval(BaseModel):
    """How a run with a large catalogue is offered its tools (kept in the run's header)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_offered: int = Field(default=16, ge=1, strict=True)
    """A catalogue of at most this many tools is offered whole; a larger one is retrieved from."""
    top_k: int = Field(default=5, ge=1, strict=True)
    """How many tools retrieval adds to the `always` set at each request."""
    always: tuple[str, ...] = ()
    """Tools offered at every request (when the run may use them), whatever the query."""
    retriever: str = "bm25"
    """The retriever's name in the engine's registry (`Engine(retrievers=...)`)."""


class Retriever(Protocol):
    """Scores a fixed catalogue against a query; built once per catalogue and reused."""

    def scores(self, query: str) -> Sequence[float]:
        """One relevance score per tool, in the catalogue's order (higher is more relevant)."""
        ...


RetrieverFactory = Callable[[Sequence[ToolSpec]], Retriever]
"""Builds a retriever for a catalogue (called once per catalogue per engine)."""

_WORD: Final = re.compile(r"[a-z0-9]+")


_SUFFIXES: Final = ("ibility", "ability", "ible", "able", "ation", "ing", "ed", "es", "s")


def words(text: str) -> list[str]:
    """Lowercase words of `text` (snake_case and camelCase split, numbers left out), each
    stripped of a common suffix so `accessible` meets `accessibility` and `flights` `flight`."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower().replace("_", " ")
    return [_stem(word) for word in _WORD.findall(spaced) if len(word) > 1 and not word.isdigit()]


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def tool_text(tool: ToolSpec) -> str:
    """What retrieval reads of a tool: its name, description and argument names."""
    properties = tool.parameters.get("properties")
    arguments = " ".join(properties) if isinstance(properties, dict) else ""
    return f"{tool.name} {tool.description} {arguments}"


class Bm25Retriever:
    """Lexical BM25 over each tool's name, description and argument names (`bm25s`)."""

    def __init__(self, catalogue: Sequence[ToolSpec]) -> None:
        try:
            import bm25s  # noqa: PLC0415  # an optional extra, imported when a run needs it
            from bm25s.stopwords import STOPWORDS_EN  # noqa: PLC0415
        except ImportError as exc:
            raise ConfigError(
                "tool retrieval with the bm25 retriever needs the bm25s package: "
                "pip install 'runner-fsm[retrieval]' (or give Engine(retrievers=...) your own)"
            ) from exc
        stop = frozenset(STOPWORDS_EN)
        self._stop = stop
        corpus = [
            [word for word in words(tool_text(tool)) if word not in stop] or ["_"]
            for tool in catalogue
        ]
        self._index: Any = bm25s.BM25()
        self._index.index(corpus, show_progress=False)
        self._size = len(catalogue)

    def scores(self, query: str) -> Sequence[float]:
        tokens = [w for w in words(query) if w not in self._stop]
        known = self._index.get_tokens_ids(tokens)
        if not known:
            return [0.0] * self._size
        return [float(score) for score in self._index.get_scores_from_ids(known)]


DEFAULT_RETRIEVERS: Final[Mapping[str, RetrieverFactory]] = {"bm25": Bm25Retriever}


def check_retrieval(
    retrieval: ToolRetrieval, contracts: Container[str], retrievers: Mapping[str, object]
) -> None:
    """Refuse before a run is stored what would fail later or be dropped in silence: a
    retriever the engine lacks (needed once the catalogue outgrows `max_offered`, or on the
    engine that resumes the run) and an `always` tool with no contract (a typo)."""
    if retrieval.retriever not in retrievers:
        known = ", ".join(sorted(retrievers)) or "none"
        raise ConfigError(
            f"tool_retrieval names retriever {retrieval.retriever!r}; this engine has {known}"
        )
    unknown = [name for name in retrieval.always if name not in contracts]
    if unknown:
        raise ConfigError(
            f"tool_retrieval.always names tools with no contract: {', '.join(unknown)}"
        )


def select(
    retrieval: ToolRetrieval,
    catalogue: Sequence[ToolSpec],
    retriever: Retriever,
    query: str,
) -> tuple[ToolSpec, ...]:
    """The tools one request offers: the `always` set and the `top_k` best of the rest for
    `query` (ties to the catalogue's order), in the catalogue's order (a stable manifest)."""
    names = [tool.name for tool in catalogue]
    always = set(retrieval.always) & set(names)
    scores = retriever.scores(query)
    if len(scores) != len(catalogue):
        raise ConfigError(
            f"retriever {retrieval.retriever!r} gave {len(scores)} scores for "
            f"{len(catalogue)} tools"
        )
    ranked = sorted(
        (index for index in range(len(names)) if names[index] not in always),
        key=lambda index: (-_rank_score(scores[index]), index),
    )
    chosen = always | {names[index] for index in ranked[: retrieval.top_k]}
    return tuple(tool for tool in catalogue if tool.name in chosen)


def _rank_score(score: float) -> float:
    """A score as ranked: rounded (float noise never reorders a tie), NaN last (NaN compares
    false with everything, and one would scramble the order of the rest)."""
    return -math.inf if math.isnan(score) else round(score, SCORE_DIGITS)


def latest_turn(transcript: Transcript) -> str:
    """What the latest turn says in words: the model's last text, and a message from the
    runtime after it (the budget notice).

    Tool results are left out: each names the tool just used and carries its data, which pulls
    the offer toward what was already done rather than what the task needs next.
    """
    parts: list[str] = []
    for message in reversed(transcript.messages):
        if isinstance(message, ToolResultMessage):
            continue
        if isinstance(message, UserMessage) and len(parts) == 0:
            parts.append(message.text)
            continue
        if isinstance(message, AssistantMessage):
            parts.append(message.text)
        break
    return " ".join(reversed(parts))


def manifest_of(known: dict[tuple[str, ...], int], tools: Sequence[ToolSpec]) -> int:
    """`manifest_tokens(tools)`, worked out once per set of tools (`known`, by their names)."""
    names = tuple(tool.name for tool in tools)
    tokens = known.get(names)
    if tokens is None:
        tokens = known[names] = manifest_tokens(tools)
    return tokens


def manifest_tokens(tools: Sequence[ToolSpec]) -> int:
    """About how many tokens the offered tools' manifest takes (four characters a token)."""
    manifest = [
        {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        for tool in tools
    ]
    return -(-len(render_json(manifest)) // 4)
