"""A run's spending (`_state.Spending`): the one module that counts it.

Every phase reads what was spent (the bounds are checked against it); only these functions
change it, each where the thing is spent: `plan` counts its requests, replies and waits and
switches to the fallback's price, admission counts attempts and dispatches and holds a child's
budget, `call` releases and charges it, and a verdict that spends a bound trips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from ..core.budget import Bound
from ..models.pricing import ModelPrice
from ..models.scripted import estimate_tokens
from ..models.transcript import Transcript
from ..tools.invocation import BudgetLeft
from ._state import Spending


def count_attempt(spending: Spending) -> None:
    """A tool call (or a lookup) admitted: an attempt, counted before it is validated."""
    spending.usage.attempts += 1


def count_dispatch(spending: Spending) -> int:
    """A dispatch about to start; its ordinal in the run."""
    meters = spending.meters
    meters.dispatches += 1
    return meters.dispatches


def count_request(spending: Spending) -> int:
    """A model request about to be sent (asked again included); its ordinal in the run."""
    meters = spending.meters
    meters.model_requests += 1
    return meters.model_requests


def count_wait(spending: Spending, wait: float) -> None:
    """A wait slept (before a request or a call is sent again)."""
    spending.meters.waits.append(wait)


def count_reply(
    spending: Spending, tokens_in: int, tokens_out: int, transcript: Transcript, offering: int
) -> None:
    """A model reply: its tokens, its cost at the price of the model that answered (the
    fallback's once the run switched), and what its request sent (`transcript` as sent, the
    manifest tokens of the tools it offered), which the next request's projection starts from."""
    usage, meters = spending.usage, spending.meters
    usage.model_steps += 1
    usage.tokens_in += tokens_in
    usage.tokens_out += tokens_out
    meters.model_tokens = (tokens_in, tokens_out)
    price = spending.price
    if price is not None:
        meters.model_cost = cost = price.cost(tokens_in, tokens_out)
        usage.cost_usd += cost
    else:
        meters.unpriced_replies += 1
    elided = transcript.full_chars - transcript.chars
    meters.prefill.append(tokens_in)
    meters.asked_chars, meters.asked_manifest = transcript.chars, offering
    meters.prefill_untruncated.append(tokens_in + estimate_tokens(elided))


def fall_back(spending: Spending, price: ModelPrice | None) -> None:
    """The run's requests go to the adapter's fallback model from here on, at `price`."""
    spending.fallen_back, spending.price = True, price


def trip(spending: Spending, bound: Bound | None) -> None:
    """Leave `bound` spent for the next `plan` (None: none is)."""
    spending.tripped = bound


def hold(spending: Spending, left: BudgetLeft) -> None:
    """A child-run call dispatched: what it was carved is held until it ends."""
    held = spending.held_by_children
    spending.held_by_children = left if held is None else held.plus(left)


def release(spending: Spending, held: BudgetLeft) -> None:
    """A child-run call ended: what it held is no longer held."""
    if spending.held_by_children is not None:
        spending.held_by_children = spending.held_by_children.minus(held)


def charge_child(spending: Spending, child: Mapping[str, object]) -> None:
    """Charge the run with what a child run spent (`child`: its summary, `children.child_in`)."""
    usage = spending.usage
    usage.attempts += _count(child.get("attempts"))
    usage.model_steps += _count(child.get("model_steps"))  # absent in runs stored before it
    usage.tokens_in += _count(child.get("tokens_in"))
    usage.tokens_out += _count(child.get("tokens_out"))
    cost = child.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
        usage.cost_usd += Decimal(str(cost))


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
