"""Live-model runs in the service: a request checked against the config's `live` section, made
into a run of the service's world (the travel demo's) planned by a live model.

A live run is stored as a fixture run whose script is never read: the `world` fixture gives the
tools' outcomes (its simulated supplier, constraints, approval rules and required evidence); the
request gives the task, the tools (among those configured) and the budget (under the configured
ceiling); the API key gives the tenant and the principal; the model is built, per run, from the
configured provider, its key read from the environment variable the config names. So the run
replays, grades and resumes from its store like any fixture run, and keeps real time (a live
model is in the loop: `run_fixture` puts it on the system clock).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..base.clock import Clock, SystemClock
from ..base.errors import ConfigError
from ..core.budget import Limits
from ..harness.fixtures import Fixture
from ..models.base import ModelAdapter
from ..models.identity import ModelIdentity, redact_url
from ..models.pricing import PRICES_EXTRA, GenaiPrices, default_prices
from ..record.trace import RunHeader
from ..tools.contracts import ContractSet
from .config import ApiKey, LiveConfig, ProviderConfig
from .errors import ApiError

_log = structlog.get_logger("runner.service")

LIVE_RUN_NAME = "live"
"""The name live runs are stored (and listed) under."""


class LiveBudget(BaseModel):
    """A live run's budget: each field at most the service's ceiling; one left out is the
    ceiling's (see `runner.core.budget.Limits` for what each bounds). Strict: a count is a JSON
    integer, seconds and dollars a number; `"10"`, `true` or `1e5` for a count are refused,
    never read as something the caller may not have meant."""

    model_config = ConfigDict(extra="forbid")
    max_attempts: int | None = Field(default=None, ge=1, strict=True)
    max_model_steps: int | None = Field(default=None, ge=1, strict=True)
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    max_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)


class LiveRun(BaseModel):
    """A run with a live model (`openai:NAME` or `anthropic:NAME`, as the service offers) on
    tools the service's config offers; tenant and principal are the API key's."""

    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=20_000, strict=True)
    tools: list[str] = Field(min_length=1, max_length=200, strict=True)
    model: str = Field(pattern=r"^(openai|anthropic):.+$", max_length=200, strict=True)
    budget: LiveBudget = Field(default_factory=LiveBudget)


class LiveRuns:
    """The config's `live` section, checked once at start; makes requests into runs."""

    def __init__(
        self,
        config: LiveConfig | None,
        fixtures: Mapping[str, Fixture],
        contracts: ContractSet,
        *,
        needs_keys: bool,
        clock: Clock | None = None,
    ) -> None:
        """`needs_keys`: this process builds the models (the SQLite service): a run of a provider
        whose key is not in its environment, or whose SDK is not installed, is refused (409),
        and the start logs a warning."""
        self.config = config
        self.needs_keys = needs_keys
        self.clock: Clock = clock or SystemClock()
        self.no_sdk: set[str] = set()
        self.world: Fixture | None = None
        if config is None:
            return
        world = fixtures.get(config.world)
        if world is None:
            raise ConfigError(f"service config: live.world: no fixture named {config.world!r}")
        missing = [tool for tool in config.tools if tool not in world.tools]
        if missing:
            raise ConfigError(
                f"service config: live.tools: not in the world fixture {world.name!r}: "
                + ", ".join(missing)
            )
        unknown = [tool for tool in config.tools if tool not in contracts]
        if unknown:
            raise ConfigError("service config: live.tools: no contract for " + ", ".join(unknown))
        self.no_sdk = {p for p in config.providers if needs_keys and not sdk_installed(p)}
        for provider in sorted(self.no_sdk):
            _log.warning(
                "its SDK is not installed: its live runs are refused (409) until it is",
                provider=provider,
                install=f"pip install 'runner-fsm[service,{provider}]'",
            )
        for provider, settings in config.providers.items():
            if needs_keys and not os.environ.get(settings.api_key_env):
                _log.warning(
                    "no API key: its live runs are refused (409) until it is set",
                    provider=provider,
                    variable=settings.api_key_env,
                )
        self.world = world

    def fixture(self, key: ApiKey, request: LiveRun) -> Fixture:
        """The run `request` asks for, as a fixture of the world; 422 for anything the config
        does not allow."""
        config, world = self.config, self.world
        if config is None or world is None:
            raise ApiError(422, "live_runs_unavailable", "this service has no live models")
        if not request.task.strip():
            raise ApiError(422, "empty_task", "task: give the task in words")
        self._check_model(config, request.model)
        provider = request.model.partition(":")[0]
        settings = config.providers[provider]  # type: ignore[index]
        if provider in self.no_sdk:
            raise ApiError(
                409,
                "no_model_sdk",
                f"model: this service cannot build {provider} models: its SDK is not installed "
                f"(pip install 'runner-fsm[service,{provider}]' where the service runs)",
            )
        if self.needs_keys and not os.environ.get(settings.api_key_env):
            raise ApiError(
                409,
                "no_model_key",
                f"model: this service has no API key for it (${settings.api_key_env} is not set)",
            )
        tools = request.tools
        unknown = [tool for tool in tools if tool not in config.tools]
        if unknown:
            offered = ", ".join(config.tools)
            raise ApiError(
                422, "unknown_tool", f"tools: not offered here: {', '.join(unknown)} ({offered})"
            )
        if len(set(tools)) != len(tools):
            raise ApiError(422, "duplicate_tool", "tools: a tool is named twice")
        limits = budget(config.max_budget, request.budget.model_dump(exclude_none=True))
        if limits.max_cost_usd is not None:
            asked = request.budget.max_cost_usd is not None
            self._check_priced(request.model, settings, limits.max_cost_usd, asked=asked)
        document: dict[str, Any] = world.model_dump(mode="json", exclude_unset=True)
        document.update(
            name=LIVE_RUN_NAME,
            description=f"a live run of {request.model} in the world of {world.name}",
            task=request.task,
            tenant=key.tenant,  # from the key, never the body
            principal={"id": key.principal.id, "scopes": list(key.principal.scopes)},
            budget=limits.model_dump(mode="json"),
            tools=tools,
            environment={t: o for t, o in document.get("environment", {}).items() if t in tools},
        )
        for scripted_only in ("expect", "price", "prohibited"):
            document.pop(scripted_only, None)  # the script's, not a live model's
        return Fixture.model_validate(document)

    def _check_priced(
        self, spec: str, settings: ProviderConfig, cap: float, *, asked: bool
    ) -> None:
        """A cost bound needs the model's price (the engine refuses to start an unpriced run
        with one): looked up as the engine will, in the default price table, and refused now
        rather than accepted to fail at its start (or be retried by every worker)."""
        provider, _, name = spec.partition(":")
        identity = ModelIdentity(
            provider=provider, name=name, base_url=redact_url(settings.base_url)
        )
        table = default_prices()
        if table.price_of(identity, self.clock.now()) is None:
            # Installed, the table does not list the model; not installed, the host needs it.
            found = (
                f"the price table (genai-prices {table.version}) does not list it"
                if isinstance(table, GenaiPrices)
                else f"this service has no price table (its host needs {PRICES_EXTRA})"
            )
            raise ApiError(
                422,
                "unpriced_model",
                f"budget.max_cost_usd: {cap} needs a price for {spec}, and {found}: "
                + (
                    "leave max_cost_usd out, or use a model it prices"
                    if asked
                    else "this service's max_budget sets it; use a model the table prices"
                ),
            )

    @staticmethod
    def _check_model(config: LiveConfig, spec: str) -> None:
        provider, _, name = spec.partition(":")
        settings = config.providers.get(provider)  # type: ignore[call-overload]
        if settings is None or name not in settings.models:
            offered = ", ".join(f"{p}:{m}" for p, s in config.providers.items() for m in s.models)
            raise ApiError(422, "unknown_model", f"model: {spec!r} is not offered ({offered})")

    def continuing(self, header: RunHeader | None) -> ModelAdapter | None:
        """The live model a stored run was planned by (None: scripted); see `continuing_model`."""
        return continuing_model(self.config, header)

    def model(self, spec: str) -> ModelAdapter:
        """A new adapter for `spec` (one per run: its HTTP client belongs to the run's loop)."""
        assert self.config is not None
        return model_for(self.config, spec)


