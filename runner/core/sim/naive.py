"""The naive policy: the runner the design warns about, kept to show that grading catches it."""

from __future__ import annotations

from typing import Any, Literal

from ...base.errors import ConfigError
from ..machine import Decision
from ..policy import DEFAULT_DECISIONS, Policy


class NaivePolicy(Policy):
    """Retries an unknown write outcome without a lookup, under a fresh key each time.

    Built with `model_construct` (its table breaks the matrix every `Policy` is checked against);
    `simulation` marks it in a run's header, so a stored naive run resumes and replays as itself.
    """

    simulation: Literal["naive"] = "naive"

    def key_generation(self, retries: int) -> int:
        return retries  # the bug: every retry is a new intent, so the supplier cannot deduplicate


def naive_policy() -> NaivePolicy:
    decisions = {**DEFAULT_DECISIONS, "unknown_outcome": Decision.RETRY}
    return NaivePolicy.model_construct(name="naive", decisions=decisions)


def recorded_simulation(data: dict[str, Any]) -> Policy:
    """The simulation policy a run header names; only one this code builds, exactly as built."""
    naive = naive_policy()
    if data == naive.model_dump(mode="json"):
        return naive
    raise ConfigError(
        f"a stored run names simulation policy {data.get('simulation')!r} with settings this "
        "runner does not build"
    )
