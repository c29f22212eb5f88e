"""The `plan` state: ask the model (again while its provider is unavailable), act on the reply,
and make the one tool-free request after a bound is spent.

What a request comes to is an observation (`core.observations`, the model's side); the one
decision (`core.decide.decide`) says what follows, and this module carries it out: the
transcript, the meters, the request itself.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any, Final, assert_never

from ..base._jsonsafe import safe_str
from ..base.errors import RunFailure
from ..core import budget as bounds
from ..core.budget import Bound
from ..core.decide import PlanFacts, RequestFacts, decide
from ..core.evidence import missing_evidence
from ..core.observations import (
    AdapterFailed,
    BoundSpent,
    FinalAnswered,
    ModelAnswered,
    ModelCutOff,
    ModelLate,
    ModelOutOfBudget,
    ModelProposed,
    ModelRejectedRequest,
    ModelTimedOut,
    ModelUnusable,
    ModelWasUnavailable,
    PlanObservation,
    RequestFailure,
)
from ..core.verdicts import AskAgain, FallBack, FinalRequest, Move, NoReply, Trip
from ..models.base import (
    ModelRejected,
    ModelReply,
    ModelUnavailable,
    ToolChoice,
    ToolSpec,
)
from ..models.pricing import usd
from ..models.scripted import estimate_tokens
from ..models.transcript import AssistantMessage, UserMessage
from ..tools.retrieval import latest_turn, manifest_of, select
from ._calls import take_batch
from ._core import Core
from ._spending import count_reply, count_request, count_wait, fall_back, trip
from ._state import RunState

_UNTRUSTED: Final = {
    "refusal": "model_refused",
    "max_tokens": "model_truncated",
    "incomplete": "model_incomplete",
    "malformed": "model_malformed",
    # OpenAI's own words, from an adapter that passes the provider's reason on: a reply cut off
    # or filtered is not acted on, its text included (the bundled adapter maps them so)
    "length": "model_truncated",
    "content_filter": "model_refused",
}

_ACTED_ON: Final = frozenset({"tool_use", "end_turn"})


def _unusable(reply: ModelReply) -> str | None:
    """Why a reply cannot be acted on, or None.

    A reply the provider cut off or did not finish, or that the adapter could not read whole, is
    never acted on, its tool calls included: a call cut off by the token limit may still parse,
    with arguments the model never finished (a `hotel_id` of "H-SH"). Otherwise a reply with no
    calls and no text is empty.
    """
    untrusted = _UNTRUSTED.get(reply.stop_reason)
    if untrusted is not None:
        return untrusted
    if reply.tool_calls:
        # Calls are acted on only under `tool_use` or `end_turn`: an adapter passing on a stop
        # reason the runner does not know (`length`, `content_filter`) would have a call that
        # was cut off sent. An adapter's own reason may still end a reply of text.
        return None if reply.stop_reason in _ACTED_ON else "model_incomplete"
    if not reply.text.strip():
        return "model_empty"
    return None


async def _ask(
    core: Core,
    run: RunState,
    tools: tuple[ToolSpec, ...],
    choice: ToolChoice,
    *,
    started: float,
    bounded: bool,
    limit: int | None = None,
    limiting: Bound = Bound.TOKENS,
) -> tuple[ModelReply | None, float, PlanObservation | None, Bound]:
    """One model request, asked again while the decision says so (the provider unavailable);
    `started` is when the caller read the clock (nothing since has waited).

    Returns (reply or None, latency_ms, what became of it when it cannot be acted on as a reply,
    the bound that set the output limit it was asked under). Each failure is decided
    (`core._plan_rules.decide_request`): asked again after its wait, asked of the adapter's
    same-family fallback model (once a run, `_fall_back`), or given up.
    """
    now = started
    limits = run.setup.spec.limits
    retries = 0
    spending = run.spending
    while True:
        ordinal = count_request(spending)
        timeout = bounds.time_left(limits, spending.usage, now) if bounded else None
        try:
            reply = await run.setup.effects.ask(
                ordinal,
                run.transcript,
                tools,
                choice,
                timeout,
                max_output_tokens=limit,
            )
            break
        except RunFailure:
            raise
        except Exception as exc:  # an adapter bug must still end the run in a declared state
            facts = _request_facts(run, retries)
            verdict = decide(core.runtime.policy, _failure(exc), facts, run.rng)
        match verdict:
            case AskAgain(wait=wait):
                retries += 1
                await run.clock.sleep(wait)
                count_wait(spending, wait)
                now = run.clock.monotonic()
                continue
            case NoReply(came_to=came_to):
                return None, core.ms_since(run, started), came_to, limiting
            case FallBack(otherwise=otherwise):
                if not _fall_back(run):
                    return None, core.ms_since(run, started), otherwise, limiting
                retries = 0
                if limits.max_cost_usd is not None:  # worked out at the primary's price
                    limit, limiting = _output_limit(run, final=choice == "none")
                    if _unaffordable(run, limit, final=choice == "none"):
                        return (
                            None,
                            core.ms_since(run, started),
                            ModelOutOfBudget(bound=Bound.COST),
                            Bound.COST,
                        )
                now = run.clock.monotonic()
            case unreachable:
                assert_never(unreachable)
    tokens = reply.usage
    count_reply(
        spending, tokens.input_tokens, tokens.output_tokens, run.transcript, run.planning.offering
    )
    ended = run.clock.monotonic()
    latency = round((ended - started) * 1000, 3)
    if bounded and ended >= spending.usage.started_at + limits.max_seconds:
        # An adapter that swallowed its timeout, or blocked the loop so none could fire: what
        # it spent is counted, what it says is not acted on (the deadline is not the model's).
        return reply, latency, ModelLate(), limiting
    return reply, latency, None, limiting


def _failure(exc: Exception) -> RequestFailure:
    """A model request's exception as the observation it is."""
    if isinstance(exc, TimeoutError):
        return ModelTimedOut()
    if isinstance(exc, ModelRejected):
        return ModelRejectedRequest(status=safe_str(exc.status), message=safe_str(exc))
    if isinstance(exc, ModelUnavailable):
        return ModelWasUnavailable(status=safe_str(exc.status), retry_after=exc.retry_after)
    return AdapterFailed(name=safe_str(getattr(exc, "type_name", type(exc).__name__)))