def model_for(config: LiveConfig, spec: str) -> ModelAdapter:
    """A new adapter for `spec` (`openai:NAME`) as `config` offers it; `ConfigError` when it
    does not (a worker whose config lacks what the service that queued the run offered)."""
    provider, _, name = spec.partition(":")
    settings = config.providers.get(provider)  # type: ignore[call-overload]
    if settings is None or name not in settings.models:
        raise ConfigError(f"the model {spec} is not offered by this config's live.providers")
    return build_model(provider, name, settings)


def continuing_model(config: LiveConfig | None, header: RunHeader | None) -> ModelAdapter | None:
    """The live model a stored run was planned by, rebuilt to resume or continue it (None: it
    was scripted). A provider or model no longer configured is refused, never replaced."""
    identity = header.model if header is not None else None
    if identity is None or not identity.live:
        return None
    spec = f"{identity.provider}:{identity.name}"
    if config is None:
        raise ConfigError(f"the run was planned by {spec}: give the config that offers it")
    return model_for(config, spec)


LIVE_MODEL = "live_model"
"""The key a queued live run's document carries its model under, beside the fixture's fields."""


def live_document(fixture: Fixture, model: str) -> dict[str, Any]:
    """A queued live run: the fixture it plays, and the model (`openai:NAME`) a worker builds."""
    return {**fixture.model_dump(mode="json", exclude_unset=True), LIVE_MODEL: model}


