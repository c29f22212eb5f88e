"""The policy a stored run ran under, read back to resume or replay it under the same rules.

Beside `policy.py`, not in it: a stored simulation policy comes back as itself, from
`runner.core.sim`, which builds on `Policy`; reading it here keeps the two from importing each
other, and `sim` is imported only for a run that names one, so a production run never loads it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..base.errors import ConfigError
from .policy import Policy


def stored_policy(data: Any) -> Policy:
    """The policy a run header records (`RunHeader.policy`); anything but a simulation policy
    must validate like a policy file, or it is one `ConfigError`."""
    if isinstance(data, dict) and "fresh_key_on_retry" in data:  # stored before runner.sim
        fresh = data["fresh_key_on_retry"] is True
        data = {key: value for key, value in data.items() if key != "fresh_key_on_retry"}
        data = {**data, "simulation": "naive"} if fresh else data
    if isinstance(data, dict) and data.get("simulation") is not None:
        from .sim import recorded_simulation  # noqa: PLC0415  (production never loads sim)

        return recorded_simulation(data)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"the run's stored policy does not load: {details}") from exc