def _request_facts(run: RunState, retries: int) -> RequestFacts:
    """What the decision on a failed request needs: how often it was asked again, and when."""
    # A Retry-After date is read against when the response came (as recorded), not after
    # storing it: a replay's clock reads exactly that moment.
    came = run.setup.started_wall + timedelta(seconds=run.setup.effects.answered_at())
    return RequestFacts(
        retries=retries,
        now=run.clock.monotonic(),
        deadline=bounds.deadline(run.setup.spec.limits, run.spending.usage),
        came=came,
    )


def _fall_back(run: RunState) -> bool:
    """Switch the run to the adapter's fallback model, priced at the fallback's price from
    here on (both fixed at the run's start); False when there is none, or the run switched
    already (the fallback is asked once a run, never its own fallback)."""
    if run.spending.fallen_back or not run.setup.effects.use_fallback():
        return False
    fall_back(run.spending, run.setup.spec.fallback_price)
    return True


def _unaffordable(run: RunState, limit: int | None, *, final: bool) -> bool:
    """Whether the money left pays for no request to the model now asked (as `plan` and
    `_final_request` check before asking: its projected cost, and an output token)."""
    if limit is not None and limit < 1:
        return True
    projected = _projected_cost(run)
    if final:
        return not bounds.cost_room(run.setup.spec.limits, run.spending.usage, projected)
    return bounds.cost_spent(run.setup.spec.limits, run.spending.usage, projected)


def _projected_input(run: RunState) -> int:
    """The input tokens the next request is expected to be billed for
    (`budget.INPUT_PROJECTION`): the last request's bill less the manifest of the tools it
    sent, plus the estimate of what the transcript grew by since (never less than the
    transcript's own estimate), plus the manifest of the tools this request sends
    (`Planning.offering`: retrieval may offer others each request); before any request was
    answered, the transcript's estimate plus that manifest. A run stored under projection 1
    goes on with it: the larger of the last bill and the transcript's estimate."""
    chars = run.transcript.chars
    estimate = estimate_tokens(chars)
    meters = run.spending.meters
    prefill = meters.prefill
    offering = run.planning.offering
    if run.setup.input_projection < 2:
        return prefill[-1] if prefill and prefill[-1] > estimate else estimate
    if not prefill:
        return estimate + offering
    grown = chars - meters.asked_chars
    carried = prefill[-1] - meters.asked_manifest + (estimate_tokens(grown) if grown > 0 else 0)
    return (carried if carried > estimate else estimate) + offering


def _projected_cost(run: RunState) -> Decimal:
    """What the next request is expected to cost, at the price of the model now asked: its
    projected input and the last reply's output."""
    price = run.spending.price
    if price is None:
        return Decimal(0)
    return price.cost(_projected_input(run), run.spending.meters.model_tokens[1])


