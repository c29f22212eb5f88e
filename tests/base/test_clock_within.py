"""`within` keeps `asyncio.timeout`'s meaning while arming no timer for an awaitable that never
suspends (issue 11: the two timeout scopes were a tenth of a step). Each case runs through
`within` and through `asyncio.timeout` itself, on a `FakeClock`, and must come out the same:
the value or the exception, the virtual time it took, and what the awaitable itself saw."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runner.base.clock import FakeClock, within


async def reference(seconds: float, awaitable: Awaitable[Any]) -> Any:
    async with asyncio.timeout(seconds):
        return await awaitable


Case = Callable[[FakeClock, list[str]], Awaitable[Any]]


async def immediate(clock: FakeClock, seen: list[str]) -> Any:
    seen.append("ran")
    return {"answer": 1}


async def suspends_then_answers(clock: FakeClock, seen: list[str]) -> Any:
    await clock.sleep(1)
    await asyncio.sleep(0)
    seen.append("answered")
    return "late but in time"


async def hangs(clock: FakeClock, seen: list[str]) -> Any:
    try:
        await clock.sleep(100)
    except asyncio.CancelledError:
        seen.append("cancelled")  # the timeout reaches the awaitable as a cancellation
        raise
    finally:
        seen.append("cleaned up")


async def busy_first_then_suspends(clock: FakeClock, seen: list[str]) -> Any:
    clock.advance(7)  # the first step alone outlasts the deadline
    await asyncio.sleep(0)
    seen.append("resumed")
    return "too late"


async def busy_but_never_suspends(clock: FakeClock, seen: list[str]) -> Any:
    clock.advance(7)  # no suspension point: asyncio.timeout cannot act either
    return "answered without a pause"


async def raises_at_once(clock: FakeClock, seen: list[str]) -> Any:
    raise ValueError("refused")


async def raises_after_suspending(clock: FakeClock, seen: list[str]) -> Any:
    await clock.sleep(1)
    raise ConnectionResetError("dropped")


async def swallows_the_cancellation(clock: FakeClock, seen: list[str]) -> Any:
    try:
        await clock.sleep(100)
    except asyncio.CancelledError:
        seen.append("swallowed")
        return "kept going"  # asyncio.timeout still reports the expiry? it does not: value
    return "unreachable"


CASES: dict[str, Case] = {
    "immediate": immediate,
    "suspends then answers": suspends_then_answers,
    "hangs": hangs,
    "busy, never suspends": busy_but_never_suspends,
    "raises at once": raises_at_once,
    "raises after suspending": raises_after_suspending,
    "swallows the cancellation": swallows_the_cancellation,
}


def _outcome(wrapper: Any, case: Case) -> tuple[object, float, list[str]]:
    clock, seen = FakeClock(), []

    async def go() -> object:
        try:
            return await wrapper(5, case(clock, seen))
        except Exception as exc:  # the outcome is compared, whatever it is
            return (type(exc).__name__, str(exc))

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        value = runner.run(go())
    return value, clock.monotonic(), seen


@pytest.mark.parametrize("name", list(CASES))
def test_within_comes_out_as_asyncio_timeout_does(name: str) -> None:
    assert _outcome(within, CASES[name]) == _outcome(reference, CASES[name])


def test_past_the_deadline_at_the_first_suspension_is_a_timeout() -> None:
    """The one place `within` is stricter: an awaitable already past its deadline when it first
    suspends gets no further step (asyncio.timeout's timer, queued behind the task's own wake-up,
    let it take one more and answer late)."""
    assert _outcome(within, busy_first_then_suspends) == (("TimeoutError", ""), 7.0, [])
    assert _outcome(reference, busy_first_then_suspends) == ("too late", 7.0, ["resumed"])


@pytest.mark.parametrize("wrapper", [within, reference])
def test_cancelling_the_caller_is_a_cancellation_not_a_timeout(wrapper: Any) -> None:
    """The run itself cancelled while the awaitable waits: CancelledError propagates (and the
    awaitable sees it), with `within` as with asyncio.timeout."""
    clock, seen = FakeClock(), []

    async def go() -> str:
        task = asyncio.ensure_future(wrapper(5, hangs(clock, seen)))
        await clock.sleep(1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "not cancelled"

    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        assert runner.run(go()) == "cancelled"
    assert seen == ["cancelled", "cleaned up"]
    assert clock.monotonic() == pytest.approx(1)


def test_an_awaitable_that_never_suspends_arms_no_timer() -> None:
    async def go() -> int:
        loop = asyncio.get_running_loop()
        before = len(loop._scheduled)  # type: ignore[attr-defined]  # the loop's timer heap
        for _ in range(100):
            await within(5, immediate(FakeClock(), []))
        return len(loop._scheduled) - before  # type: ignore[attr-defined]

    assert asyncio.run(go()) == 0
