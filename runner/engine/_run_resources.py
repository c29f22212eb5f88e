"""What a run is priced at, and the retriever that narrows a large tool catalogue for it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

from ..base.clock import Clock
from ..base.errors import ConfigError
from ..models.base import ModelAdapter, ToolSpec
from ..models.identity import identity_of
from ..models.pricing import PRICES_EXTRA, ModelPrice, PriceTable, default_prices
from ..record.spec import RunSpec
from ..tools.retrieval import Retriever, RetrieverFactory

Indexes = dict[tuple[str, tuple[str, ...]], Retriever]
"""Retrievers built so far, by retriever and catalogue: one index per catalogue."""


def priced(spec: RunSpec, model: ModelAdapter, prices: PriceTable | None, clock: Clock) -> RunSpec:
    """`spec` with the run's prices, both fixed when it starts: the model's (its own, the
    adapter's declared one, or the table's: `prices`, else the default table) and, for an
    adapter with a fallback (`fallback`, the model `_planning._ask` switches to), the fallback's,
    found the same way (`spec.fallback_price` first).

    An unpriced model is unpriced whichever it is: with `max_cost_usd` the run is refused (a
    ConfigError, before it is stored: an unpriced primary by `check_start`), else its requests
    have no cost (a run that never reaches its fallback is still priced). Raises `ConfigError`."""
    at = clock.now()
    price = spec.price if spec.price is not None else _price_of(model, prices, at)
    if price is None:  # an unpriced run: what its fallback costs does not matter
        return spec
    fallback: object = getattr(model, "fallback", None)
    fallback_price = spec.fallback_price
    if fallback is not None and fallback_price is None:
        fallback_price = _price_of(fallback, prices, at)
        cap = spec.limits.max_cost_usd
        if fallback_price is None and cap is not None:
            named = identity_of(fallback)
            raise ConfigError(
                f"max_cost_usd {cap} needs a price for the fallback model "
                f"{named.provider}:{named.name}, and none was found: give "
                "RunSpec.fallback_price or Engine(prices=...), or install the price table "
                f"({PRICES_EXTRA})"
            )
    if (price, fallback_price) == (spec.price, spec.fallback_price):
        return spec
    return dataclasses.replace(spec, price=price, fallback_price=fallback_price)


def _price_of(model: object, prices: PriceTable | None, at: datetime) -> ModelPrice | None:
    """The adapter's declared price, else the table's for its identity."""
    declared = getattr(model, "price", None)
    if isinstance(declared, ModelPrice):
        return declared
    table = prices if prices is not None else default_prices()
    return table.price_of(identity_of(model), at)


def retriever_for(
    spec: RunSpec,
    offered: tuple[ToolSpec, ...],
    retrievers: Mapping[str, RetrieverFactory],
    indexes: Indexes,
) -> Retriever | None:
    """The retriever for a run whose catalogue is larger than its `max_offered`, built once
    per catalogue and kept in `indexes` (None: the catalogue is offered whole)."""
    retrieval = spec.tool_retrieval
    if retrieval is None or len(offered) <= retrieval.max_offered:
        return None
    key = (retrieval.retriever, tuple(tool.name for tool in offered))
    built = indexes.get(key)
    if built is None:
        factory = retrievers.get(retrieval.retriever)
        if factory is None:
            known = ", ".join(sorted(retrievers)) or "none"
            raise ConfigError(
                f"tool_retrieval names retriever {retrieval.retriever!r}; this engine has {known}"
            )
        built = indexes[key] = factory(offered)
    return built
