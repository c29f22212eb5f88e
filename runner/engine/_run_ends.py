"""A run's two ends: its state and header when it starts, its summary and result when it ends.

`Engine` (engine.py) calls these; they hold no state of their own.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from ..base._logging import run_logger
from ..base.clock import Clock
from ..core.budget import INPUT_PROJECTION, Limits, Usage
from ..core.machine import attach
from ..models.base import ModelAdapter, ToolSpec
from ..models.identity import ModelIdentity
from ..models.pricing import usd
from ..models.transcript import SystemMessage, UserMessage
from ..record.redaction import model_secrets
from ..record.spec import RunResult, RunSpec
from ..record.trace import Durability, OperationSummary, RunHeader, RunSummary, TransitionRecord
from ..tools.retrieval import Retriever, manifest_of
from ._state import Moves, RunSetup, RunState, Runtime, Spending
from .effects import Effects


def new_run(
    runtime: Runtime,
    *,
    run_id: str,
    spec: RunSpec,
    effects: Effects,
    started: float,
    known: list[TransitionRecord],
    system_prompt: str,
    render_limit: int,
    choose_retriever: Callable[[tuple[ToolSpec, ...]], Retriever | None],
    clock: Clock | None = None,
    started_wall: datetime | None = None,
) -> RunState:
    """The state of a run about to start (or to be re-driven): its setup fixed once here.
    `choose_retriever`: the run's retriever for the tools it is offered (`_run_resources`).
    `clock`: the run's own time (a re-driven run's `clock.CatchUp`); the engine's by default.
    `started_wall`: when it began (a resumed run's header's); now by default."""
    contracts = runtime.contracts
    offered = tuple(
        ToolSpec(
            name=contract.name,
            description=contract.contract.description,
            parameters=contract.contract.input_schema,
        )
        for name in spec.tools
        if (contract := contracts.get(name)) is not None
        and contract.contract.audience == "model"
        and contract.contract.scope in spec.principal.scopes
    )
    # Jitter draws from the run's own generator, never the engine's: any run, however many
    # share an engine, replays from its header alone. No seed given: draw one and record it.
    seed = spec.seed if spec.seed is not None else secrets.randbits(63)
    log = run_logger(run_id=run_id, tenant=spec.tenant, fixture=spec.name)
    # Building events nobody will see is the costliest part of logging: ask once per run.
    enabled = getattr(log, "is_enabled_for", None)
    continuation = spec.continuation or {}
    setup = RunSetup(
        run_id=run_id,
        spec=spec,
        seed=seed,
        offered=offered,
        offered_names=frozenset(tool.name for tool in offered),
        log=log,
        logging=enabled(logging.INFO) if callable(enabled) else True,
        effects=effects,
        started_wall=started_wall or runtime.clock.now(),
        known=known,
        key_scope=str(continuation.get("key_scope") or run_id),
        grants={str(g["operation_key"]): dict(g) for g in continuation.get("grants", ())},
        input_projection=spec.input_projection or INPUT_PROJECTION,
        render_limit=spec.render_limit or render_limit,
        manifest_tokens=manifest_of(runtime.manifests, offered),
    )
    # Built last: nothing can fail once the run is attached to the machine.
    retriever = choose_retriever(offered)
    run = RunState(
        setup=setup,
        clock=clock or runtime.clock,
        rng=random.Random(seed),
        retriever=retriever,
        moves=Moves(lifecycle=attach()),
        spending=Spending(usage=Usage(started_at=started), price=spec.price),
    )
    run.transcript.append(SystemMessage(text=system_prompt))
    run.transcript.append(UserMessage(text=spec.task))
    return run


def header(
    run: RunState,
    *,
    policy: dict[str, Any],
    system_prompt: str,
    model: ModelIdentity | None = None,
    durability: Durability | None = None,
    contracts: dict[str, str] | None = None,
) -> RunHeader:
    """What the store keeps of how the run began: enough to resume or replay it (`contracts`:
    the digests of the contracts it may call under)."""
    setup = run.setup
    spec = setup.spec
    return RunHeader(
        run_id=setup.run_id,
        name=spec.name,
        tenant=spec.tenant,
        principal=spec.principal.id,
        started_at=setup.started_wall,  # the instant a replay's clock starts from
        task=spec.task,
        tools=list(spec.tools),
        scopes=sorted(spec.principal.scopes),
        context=to_jsonable_python(dict(spec.context)),
        limits=_limits_json(spec.limits),
        policy=policy,
        seed=setup.seed,
        annotations=to_jsonable_python(dict(spec.annotations)),
        system_prompt=system_prompt,
        model=model,
        continues=to_jsonable_python(dict(spec.continuation)) if spec.continuation else None,
        required_evidence=[r.model_dump(mode="json") for r in spec.required_evidence],
        price=spec.price,
        fallback_price=spec.fallback_price,
        tool_retrieval=spec.tool_retrieval,
        durability=durability,
        input_projection=setup.input_projection,
        render_limit=setup.render_limit,
        contracts=contracts,
    )


def finish(runtime: Runtime, run: RunState) -> RunResult:
    """Store the ended run's summary and return its result."""
    ending, usage = run.moves.ending, run.spending.usage
    assert ending is not None, "a run that left the loop has ended"
    meters = run.spending.meters
    summary = RunSummary(
        run_id=run.setup.run_id,
        terminal=run.moves.lifecycle.state,
        reason=ending.reason,
        attempts=usage.attempts,
        model_steps=usage.model_steps,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        elapsed_s=run.clock.monotonic() - usage.started_at,
        waits_s=meters.waits,
        answer=ending.answer,
        operations=[
            OperationSummary(key=key, tool=tool, status=status.value)
            for key, (tool, status) in run.calls.operations.items()
        ],
        prefill_per_step=meters.prefill,
        prefill_untruncated=sum(meters.prefill_untruncated),
        cost_usd=usd(usage.cost_usd) if _priced_whole(run) else None,
    )
    runtime.store.end_run(summary)
    return RunResult.of(
        summary,
        name=run.setup.spec.name,
        transitions=run.moves.records,
        evidence=run.calls.evidence,
        limits=run.setup.spec.limits,
    )


def _priced_whole(run: RunState) -> bool:
    """Whether every reply the run was answered was priced (a reply from a fallback no price
    was found for was not): else its total cost is not known."""
    return run.setup.spec.price is not None and not run.spending.meters.unpriced_replies


def with_seed(spec: RunSpec, stored: RunHeader | None) -> RunSpec:
    """The spec a stored run resumes with: its recorded seed, whatever the caller's spec says."""
    if stored is None or stored.seed is None or stored.seed == spec.seed:
        return spec
    return dataclasses.replace(spec, seed=stored.seed)


def run_secrets(spec: RunSpec, model: ModelAdapter) -> list[str]:
    """Every value the run redacts: the runtime's credentials and the live model's key."""
    return [*spec.credentials.values(), *model_secrets(model)]


@functools.lru_cache(maxsize=64)
def _limits_json(limits: Limits) -> dict[str, Any]:
    """Limits repeat from run to run (they are frozen, so hashable): dump each once."""
    # `final_within_caps` only where set: every other header stays as it was stored before it.
    dumped: dict[str, Any] = limits.model_dump(mode="json", exclude={"final_within_caps"})
    if limits.final_within_caps:
        dumped["final_within_caps"] = True
    return dumped