def split_live(document: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A queued document's fixture, and its live model (None: a scripted run)."""
    model = document.get(LIVE_MODEL)
    fixture = {key: value for key, value in document.items() if key != LIVE_MODEL}
    return fixture, model if isinstance(model, str) else None


def budget(ceiling: Limits, asked: Mapping[str, float | int]) -> Limits:
    """The run's budget: `asked`, each field at most `ceiling`'s; the rest `ceiling`'s."""
    try:
        limits = Limits.model_validate({**ceiling.model_dump(), **asked})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ApiError(422, "invalid_budget", f"budget.{where}: {first['msg']}") from None
    for name in asked:
        cap, got = getattr(ceiling, name), getattr(limits, name)
        if cap is not None and got > cap:
            raise ApiError(
                422, "over_budget_ceiling", f"budget.{name}: {got} is over this service's {cap}"
            )
    return limits


def sdk_installed(provider: str) -> bool:
    """Whether the provider's SDK (the `openai` or `anthropic` extra) can be imported here;
    looked up, not imported (a service that never runs that provider pays nothing for it)."""
    try:
        return importlib.util.find_spec(provider) is not None
    except (ImportError, ValueError):  # a broken install, or one blocked in sys.modules
        return False


def build_model(provider: str, name: str, settings: ProviderConfig) -> ModelAdapter:
    """The provider's adapter, its key read from the environment variable the config names."""
    key = os.environ.get(settings.api_key_env)
    if not key:
        raise ConfigError(f"the environment variable {settings.api_key_env} is not set")
    if provider == "openai":
        from ..models.openai import OpenAIChatModel  # noqa: PLC0415  # optional extra

        return OpenAIChatModel(name, base_url=settings.base_url, api_key=key)
    from ..models.anthropic import AnthropicModel  # noqa: PLC0415  # optional extra

    return AnthropicModel(name, base_url=settings.base_url, api_key=key)
