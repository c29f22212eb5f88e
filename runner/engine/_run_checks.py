"""What a run is checked against, and the spec it starts with, before anything of it is stored.

`check_start` refuses a run that could not go well (a fake clock on a foreign loop, a tool with
no contract, a write that may need approval on a store with no ledger, a cost bound with no
price); `as_it_began` and `as_resumed` give a stored run's spec back what it began with (its
seed, system prompt and, resumed, its continuation and price).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from ..base.clock import FakeClock
from ..base.errors import ConfigError, ResumeRefused
from ..core.budget import Limits, changed_limits
from ..core.policy import Policy
from ..models.identity import identity_of
from ..models.pricing import PriceTable, unpriced_advice
from ..record.spec import DURABILITIES, RunSpec
from ..record.trace import RunHeader
from ..tools.contracts import CompiledContract, contract_digests
from ..tools.retrieval import RetrieverFactory, check_retrieval
from ._run_ends import with_seed
from ._state import Runtime
from .approvals import ledger_of


def check_start(
    runtime: Runtime,
    spec: RunSpec,
    loop: asyncio.AbstractEventLoop,
    retrievers: Mapping[str, RetrieverFactory],
    *,
    continuing: bool = False,
    prices: PriceTable | None = None,
    model: object = None,
) -> None:
    """Refused before the run is stored: a fake clock on a foreign loop (the run would stop
    at its first wait and stay `running`), and a tool the spec names without a contract
    (it would be dropped from the offer in silence: a typo), and a cost bound with no price
    (the advice names `model` and where its price was looked up: `prices`, else the default)."""
    if spec.durability is not None:
        check_durability(spec.durability, "RunSpec.durability")
    if isinstance(runtime.clock, FakeClock):
        runtime.clock.check_loop(loop, "a run on a FakeClock")
    unknown = [name for name in spec.tools if name not in runtime.contracts]
    if unknown:
        raise ConfigError(f"RunSpec.tools names tools with no contract: {', '.join(unknown)}")
    # Evidence from a tool the run is not given (a typo) could never be met: missing_evidence.
    unmet = [need.tool for need in spec.required_evidence if need.tool not in spec.tools]
    if unmet:
        raise ConfigError(
            f"RunSpec.required_evidence names tools the run is not given: {', '.join(unmet)} "
            "(RunSpec.tools)"
        )
    if spec.tool_retrieval is not None:  # refused now, not once the catalogue outgrows the offer
        check_retrieval(spec.tool_retrieval, runtime.contracts, retrievers)
    if _may_need_approval(runtime, spec):
        ledger_of(runtime.store)  # a proposal must have somewhere to be kept
    if spec.continuation is not None and not continuing:
        raise ConfigError(  # grants come only from verified confirm tokens
            "RunSpec.continuation is set by Engine.continue_approved, never by the caller"
        )
    if spec.limits.max_cost_usd is not None and spec.price is None:
        named = identity_of(model).describe() if model is not None else "the model"
        raise ConfigError(
            f"max_cost_usd {spec.limits.max_cost_usd} needs a price for {named}, and none "
            f"was found: {unpriced_advice(prices)}"
        )


def check_durability(durability: object, where: str) -> None:
    if durability not in DURABILITIES:
        raise ConfigError(f"{where} is {durability!r}: one of {', '.join(DURABILITIES)}")


def as_it_began(spec: RunSpec, stored: RunHeader | None) -> RunSpec:
    """The spec a stored run goes on with (resumed, or continued once approved): its recorded
    seed, its recorded system prompt unless `spec` gives one, its recorded prices, whatever
    the table says now (a continuation re-drives its requests: it was unpriced), and how it
    projected its requests' input."""
    spec = with_seed(spec, stored)
    if spec.system_prompt is None and stored is not None and stored.system_prompt is not None:
        spec = dataclasses.replace(spec, system_prompt=stored.system_prompt)
    if stored is None:
        return spec
    if stored.price is not None:
        spec = dataclasses.replace(spec, price=stored.price, fallback_price=stored.fallback_price)
    # Its requests' limits were worked out so, and it was shown its results so: re-driven the same.
    spec = dataclasses.replace(spec, input_projection=stored.input_projection)
    if stored.render_limit is not None:
        spec = dataclasses.replace(spec, render_limit=stored.render_limit)
    return spec


