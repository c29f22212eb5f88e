"""A policy cannot switch off a safety rule (issue 9, item 12).

Policy files are checked for meaning (a matrix of decisions allowed per result class) and for
finite bounds; a violating file is one `ConfigError` naming the rule, exit 2 from the CLI. The
broken `naive` policy lives in the simulation module, outside the production `Policy` type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from runner.base.errors import ConfigError
from runner.cli import main
from runner.core.machine import Decision
from runner.core.observations import ResultClass
from runner.core.policy import ALLOWED_DECISIONS, DEFAULT_DECISIONS, Policy
from runner.core.sim import NaivePolicy, naive_policy
from runner.core.stored_policy import stored_policy
from tests.support.paths import FIXTURES


def _load(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return Policy.load(path)


def test_the_matrix_names_every_result_class_and_the_defaults_obey_it() -> None:
    assert set(ALLOWED_DECISIONS) == set(get_args(ResultClass))
    for result_class, decision in DEFAULT_DECISIONS.items():
        assert decision in ALLOWED_DECISIONS[result_class].allowed, result_class
    Policy()  # the default policy validates


@pytest.mark.parametrize(
    ("result_class", "decision", "rule"),
    [
        ("access_denied", "retry", "access denied is never retried"),
        ("access_denied", "reconcile", "access denied is never retried"),
        ("access_denied", "back_to_model", "access denied is never retried"),
        ("unknown_outcome", "retry", "reconciled by its key before anything else"),
        ("unknown_outcome", "back_to_model", "reconciled by its key before anything else"),
        ("unknown_outcome", "continue", "reconciled by its key before anything else"),
        ("ok", "reconcile", "a success is final"),
        ("ok", "retry", "a success is final"),
        ("empty", "retry", "an empty result is an answer"),
        ("budget_exhausted", "retry", "a spent budget"),
        ("budget_exhausted", "continue", "a spent budget"),
        ("permanent", "retry", "a permanent failure"),
        ("invalid_arguments", "retry", "invalid arguments"),
        ("repeat_refused", "retry", "a refused repeat"),
        ("not_applied", "reconcile", "a write proven not applied"),
        ("transient", "unknown", "a transient failure"),
        ("model_final", "continue", "not a tool outcome"),
    ],
)
def test_a_decision_outside_the_matrix_is_one_error_naming_the_rule(
    tmp_path: Path, result_class: str, decision: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"decisions: {{{result_class}: {decision}}}\n")
    message = str(info.value)
    assert f"{result_class}: {decision}" in message and rule in message
    assert "\n" not in message


def test_every_violation_is_named_in_the_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "decisions: {access_denied: retry, unknown_outcome: retry}\n")
    message = str(info.value)
    assert "access_denied: retry" in message and "unknown_outcome: retry" in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("max_retries: 11\n", "max_retries"),
        ("max_retries: 1000000\n", "max_retries"),
        ("corrections_per_tool: 50\n", "corrections_per_tool"),
        ("backoff: {max_s: .inf}\n", "backoff.max_s"),
        ("backoff: {max_s: .nan}\n", "backoff.max_s"),
        ("backoff: {max_s: 100000}\n", "backoff.max_s"),
        ("backoff: {initial_s: .inf}\n", "backoff.initial_s"),
        ("backoff: {initial_s: .nan}\n", "backoff.initial_s"),
        ("backoff: {multiplier: .inf}\n", "backoff.multiplier"),
        ("backoff: {multiplier: 1000}\n", "backoff.multiplier"),
        ("backoff: {initial_s: 30, max_s: 10}\n", "initial_s"),
        ("fresh_key_on_retry: true\n", "fresh_key_on_retry"),
    ],
)
def test_bounds_are_finite_and_bounded(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert field in str(info.value)


def test_a_sound_policy_file_within_the_matrix_loads(tmp_path: Path) -> None:
    policy = _load(
        tmp_path,
        "name: strict\nmax_retries: 10\ndecisions: {access_denied: abstain, "
        "unknown_outcome: unknown, permanent: escalate, budget_exhausted: abstain}\n"
        "backoff: {initial_s: 1, multiplier: 3, max_s: 60}\n",
    )
    assert policy.decision_for("unknown_outcome") is Decision.UNKNOWN
    assert policy.key_generation(3) == 0  # a production policy never re-keys a retry


def test_the_cli_refuses_an_unsafe_policy_file_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"decisions": {"unknown_outcome": "retry"}}))
    fixture = str(FIXTURES / "hold_timeout_after_commit.yaml")
    db = str(tmp_path / "r.sqlite")
    assert main(["run", fixture, "--db", db, "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: policy ") and "unknown_outcome: retry" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_naive_is_a_simulation_outside_the_production_type() -> None:
    with pytest.raises(ConfigError, match=r"runner\.core\.sim\.naive_policy"):
        Policy.named("naive")
    naive = naive_policy()
    assert isinstance(naive, NaivePolicy)
    assert naive.decision_for("unknown_outcome") is Decision.RETRY
    assert naive.key_generation(2) == 2  # the bug it exists to show: a fresh key per retry
    stored = naive.model_dump(mode="json")
    as_a_file = {key: value for key, value in stored.items() if key != "simulation"}
    with pytest.raises(ValidationError, match="unknown_outcome: retry"):
        Policy.model_validate(as_a_file)  # its table would never pass as a policy file
    assert stored_policy(stored) == naive  # a stored naive run replays under itself
    assert stored_policy(Policy().model_dump(mode="json")) == Policy()


def test_policies_stored_before_the_move_still_resume_and_replay() -> None:
    """Headers written while `fresh_key_on_retry` was a `Policy` field load as what they were."""
    default = Policy().model_dump(mode="json")
    assert stored_policy({**default, "fresh_key_on_retry": False}) == Policy()
    naive = {**naive_policy().model_dump(mode="json"), "fresh_key_on_retry": True}
    del naive["simulation"]
    assert stored_policy(naive) == naive_policy()


def test_a_stored_policy_that_breaks_the_rules_is_one_config_error() -> None:
    stored = {**Policy().model_dump(mode="json"), "max_retries": 50}
    with pytest.raises(ConfigError, match="stored policy does not load: max_retries"):
        stored_policy(stored)
    with pytest.raises(ConfigError, match="simulation policy 'other'"):
        stored_policy({**stored, "simulation": "other"})
