"""The retry policy as validated data: observation class -> decision, plus backoff.

Pure: nothing here sleeps or reads a clock. The engine asks `decision_for()` what to do and
`retry_delay()` how long to wait, then checks the wait against the deadline before sleeping.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .machine import Decision
from .observations import ResultClass, ToolRateLimited

DEFAULT_DECISIONS: Final[dict[ResultClass, Decision]] = {
    "ok": Decision.CONTINUE,
    "empty": Decision.CONTINUE,
    "invalid_arguments": Decision.BACK_TO_MODEL,
    "rate_limited": Decision.RETRY,
    "transient": Decision.RETRY,
    "access_denied": Decision.ESCALATE,
    "permanent": Decision.BACK_TO_MODEL,
    "malformed_result": Decision.BACK_TO_MODEL,
    "unknown_tool": Decision.BACK_TO_MODEL,
    "unknown_outcome": Decision.RECONCILE,
    "not_applied": Decision.RETRY,
    "repeat_refused": Decision.BACK_TO_MODEL,
    "budget_exhausted": Decision.FINAL_ANSWER,
}


class Backoff(BaseModel):
    """Exponential backoff, full jitter: uniform(0, min(max_s, initial_s * multiplier**n))."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_s: float = Field(default=0.5, gt=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_s: float = Field(default=8.0, gt=0)


class Policy(BaseModel):
    """What the runner does with each observation class. Configurable, never prompt text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"
    decisions: dict[ResultClass, Decision] = Field(default_factory=lambda: dict(DEFAULT_DECISIONS))
    max_retries: int = Field(default=2, ge=0)
    """Retries of one call after rate limiting or a transient failure (first try not counted)."""
    corrections_per_tool: int = Field(default=1, ge=0)
    """Invalid-argument calls to one tool handed back for correction before the run abstains."""
    backoff: Backoff = Field(default_factory=Backoff)
    fresh_key_on_retry: bool = False
    """Mint a new operation key for every retry of a write. Only the naive policy does this: it
    is the bug that books a hotel twice, kept to prove the checks catch it."""

    @field_validator("decisions", mode="after")
    @classmethod
    def _over_the_defaults(
        cls, decisions: dict[ResultClass, Decision]
    ) -> dict[ResultClass, Decision]:
        """A policy file lists only what it changes; every other class keeps its default."""
        return {**DEFAULT_DECISIONS, **decisions}

    def decision_for(self, result_class: ResultClass) -> Decision:
        """The table's decision for a result class."""
        return self.decisions.get(result_class, Decision.BACK_TO_MODEL)

    @classmethod
    def named(cls, name: str) -> Policy:
        """A built-in policy: `default`, or `naive` (the broken runner of the design)."""
        if name == "default":
            return cls()
        if name == "naive":
            decisions = dict(DEFAULT_DECISIONS)
            decisions["unknown_outcome"] = Decision.RETRY  # retry blindly, no lookup
            return cls(name="naive", decisions=decisions, fresh_key_on_retry=True)
        raise ConfigError(f"unknown policy {name!r}: use default, naive, or a policy file")

    @classmethod
    def load(cls, path: Path) -> Policy:
        """Read a policy from a YAML or JSON file; one clear `ConfigError` if it is wrong."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            return cls.model_validate(data or {})
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"policy {path}: cannot read: {exc}") from exc
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"policy {path}: {details}") from exc


def backoff_delay(retry_number: int, rng: random.Random, backoff: Backoff) -> float:
    """Full-jitter delay before retry `retry_number` (1 for the first retry)."""
    ceiling = min(backoff.max_s, backoff.initial_s * backoff.multiplier ** (retry_number - 1))
    return rng.uniform(0.0, ceiling)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait per RFC 9110 10.2.3, or None when the value is absent or garbage.

    Accepts delay-seconds (`"120"`) and an HTTP-date (IMF-fixdate, RFC 850 or asctime, all GMT),
    read against `now`. A date in the past means no wait.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        # Beyond 15 digits (over 30 million years) the delay outlasts any deadline, and soon
        # is too long for a float or for `int()`: never wait for it.
        return float(int(text)) if len(text) <= 15 else math.inf
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime carries no zone; HTTP-dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def retry_after_or_backoff(
    policy: Policy, retry_after: str | None, retry_number: int, rng: random.Random, now: datetime
) -> float:
    """Retry-After when usable, else backoff: for tools and model providers alike."""
    honoured = parse_retry_after(retry_after, now)
    if honoured is not None:
        return honoured
    return backoff_delay(retry_number, rng, policy.backoff)


def retry_delay(
    policy: Policy,
    observation: object,
    retry_number: int,
    rng: random.Random,
    now: datetime,
) -> float:
    """How long to wait before retry `retry_number` of a tool call."""
    retry_after = observation.retry_after if isinstance(observation, ToolRateLimited) else None
    return retry_after_or_backoff(policy, retry_after, retry_number, rng, now)
