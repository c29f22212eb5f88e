"""What a run is priced at, and the retriever that narrows a large tool catalogue for it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .clock import Clock
from .errors import ConfigError
from .models.base import ModelAdapter, ToolSpec
from .models.identity import identity_of
from .pricing import ModelPrice, PriceTable, default_prices
from .retrieval import Retriever, RetrieverFactory
from .spec import RunSpec

Indexes = dict[tuple[str, tuple[str, ...]], Retriever]
"""Retrievers built so far, by retriever and catalogue: one index per catalogue."""


def priced(spec: RunSpec, model: ModelAdapter, prices: PriceTable | None, clock: Clock) -> RunSpec:
    """`spec` with the run's price: its own, the adapter's declared one, or the table's
    (`prices`, else the default table)."""
    if spec.price is not None:
        return spec
    declared = getattr(model, "price", None)
    price = declared if isinstance(declared, ModelPrice) else None
    if price is None:
        table = prices if prices is not None else default_prices()
        price = table.price_of(identity_of(model), clock.now())
    return spec if price is None else dataclasses.replace(spec, price=price)


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