def _output_limit(run: RunState, *, final: bool = False) -> tuple[int | None, Bound]:
    """How many output tokens the next request may use, and the bound that sets that (None: no
    limit, when no token is left and there is no money cap).

    Tokens: what `max_tokens` leaves after the request's projected input; when that input alone
    fills it (the request is still made: the cap is checked on tokens spent), one token, so the
    reply cannot add to what the input passes it by. A request with no token left (the final
    one after the token bound) is outside the token cap, as it is outside the model-step cap.
    Under `Limits.final_within_caps` (a child run) neither passes: the limit is 0, so no such
    request is made.
    Money: what `max_cost_usd` leaves after the projected input, at the output price; for a
    tool-proposing request, less the final answer's share, held back.

    Worked out from what the run recorded (usage, transcript, limits, price), so a replay or a
    resume works out the same limit; and it never stops a request the checks before it let
    through (but a money cap that pays for no output token), so older runs replay as they ran.
    """
    spec, usage = run.setup.spec, run.spending.usage
    limits, price = spec.limits, run.spending.price
    tokens_in = _projected_input(run)
    limit: int | None = None
    left = limits.max_tokens - usage.tokens_in - usage.tokens_out
    if left > tokens_in:
        limit = left - tokens_in
    elif limits.final_within_caps:  # no request passes the cap, not even by its input
        limit = 0
    elif left >= 1:
        limit = 1
    if limits.max_cost_usd is None or price is None:
        return limit, Bound.TOKENS
    money = Decimal(str(limits.max_cost_usd)) - usage.cost_usd - price.cost(tokens_in, 0)
    if not final:  # the final answer's share: its projected cost (`_projected_cost`)
        money -= price.cost(tokens_in, run.spending.meters.model_tokens[1])
    affordable = price.output_tokens_for(money)
    if affordable is not None and (limit is None or affordable < limit):
        return affordable, Bound.COST
    return limit, Bound.TOKENS


def _usage_fields(run: RunState, reply: ModelReply | None) -> dict[str, Any]:
    """A model request's tokens and cost (as `_ask` worked it out, at the price of the model
    that answered), as its transition records them."""
    if reply is None:
        return {"tokens_in": None, "tokens_out": None}
    price = run.spending.price
    return {
        "tokens_in": reply.usage.input_tokens,
        "tokens_out": reply.usage.output_tokens,
        "cost_usd": usd(run.spending.meters.model_cost) if price is not None else None,
    }


def _offer(core: Core, run: RunState) -> tuple[ToolSpec, ...]:
    """The tools this request offers: the whole catalogue, or retrieval's choice for the task
    and the latest turn (then only those may be called until the next request). Chosen before
    the request's cost is projected, which counts their manifest (`Planning.offering`)."""
    setup = run.setup
    spec = setup.spec
    retrieval = spec.tool_retrieval
    if retrieval is None or run.retriever is None:
        run.planning.offering = setup.manifest_tokens
        return setup.offered
    query = f"{spec.task}\n{latest_turn(run.transcript)}"
    tools = select(retrieval, setup.offered, run.retriever, query)
    run.planning.selection = tuple(tool.name for tool in tools)
    run.planning.offering = manifest_of(core.runtime.manifests, tools)
    return tools


def _offer_fields(run: RunState, tools: tuple[ToolSpec, ...]) -> dict[str, Any]:
    """What a model request's transition records of its offer (runs with tool retrieval)."""
    if run.setup.spec.tool_retrieval is None:
        return {}
    offered = [tool.name for tool in tools] if run.retriever is not None else None
    # `_offer`'s manifest, of these tools
    return {"offered": offered, "manifest_tokens": run.planning.offering}


async def plan(core: Core, run: RunState) -> None:
    now = run.clock.monotonic()
    limits, usage = run.setup.spec.limits, run.spending.usage
    bound = run.spending.tripped or bounds.spent(limits, usage, now)
    tools = _offer(core, run) if bound is None else ()  # its manifest is projected (`offering`)
    if (  # the projection is only worked out for a run with a money budget
        bound is None
        and limits.max_cost_usd is not None
        and bounds.cost_spent(limits, usage, _projected_cost(run))
    ):
        bound = Bound.COST
    limit: int | None = None
    limiting = Bound.TOKENS
    if bound is None:
        limit, limiting = _output_limit(run)
        if limit is not None and limit < 1:  # the money left pays for no output token
            bound = limiting
    if bound is not None:
        await _carry(core, run, BoundSpent(bound=bound), None)
        return
    reply, latency, problem, limiting = await _ask(
        core, run, tools, "auto", started=now, bounded=True, limit=limit, limiting=limiting
    )
    fields = _offer_fields(run, tools)
    if reply is not None:
        fields = {**_usage_fields(run, reply), **fields}
    observation = _came_to(run, reply, problem, limiting)
    await _carry(core, run, observation, reply, latency=latency, fields=fields)


