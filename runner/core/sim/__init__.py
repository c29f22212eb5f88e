"""Simulation-only code: what exists to prove the runner's checks, never to run production work.

`naive_policy()` is the broken runner of the design (a fresh key on every retry of a write, and an
unknown write outcome retried blindly instead of looked up). It breaks the policy matrix on
purpose, so it is built here, around validation, and never loads from a policy file.

May import: `base`, `core` (which reaches it only from `stored_policy`, for a run that names it).
"""

from __future__ import annotations

from .naive import NaivePolicy, naive_policy, recorded_simulation

__all__ = ["NaivePolicy", "naive_policy", "recorded_simulation"]
