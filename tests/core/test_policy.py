import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.base.errors import ConfigError
from runner.core.machine import Decision
from runner.core.observations import ToolRateLimited
from runner.core.policy import Backoff, Policy, backoff_delay, parse_retry_after, retry_delay

NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2", 2.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),  # IMF-fixdate
        ("Wednesday, 21-Oct-15 07:29:00 GMT", 60.0),  # obsolete RFC 850
        ("Wed Oct 21 07:28:10 2015", 10.0),  # obsolete asctime (no zone: GMT)
        ("Wed, 21 Oct 2015 07:00:00 GMT", 0.0),  # in the past: no wait
        ("Tue, 20 Oct 2015 07:28:00 GMT", 0.0),
    ],
)
def test_retry_after_both_forms(value: str, expected: float) -> None:
    assert parse_retry_after(value, NOW) == pytest.approx(expected)


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5", "2e3", "Wed, 99 Oct 2015", "٣"])
def test_retry_after_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


def test_backoff_is_full_jitter_within_bounds() -> None:
    backoff = Backoff(initial_s=0.5, multiplier=2, max_s=4)
    rng = random.Random(7)
    for retry in range(1, 8):
        ceiling = min(4.0, 0.5 * 2 ** (retry - 1))
        delays = [backoff_delay(retry, rng, backoff) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spans the range
        assert min(delays) < ceiling * 0.2


def test_backoff_is_reproducible_from_the_seed() -> None:
    backoff = Backoff()
    a = [backoff_delay(n, random.Random(42), backoff) for n in range(1, 5)]
    b = [backoff_delay(n, random.Random(42), backoff) for n in range(1, 5)]
    assert a == b


def test_retry_delay_prefers_retry_after_then_falls_back() -> None:
    policy = Policy()
    honoured = ToolRateLimited(call_id="c", tool="t", retry_after="3")
    garbage = ToolRateLimited(call_id="c", tool="t", retry_after="later")
    assert retry_delay(policy, honoured, 1, random.Random(0), NOW) == 3.0
    fallback = retry_delay(policy, garbage, 1, random.Random(0), NOW)
    assert 0 <= fallback <= policy.backoff.initial_s


def test_default_table_sends_denials_to_a_person() -> None:
    policy = Policy()
    assert policy.decision_for("access_denied") is Decision.ESCALATE
    assert policy.decision_for("transient") is Decision.RETRY
    assert policy.decision_for("permanent") is Decision.BACK_TO_MODEL


def test_policy_file_errors_are_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("max_retries: -1\ndecisions: {ok: explode}\n")
    with pytest.raises(ConfigError) as info:
        Policy.load(path)
    message = str(info.value)
    assert "max_retries" in message and "decisions.ok" in message and "\n" not in message


def test_policy_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("name: cautious\nmax_retries: 0\n")
    policy = Policy.load(path)
    assert policy.name == "cautious" and policy.max_retries == 0


def test_a_policy_file_changes_only_the_classes_it_lists(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("name: cautious\ndecisions: {permanent: abstain}\n")
    policy = Policy.load(path)
    assert policy.decision_for("permanent") is Decision.ABSTAIN
    assert policy.decision_for("access_denied") is Decision.ESCALATE  # the default stands
    assert policy.decision_for("rate_limited") is Decision.RETRY
    assert policy.decision_for("ok") is Decision.CONTINUE
