"""What a model request costs in money: a run's price (resolved once, recorded in its header) and
the price tables it is resolved from.

A run's `ModelPrice` is fixed when it starts: the spec's own, else the adapter's declared `price`
(the scripted model has a configured one, so fixtures are deterministic), else the engine's
`PriceTable` (by default the maintained genai-prices table, the `prices` extra). The price is kept
in the run's header, so a replay or a resume prices every recorded request exactly as the run did,
whatever the table says by then. Each request's cost is its provider-reported (or, where none can
be believed, estimated) tokens times that price.
"""

from __future__ import annotations

import functools
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal
from typing import Final, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..base.errors import ConfigError
from .base import TokenUsage
from .identity import ModelIdentity

PER: Final = Decimal(1_000_000)
PRICES_EXTRA: Final = "pip install 'runner-fsm[prices]'"
MAX_USD_PER_MTOK: Final = 1_000_000


class ModelPrice(BaseModel):
    """US dollars per million tokens, in and out: what one model's requests cost."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # At most a dollar a token: a larger rate is a mistake, and one near the float limit would
    # make a request's cost overflow to infinity (no JSON number: the run could not be stored).
    # Strict, as every number of a budget: "1e3" was read as 1000 and true as 1.
    input_usd_per_mtok: float = Field(ge=0, le=MAX_USD_PER_MTOK, allow_inf_nan=False, strict=True)
    output_usd_per_mtok: float = Field(ge=0, le=MAX_USD_PER_MTOK, allow_inf_nan=False, strict=True)
    source: str = "configured"
    """Where the price came from: `configured`, or `genai-prices <version>` and its model id."""

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """The exact cost of a request with these token counts."""
        rate_in, rate_out = _rate(self.input_usd_per_mtok), _rate(self.output_usd_per_mtok)
        return (input_tokens * rate_in + output_tokens * rate_out) / PER

    def cost_of(self, usage: TokenUsage) -> Decimal:
        return self.cost(usage.input_tokens, usage.output_tokens)

    def output_tokens_for(self, amount: Decimal) -> int | None:
        """The most output tokens `amount` pays for (negative when it is negative); None when
        output is free."""
        rate = _rate(self.output_usd_per_mtok)
        if rate == 0:
            return None
        return int((amount * PER / rate).to_integral_value(rounding=ROUND_FLOOR))


@functools.lru_cache(maxsize=256)
def _rate(per_mtok: float) -> Decimal:
    """A rate as the exact decimal its shortest repr says (a run prices three requests a step
    at one price: made once, not three times a step)."""
    return Decimal(str(per_mtok))


def usd(amount: Decimal) -> float:
    """A cost as the records keep it (JSON numbers)."""
    return float(amount)


class PriceTable(Protocol):
    """Where an engine finds the price of a model a run is driven by."""

    def price_of(self, model: ModelIdentity, at: datetime) -> ModelPrice | None:
        """The model's price at `at` (the run's start), or None when the table does not know it."""
        ...


class FixedPrices:
    """One configured price for every model (a test, or a private deployment)."""

    def __init__(self, price: ModelPrice) -> None:
        self.price = price

    def price_of(self, model: ModelIdentity, at: datetime) -> ModelPrice | None:
        return self.price


class NoPrices:
    """No table: runs are not priced (unless the spec or the adapter gives a price)."""

    def price_of(self, model: ModelIdentity, at: datetime) -> ModelPrice | None:
        return None


class GenaiPrices:
    """The maintained price table of the `genai-prices` package (the `prices` extra).

    The bundled snapshot is read, never fetched: a price lookup makes no network call. The rates
    are the model's base input and output prices at the run's start (tiers, cached-input and
    per-request prices are not separately applied).
    """

    def __init__(self) -> None:
        try:
            import genai_prices  # noqa: PLC0415  # an optional extra, imported when asked for
        except ImportError as exc:
            raise ConfigError(
                f"pricing from genai-prices needs the package: {PRICES_EXTRA} "
                "(or give a configured price: RunSpec.price or Engine(prices=FixedPrices(...)))"
            ) from exc
        self._prices = genai_prices
        self.version: str = genai_prices.__version__

    def price_of(self, model: ModelIdentity, at: datetime) -> ModelPrice | None:
        try:  # one token: the table resolves the model and its prices at `at`, under any tier
            found = self._prices.calc_price(
                self._prices.Usage(input_tokens=1), model.name, provider_id=model.provider,
                genai_request_timestamp=at,
            )  # fmt: skip
        except LookupError:
            return None
        rates = found.model_price
        return ModelPrice(
            input_usd_per_mtok=_base_rate(getattr(rates, "input_mtok", None)),
            output_usd_per_mtok=_base_rate(getattr(rates, "output_mtok", None)),
            source=f"genai-prices {self._prices.__version__} {found.model.id}",
        )


def _base_rate(rate: object) -> float:
    """A per-million rate as the table gives it: a number, or tiered (its base, the price below
    the first tier: a million tokens would cross a 200k tier), or none (0)."""
    base = getattr(rate, "base", rate)
    return float(base) if isinstance(base, Decimal | int | float) else 0.0


def unpriced_advice(table: PriceTable | None) -> str:
    """What to do for a run that needs a price (a cost bound) and has none, by the table its
    price was looked up in (`table`, else the default)."""
    given = (
        "give the run one: the fixture's `price:` (RunSpec.price) or "
        "Engine(prices=FixedPrices(...))"
    )
    found = table if table is not None else default_prices()
    if isinstance(found, GenaiPrices):
        return f"the price table (genai-prices {found.version}) does not list it; {given}"
    if isinstance(found, NoPrices) and table is None:
        return f"no price table is installed; {given}, or install the table ({PRICES_EXTRA})"
    if isinstance(found, NoPrices):
        return f"the engine has no price table (Engine(prices=NoPrices())); {given}"
    return f"the engine's price table ({type(found).__name__}) does not list it; {given}"


@functools.cache
def default_prices() -> PriceTable:
    """genai-prices when installed, else no table (an unpriced run then has no cost)."""
    try:
        return GenaiPrices()
    except ConfigError:
        return NoPrices()