def as_resumed(
    spec: RunSpec, stored: RunHeader, policy: Policy, contracts: Mapping[str, CompiledContract]
) -> RunSpec:
    """The spec a stored run resumes with: as it began (`as_it_began`: priced as it began), a
    continuation of the run it continued, committing as it began
    unless `spec` says otherwise. Refused (`ResumeRefused`) under other limits, or another
    tenant, principal, scopes, task, tools, context, evidence, retrieval, `policy` or
    `contracts`."""
    check_same_limits(spec, stored)
    check_same_run(spec, stored, policy, contracts)
    spec = as_it_began(spec, stored)
    if spec.durability is None and stored.durability is not None:
        spec = dataclasses.replace(spec, durability=stored.durability)
    if spec.continuation is None and stored.continues is not None:
        spec = dataclasses.replace(spec, continuation=stored.continues)
    return spec


def check_same_limits(spec: RunSpec, stored: RunHeader) -> None:
    """Refuse limits other than those the run began with, before anything is re-driven: its
    recorded decisions (and each model request's output limit) were taken under them, so the
    re-drive would diverge at the first one they change. Limits a header no longer loads are
    left to the re-drive's own check (it names the run's corrupt record)."""
    try:
        began = Limits.model_validate(stored.limits)
    except ValidationError:
        return
    if began == spec.limits:
        return
    differs = ", ".join(
        f"{name} {getattr(began, name)} (given {getattr(spec.limits, name)})"
        for name in changed_limits(began, spec.limits)
    )
    raise ResumeRefused(
        stored.run_id, f"it began with other limits: {differs}; resume it with the same limits"
    )


def check_same_run(
    spec: RunSpec, stored: RunHeader, policy: Policy, contracts: Mapping[str, CompiledContract]
) -> None:
    """Refuse a resume that would not go on as the run began, before anything is re-driven:
    another tenant mints other operation keys, so a write sent before the crash is not found
    by its key and is sent again; another principal, scopes or policy acts under other
    authority or decides otherwise than the record; another task, tools, context, required
    evidence or retrieval is not the run the record is of; another contract for one of its
    tools (`contracts.contract_digest`: a call the run sent is refused, a result it took is
    malformed, a request's output limit moves) leaves a record no contract set replays. Not
    compared: `name` and `annotations` (the caller's labels), `credentials` (never recorded;
    the runtime's),
    `system_prompt` (the recorded one unless given; the re-drive checks the transcript),
    `seed` and `price` (the header's are used), `durability` (may change per resume)."""
    given: dict[str, tuple[object, object]] = {
        "tenant": (stored.tenant, spec.tenant),
        "principal": (stored.principal, spec.principal.id),
        "scopes": (stored.scopes, sorted(spec.principal.scopes)),
        "task": (stored.task, spec.task),
        "tools": (stored.tools, list(spec.tools)),
        "context": (stored.context, _jsonable(spec.context)),
        "required_evidence": (
            stored.required_evidence,
            [r.model_dump(mode="json") for r in spec.required_evidence],
        ),
        "tool_retrieval": (stored.tool_retrieval, spec.tool_retrieval),
    }
    changed = [
        f"{name} {_short(began)} (given {_short(now)})"
        for name, (began, now) in given.items()
        if began != now
    ]
    try:
        began_under = Policy.model_validate(stored.policy)
    except ValidationError:  # a policy the header no longer loads: the re-drive says so
        began_under = policy
    if began_under != policy:
        changed.append("policy (the engine's is not the one the run began under)")
    if stored.contracts is not None:  # (None: stored before the runner recorded them)
        now = contract_digests(contracts, stored.tools)
        differ = sorted(
            name
            for name in stored.contracts.keys() | now.keys()
            if stored.contracts.get(name) != now.get(name)
        )
        if differ:
            changed.append(
                f"contract for {', '.join(differ)} (the one given is not the one the run "
                "began under)"
            )
    if changed:
        raise ResumeRefused(
            stored.run_id,
            f"it began with another {'; '.join(changed)}; resume it with the run's own",
        )


def _jsonable(value: Mapping[str, Any]) -> object:
    try:
        return to_jsonable_python(dict(value))
    except (ValueError, TypeError):  # not what was stored, whatever it is
        return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _may_need_approval(runtime: Runtime, spec: RunSpec) -> bool:
    """Whether a write this run may call could need approval (contract or policy)."""
    rules = runtime.policy.approval
    for name in spec.tools:
        contract = runtime.contracts.get(name)
        if contract is None or contract.contract.side_effect != "write":
            continue
        if contract.contract.requires_approval or name in rules.tools or rules.untrusted_arguments:
            return True
    return False
