"""Confirm tokens: genuine ones verify; anything forged, expired or bound elsewhere is refused."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.base.errors import (
    ApprovalRefused,
    ConfigError,
    TokenExpired,
    TokenForged,
    TokenMismatch,
)
from runner.core.confirm import (
    ApprovalSecret,
    TokenClaims,
    issue_token,
    policy_digest,
    read_token,
    verify_token,
)

T0 = datetime(2027, 3, 1, 9, tzinfo=UTC)
SECRET = ApprovalSecret("s" * 32)
CLAIMS = TokenClaims(
    token_id="tok-1",
    run_id="run-a",
    operation_key="optiverse:hold_room:abc",
    params_hash="h" * 64,
    tenant="optiverse",
    approver="alice",
    policy_digest="p" * 64,
    expires_at=T0 + timedelta(minutes=30),
)
BOUND = {
    "run_id": "run-a",
    "operation_key": "optiverse:hold_room:abc",
    "params_hash": "h" * 64,
    "tenant": "optiverse",
    "policy_digest": "p" * 64,
}


def test_a_genuine_token_verifies_to_its_claims() -> None:
    token = issue_token(SECRET, CLAIMS)
    assert verify_token(SECRET, token, now=T0, **BOUND) == CLAIMS


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        ("run_id", "other_run"),
        ("operation_key", "other_operation"),
        ("params_hash", "other_parameters"),
        ("tenant", "other_tenant"),
        ("policy_digest", "other_policy"),
    ],
)
def test_a_token_for_anything_else_is_refused_naming_the_binding(field: str, problem: str) -> None:
    token = issue_token(SECRET, CLAIMS)
    offered = {**BOUND, field: "something-else"}
    with pytest.raises(TokenMismatch) as caught:
        verify_token(SECRET, token, now=T0, **offered)
    assert caught.value.problem == problem


def test_an_expired_token_is_refused() -> None:
    token = issue_token(SECRET, CLAIMS)
    with pytest.raises(TokenExpired):
        verify_token(SECRET, token, now=CLAIMS.expires_at, **BOUND)


def test_a_token_signed_with_another_secret_is_forged() -> None:
    token = issue_token(ApprovalSecret("x" * 32), CLAIMS)
    with pytest.raises(TokenForged):
        verify_token(SECRET, token, now=T0, **BOUND)


def test_claims_edited_after_signing_are_forged() -> None:
    """Changing the expiry (or anything) in the body breaks the signature."""
    longer = issue_token(SECRET, dataclasses.replace(CLAIMS, expires_at=T0 + timedelta(days=9)))
    original = issue_token(SECRET, CLAIMS)
    spliced = ".".join([*longer.split(".")[:2], original.split(".")[2]])
    with pytest.raises(TokenForged):
        read_token(SECRET, spliced)


@settings(max_examples=60)
@given(st.text(max_size=200))
def test_arbitrary_text_is_never_a_token(text: str) -> None:
    with pytest.raises(TokenForged):
        read_token(SECRET, text)


def test_refusals_are_runner_errors() -> None:
    assert issubclass(TokenForged, ApprovalRefused)


def test_the_secret_is_never_printed_and_must_be_long_enough() -> None:
    assert "s" * 32 not in repr(SECRET)
    with pytest.raises(ConfigError):
        ApprovalSecret("short")
    with pytest.raises(ConfigError, match="RUNNER_APPROVAL_SECRET"):
        ApprovalSecret.from_env({})
    assert ApprovalSecret.from_env({"RUNNER_APPROVAL_SECRET": "k" * 20}).mac(b"x")


def test_the_policy_digest_changes_with_the_policy_or_the_contract() -> None:
    base = policy_digest({"name": "default"}, {"name": "hold_room"})
    assert base == policy_digest({"name": "default"}, {"name": "hold_room"})
    assert base != policy_digest({"name": "cautious"}, {"name": "hold_room"})
    assert base != policy_digest({"name": "default"}, {"name": "hold_room", "scope": "x"})


def test_a_secret_of_bytes_that_are_not_utf8_is_those_bytes() -> None:
    """`os.environ` gives bytes that are not UTF-8 as escapes: the key is the bytes that were set
    (it was a UnicodeEncodeError traceback); a lone surrogate made in code is a ConfigError."""
    raw = b"\xff\xfe" + b"k" * 32
    from_env = ApprovalSecret(raw.decode("utf-8", "surrogateescape"))
    token = issue_token(from_env, CLAIMS)
    assert verify_token(ApprovalSecret(raw), token, **BOUND, now=T0) == CLAIMS
    with pytest.raises(ConfigError, match="lone surrogate"):
        ApprovalSecret("\ud800" + "k" * 32)