def _came_to(
    run: RunState, reply: ModelReply | None, problem: PlanObservation | None, limiting: Bound
) -> PlanObservation:
    """What a request in `plan` came to, as an observation."""
    if problem is not None:
        return problem
    assert reply is not None
    sent = run.setup.effects.limit_sent  # the limit the reply was asked under, if any
    if sent is not None and (  # cut off at the budget's limit (not the adapter's own, lower
        # one), or an adapter told the limit went past it: the bound is reached, no fault
        reply.usage.output_tokens > sent
        or (reply.stop_reason == "max_tokens" and reply.usage.output_tokens == sent)
    ):
        return ModelCutOff(bound=limiting, text=reply.text)
    unusable = _unusable(reply)
    if unusable is not None:  # what the provider sent cannot be acted on: say so and stop
        return ModelUnusable(reason=unusable, text=reply.text)
    if reply.tool_calls:
        return ModelProposed(calls=len(reply.tool_calls))
    return ModelAnswered(text=reply.text)


async def _carry(
    core: Core,
    run: RunState,
    observation: PlanObservation,
    reply: ModelReply | None,
    *,
    latency: float | None = None,
    fields: dict[str, Any] | None = None,
) -> None:
    """Decide what `observation` (of `reply`, if one came) comes to, and carry the verdict out:
    the transcript and the batch first, then the move its transition records."""
    facts = PlanFacts()
    if isinstance(observation, ModelAnswered):
        missing = missing_evidence(run.setup.spec.required_evidence, run.calls.evidence)
        facts = PlanFacts(missing=tuple(missing), refused_answers=run.planning.premature_answers)
    verdict = decide(core.runtime.policy, observation, facts, run.rng)
    match verdict:
        case Trip(bound=bound):
            trip(run.spending, bound)  # the next iteration makes the final request
            return
        case FinalRequest(bound=bound):
            await _final_request(core, run, bound)
            return
        case Move():
            pass
        case unreachable:
            assert_never(unreachable)
    if isinstance(observation, ModelProposed):
        assert reply is not None
        calls = take_batch(run.calls, reply.tool_calls)
        run.transcript.append(AssistantMessage(text=reply.text, tool_calls=calls))
    elif isinstance(observation, ModelAnswered | ModelCutOff | ModelUnusable):
        assert reply is not None
        run.transcript.append(AssistantMessage(text=reply.text))
        if isinstance(observation, ModelAnswered) and verdict.ending is None:  # the gate
            run.planning.premature_answers += 1
            run.transcript.append(
                UserMessage(
                    text="Not complete yet: a complete answer needs evidence from the tools for: "
                    + "; ".join(facts.missing)
                    + ". Get it with the tools offered, or answer saying what you could not"
                    " determine."
                )
            )
    core.carry(run, verdict, latency_ms=latency, **(fields or {}))


async def _final_request(core: Core, run: RunState, bound: Bound) -> None:
    """The one tool-free request after a bound is spent; then `abstain`.

    It is outside the model-step cap, but never outside the deadline: whichever bound was
    spent, it gets only the time left, and none when none is left (the run then abstains with
    its evidence and no final text), so a slow final answer cannot stretch the run. Likewise
    with a money budget: it is made only when its projected cost fits in what is left, and pays
    for an output token. Its output is limited to what the money and the tokens leave (see
    `_output_limit`); a final answer cut off there is kept as the partial answer. Under
    `Limits.final_within_caps` (a child run) it is made only when a model step is left and its
    projected input and an output token fit in the tokens left.
    """
    run.transcript.append(
        UserMessage(
            text=f"The {bound.value} budget is spent and no more tools can be called. Answer "
            "from the evidence you have, and say what you could not determine."
        )
    )
    tools = _offer(core, run)  # before its cost is projected, which counts their manifest
    limits = run.setup.spec.limits
    usage = run.spending.usage
    now = run.clock.monotonic()
    left = bounds.time_left(limits, usage, now)
    affordable = bounds.cost_room(limits, usage, _projected_cost(run))
    limit, _ = _output_limit(run, final=True)
    stepped = limits.final_within_caps and usage.model_steps >= limits.max_model_steps
    reply: ModelReply | None = None
    latency: float | None = None
    if left > 0 and affordable and not stepped and (limit is None or limit >= 1):
        # the tools stay declared; tool_choice none forbids them
        reply, latency, failure, _ = await _ask(
            core, run, tools, "none", started=now, bounded=True, limit=limit
        )
    answer = reply.text if reply is not None and failure is None else None  # not one too late
    if reply is not None:
        run.transcript.append(AssistantMessage(text=reply.text))
    fields = _usage_fields(run, reply)
    if reply is not None:
        fields.update(_offer_fields(run, tools))
    verdict = decide(
        core.runtime.policy, FinalAnswered(bound=bound, text=answer), PlanFacts(), run.rng
    )
    assert isinstance(verdict, Move), verdict
    core.carry(run, verdict, latency_ms=latency, **fields)
