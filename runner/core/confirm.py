"""Confirm tokens: an approval bound to the exact payload, tenant, run, approver, policy and expiry.

A token is `rct1.<claims>.<mac>`: the claims as canonical JSON (base64url), and an HMAC-SHA256 of
them under the runtime's secret. The secret comes from the runtime configuration (`ApprovalSecret`,
e.g. `RUNNER_APPROVAL_SECRET`), never from the store and never from the model: the model is never
shown a token and cannot make one. The store keeps tokens and their uses, but a token written into
the store by anyone without the secret does not verify (`TokenForged`).

`verify_token` checks, in order: the signature (forged), then every binding (`TokenMismatch` naming
which: other run, operation, parameters, tenant, policy), then the expiry. Reuse is the store's to
refuse (`ApprovalLedger.use_token`), since only it knows who used a token before.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Final

from ..base.errors import ConfigError, TokenExpired, TokenForged, TokenMismatch

TOKEN_PREFIX: Final = "rct1"
SECRET_ENV: Final = "RUNNER_APPROVAL_SECRET"
MIN_SECRET_BYTES: Final = 16


class ApprovalSecret:
    """The HMAC key for confirm tokens. Its value is never printed, stored or logged."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes | str) -> None:
        try:  # an environment's bytes that are not UTF-8 come as escapes: their bytes are the key
            raw = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
        except UnicodeEncodeError:
            raise ConfigError(
                "the approval secret holds a lone surrogate: it is not text (give it as bytes)"
            ) from None
        if len(raw) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"the approval secret has {len(raw)} bytes; it needs at least {MIN_SECRET_BYTES}"
            )
        self._key = raw

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApprovalSecret:
        """The secret in `RUNNER_APPROVAL_SECRET`; `ConfigError` when it is unset or short."""
        value = (environ if environ is not None else os.environ).get(SECRET_ENV)
        if not value:
            raise ConfigError(f"{SECRET_ENV} is not set: approvals need the runtime's secret")
        return cls(value)

    def mac(self, message: bytes) -> bytes:
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "ApprovalSecret(<redacted>)"


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenClaims:
    """What a confirm token binds."""

    token_id: str
    run_id: str
    """The run whose proposal was approved."""
    operation_key: str
    params_hash: str
    tenant: str
    approver: str
    policy_digest: str
    expires_at: datetime

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["expires_at"] = self.expires_at.isoformat()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TokenClaims:
        fields = dict(data)
        fields["expires_at"] = datetime.fromisoformat(str(fields["expires_at"]))
        return cls(**fields)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(claims: TokenClaims) -> bytes:
    return json.dumps(claims.to_json(), sort_keys=True, separators=(",", ":")).encode()


def issue_token(secret: ApprovalSecret, claims: TokenClaims) -> str:
    """Sign `claims` under `secret`."""
    body = _b64(_canonical(claims))
    mac = _b64(secret.mac(f"{TOKEN_PREFIX}.{body}".encode()))
    return f"{TOKEN_PREFIX}.{body}.{mac}"


def read_token(secret: ApprovalSecret, token: str) -> TokenClaims:
    """The claims of a genuine token; `TokenForged` for anything `secret` did not sign."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        raise TokenForged("forged", "not a confirm token")
    try:
        given = _unb64(parts[2])
    except (binascii.Error, ValueError) as exc:
        raise TokenForged("forged", "its signature is not base64url") from exc
    expected = secret.mac(f"{TOKEN_PREFIX}.{parts[1]}".encode())
    if not hmac.compare_digest(given, expected):
        raise TokenForged("forged", "its signature does not verify under the runtime's secret")
    try:
        claims = TokenClaims.from_json(json.loads(_unb64(parts[1])))
    except (ValueError, TypeError, KeyError) as exc:  # signed by us, so only a bug gets here
        raise TokenForged("forged", f"its claims do not read back ({exc})") from exc
    if _canonical(claims) != _unb64(parts[1]):
        raise TokenForged("forged", "its claims are not in canonical form")
    return claims


def verify_token(
    secret: ApprovalSecret,
    token: str,
    *,
    run_id: str,
    operation_key: str,
    params_hash: str,
    tenant: str,
    policy_digest: str,
    now: datetime,
) -> TokenClaims:
    """The claims of `token` if it is genuine, unexpired and bound to exactly this payload.

    Raises `TokenForged`, `TokenMismatch` (its `problem` names the binding) or `TokenExpired`.
    """
    claims = read_token(secret, token)
    bindings = (
        ("other_run", "run", claims.run_id, run_id),
        ("other_operation", "operation", claims.operation_key, operation_key),
        ("other_parameters", "parameters", claims.params_hash, params_hash),
        ("other_tenant", "tenant", claims.tenant, tenant),
        ("other_policy", "policy", claims.policy_digest, policy_digest),
    )
    for problem, what, bound, offered in bindings:
        if bound != offered:
            raise TokenMismatch(
                problem, f"the token is bound to {what} {bound[:16]!r}, not {offered[:16]!r}"
            )
    if now >= claims.expires_at:
        raise TokenExpired(
            "expired", f"the token expired at {claims.expires_at.isoformat()} (now {now})"
        )
    return claims


def policy_digest(policy: Mapping[str, Any], contract: Mapping[str, Any]) -> str:
    """The version of what an approval was given under: the run's policy and the write's contract.

    A policy or contract changed while the run waited gives another digest, and the token for
    the old one is refused (`other_policy`).
    """
    text = json.dumps(
        {"policy": policy, "contract": contract}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()
