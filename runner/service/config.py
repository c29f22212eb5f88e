"""The service's configuration file: API keys (each a tenant, a principal and roles) and limits.

A key is given as `key` (the secret itself) or `key_sha256` (its SHA-256, hex). Keys are compared
by their hashes in constant time and never logged or echoed: a config error names a key by its
position in the list only.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..base._documents import DocumentProblem, load_yaml
from ..base.errors import ConfigError
from ..core.budget import Limits

Role = Literal["submit", "read", "approve"]
Provider = Literal["openai", "anthropic"]


class ProviderConfig(BaseModel):
    """A model provider live runs may use. The key is never in the config: `api_key_env` names
    the environment variable the service process (or a `runner worker`) reads it from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, max_length=2000)
    """The endpoint (None: the provider's own); an OpenAI-compatible server's ends in `/v1`."""
    api_key_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    models: list[str] = Field(min_length=1)
    """The model names a run may ask for (`openai:NAME`)."""


class LiveConfig(BaseModel):
    """What live-model runs (`{"task", "tools", "model", "budget"}`) may use.

    Their tools are the travel demo world's, played as the fixture `world` scripts them (its
    tool outcomes, simulated supplier, constraints, approval rules and required evidence); the
    model is live and the run keeps real time.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    world: str = Field(min_length=1)
    """A bundled or configured fixture whose world answers the live model's tool calls."""
    tools: list[str] = Field(min_length=1)
    """The tools a run may be offered (each in the world fixture's tools)."""
    providers: dict[Provider, ProviderConfig] = Field(min_length=1)
    max_budget: Limits = Field(default_factory=Limits)
    """The ceiling of a run's budget; a field the request leaves out is this one."""


class PrincipalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    scopes: list[str] = Field(default_factory=list)


class ApiKey(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str | None = Field(default=None, min_length=8, repr=False)
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$", repr=False)
    tenant: str = Field(min_length=1, max_length=200)
    principal: PrincipalConfig
    roles: list[Role] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_secret(self) -> ApiKey:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key and key_sha256")
        return self

    @property
    def digest(self) -> bytes:
        if self.key_sha256 is not None:
            return bytes.fromhex(self.key_sha256)
        assert self.key is not None
        return hashlib.sha256(self.key.encode()).digest()


class ServiceConfig(BaseModel):
    """What `runner serve --config FILE` reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_keys: list[ApiKey] = Field(min_length=1)
    fixtures: list[Path] = Field(default_factory=list)
    """Fixture files or folders runs may name besides the bundled ones."""
    approval_secret: str | None = Field(default=None, min_length=32, repr=False)
    """The confirm tokens' HMAC key (default: `$RUNNER_APPROVAL_SECRET`)."""
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    """Request bodies over this are refused with 413."""
    workers: int = Field(default=4, ge=1, le=64)
    """Runs driven at once in this process (SQLite); more wait in its queue."""
    max_queued: int = Field(default=1000, ge=1)
    """Runs waiting to start; a submit beyond this is refused with 429."""
    pace_s: float = Field(default=0.0, ge=0.0, le=10.0)
    """Real seconds a scripted run pauses before each transition it records (0: none). Scripted
    runs keep virtual time and end in milliseconds; a pace lets a person (or a test) watch one
    go and cancel it midway."""
    live: LiveConfig | None = None
    """Live-model runs (None: this service refuses them)."""

    @model_validator(mode="after")
    def _keys_differ(self) -> ServiceConfig:
        """One key, one caller: a key listed twice would silently take the last entry's tenant
        and roles."""
        seen: set[bytes] = set()
        for index, key in enumerate(self.api_keys):
            if key.digest in seen:
                raise ValueError(f"api_keys[{index}] repeats an earlier key (each key once)")
            seen.add(key.digest)
        return self

    @classmethod
    def load(cls, path: Path) -> ServiceConfig:
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, DocumentProblem) as exc:
            raise ConfigError(f"service config {path}: {exc}") from exc
        try:
            config = cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(f"service config {path}: {where}: {first['msg']}") from None
        base = path.resolve().parent
        return config.model_copy(
            update={"fixtures": [p if p.is_absolute() else base / p for p in config.fixtures]}
        )

    def key_for(self, presented: str) -> ApiKey | None:
        """The configured key `presented` is, compared in constant time (None: no such key)."""
        digest = hashlib.sha256(presented.encode()).digest()
        found = None
        for candidate in self.api_keys:
            if hmac.compare_digest(candidate.digest, digest):
                found = candidate
        return found
