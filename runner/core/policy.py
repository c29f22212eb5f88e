"""The retry policy as validated data: observation class -> decision, plus backoff.

Pure: nothing here sleeps or reads a clock. The one decision (`decide.py`) asks `decision_for()`
what the table says and `retry_delay()` how long to wait, and checks the wait against the deadline;
the engine sleeps. Each result class's defaults and allowed decisions come from `result_classes.py`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..base._documents import (
    TOO_DEEP,
    TOO_LONG_NUMBER,
    DocumentProblem,
    check_shape,
    load_yaml,
    read_text,
)
from ..base.errors import ConfigError
from .machine import Decision
from .observations import ResultClass, ToolFailedTransiently, ToolRateLimited
from .result_classes import CLASSES

DEFAULT_DECISIONS: Final[dict[ResultClass, Decision]] = {
    kind: facts.default for kind, facts in CLASSES.items() if facts.default is not None
}
"""The default policy's table, from the registry of result classes."""


@dataclass(frozen=True, slots=True)
class Rule:
    """The decisions a result class may get, and the safety rule that says why."""

    allowed: frozenset[Decision]
    rule: str


# What a policy may decide per result class: the failure classes of DESIGN.md as data (kept in
# `result_classes.py`), checked whenever a `Policy` is built. No table can retry a denial, skip
# the lookup of an unknown write, re-send a settled call, or keep calling tools once a bound is
# spent.
ALLOWED_DECISIONS: Final[dict[ResultClass, Rule]] = {
    kind: Rule(facts.allowed, facts.rule) for kind, facts in CLASSES.items()
}

MAX_RETRIES: Final = 10
MAX_CORRECTIONS: Final = 5
MAX_BACKOFF_S: Final = 300.0


def unsafe_decisions(decisions: Mapping[ResultClass, Decision]) -> list[str]:
    """Every entry of a decision table that breaks the matrix, each naming its rule."""
    problems = []
    for result_class, decision in decisions.items():
        rule = ALLOWED_DECISIONS[result_class]
        if decision not in rule.allowed:
            allowed = ", ".join(sorted(rule.allowed)) or "none"
            problems.append(
                f"{result_class}: {decision.value} breaks the rule '{rule.rule}' "
                f"(allowed: {allowed})"
            )
    return problems


class Backoff(BaseModel):
    """Exponential backoff, full jitter: uniform(0, min(max_s, initial_s * multiplier**n))."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    initial_s: float = Field(default=0.5, gt=0, le=MAX_BACKOFF_S, strict=True)
    multiplier: float = Field(default=2.0, ge=1, le=10, strict=True)
    max_s: float = Field(default=8.0, gt=0, le=MAX_BACKOFF_S, strict=True)

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.initial_s > self.max_s:
            raise PydanticCustomError(
                "backoff_order",
                "initial_s {initial} is above max_s {most}",
                {"initial": self.initial_s, "most": self.max_s},
            )
        return self


class ApprovalRules(BaseModel):
    """Which writes need a person's approval besides those whose contract declares it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tools: tuple[str, ...] = ()
    """Writes that always need approval under this policy."""
    untrusted_arguments: bool = False
    """A write whose argument value first appeared in a tool result (not in the task) needs
    approval: an id read from a search result that may carry instructions."""


class Policy(BaseModel):
    """What the runner does with each observation class. Configurable, never prompt text.

    Every table is checked against `ALLOWED_DECISIONS` and every bound is finite, so no policy can
    switch a safety rule off. (The deliberately broken naive policy is simulation code:
    `runner.core.sim`.)
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = "default"
    decisions: dict[ResultClass, Decision] = Field(default_factory=lambda: dict(DEFAULT_DECISIONS))
    max_retries: int = Field(default=2, ge=0, le=MAX_RETRIES, strict=True)
    """Retries of one call after rate limiting or a transient failure (first try not counted)."""
    corrections_per_tool: int = Field(default=1, ge=0, le=MAX_CORRECTIONS, strict=True)
    """Invalid-argument calls to one tool handed back for correction before the run abstains."""
    backoff: Backoff = Field(default_factory=Backoff)
    approval: ApprovalRules = Field(default_factory=ApprovalRules)

    @field_validator("decisions", mode="after")
    @classmethod
    def _over_the_defaults(
        cls, decisions: dict[ResultClass, Decision]
    ) -> dict[ResultClass, Decision]:
        """A policy file lists only what it changes; every other class keeps its default."""
        merged = {**DEFAULT_DECISIONS, **decisions}
        problems = unsafe_decisions(merged)
        if problems:
            raise PydanticCustomError("unsafe_decision", "; ".join(problems))
        return merged

    def decision_for(self, result_class: ResultClass) -> Decision:
        """The table's decision for a result class."""
        return self.decisions[result_class]  # every table is merged over the defaults

    def key_generation(self, retries: int) -> int:
        """The generation of the operation key a write's retry is sent under: always 0, so one
        intent keeps one key however often it is re-sent."""
        del retries
        return 0

    @classmethod
    def named(cls, name: str) -> Policy:
        """A built-in policy: `default`."""
        if name == "default":
            return cls()
        if name == "naive":
            raise ConfigError(
                "the naive policy is a simulation of a broken runner: "
                "runner.core.sim.naive_policy()"
            )
        raise ConfigError(f"unknown policy {name!r}: use default, naive, or a policy file")

    @classmethod
    def load(cls, path: Path) -> Policy:
        """Read a policy from a YAML or JSON file; one clear `ConfigError` if it is wrong."""
        import yaml  # noqa: PLC0415  # only a policy file needs it, not every `import runner`

        try:
            data = load_yaml(read_text(path))
            check_shape(data)
            if data is None:  # an empty file (or only comments): the default policy
                data = {}
            if not isinstance(data, dict):  # `[]`, `false`, `0` or `""` read as the default
                raise ConfigError(
                    f"policy {path}: must be a mapping of policy fields, not {type(data).__name__}"
                )
            return cls.model_validate(data)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"policy {path}: cannot read: {exc}") from exc
        except RecursionError as exc:
            raise ConfigError(f"policy {path}: {TOO_DEEP}") from exc
        except DocumentProblem as exc:
            raise ConfigError(f"policy {path}: {exc}") from exc
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"policy {path}: {details}") from exc
        except ValueError as exc:  # after ValidationError, its subclass
            raise ConfigError(f"policy {path}: {TOO_LONG_NUMBER}") from exc


def backoff_delay(retry_number: int, rng: random.Random, backoff: Backoff) -> float:
    """Full-jitter delay before retry `retry_number` (1 for the first retry)."""
    ceiling = min(backoff.max_s, backoff.initial_s * backoff.multiplier ** (retry_number - 1))
    return rng.uniform(0.0, ceiling)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait per RFC 9110 10.2.3, or None when the value is absent or garbage.

    Accepts delay-seconds (`"120"`) and an HTTP-date (IMF-fixdate, RFC 850 or asctime, all GMT),
    read against `now`. A date in the past means no wait.
    """
    if not isinstance(value, str):  # absent, or whatever a foreign transport put there
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
    except (TypeError, ValueError, IndexError, OverflowError):
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
    """How long to wait before retry `retry_number` of a tool call: the Retry-After a rate limit
    or a 503 came with, when usable, else backoff."""
    retry_after = (
        observation.retry_after
        if isinstance(observation, ToolRateLimited | ToolFailedTransiently)
        else None
    )
    return retry_after_or_backoff(policy, retry_after, retry_number, rng, now)
