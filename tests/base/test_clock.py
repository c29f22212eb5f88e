import asyncio
import time
from datetime import UTC, datetime

import pytest

from runner.base.clock import LATEST_START, FakeClock, within
from runner.base.errors import ConfigError


def run_on(clock: FakeClock, coro):  # type: ignore[no-untyped-def]
    with asyncio.Runner(loop_factory=clock.loop_factory) as runner:
        return runner.run(coro)


def test_fake_sleep_takes_no_real_time_and_is_recorded() -> None:
    clock = FakeClock(datetime(2027, 3, 1, 9, tzinfo=UTC))
    started = time.monotonic()
    run_on(clock, clock.sleep(3600))
    assert time.monotonic() - started < 60  # an hour of fake time, far less real time
    assert clock.sleeps == [3600]
    assert clock.now() == datetime(2027, 3, 1, 10, tzinfo=UTC)


def test_concurrent_waits_overlap() -> None:
    clock = FakeClock()

    async def both() -> None:
        await asyncio.gather(clock.sleep(3), clock.sleep(2))

    run_on(clock, both())
    assert clock.monotonic() == pytest.approx(3)


def test_timeouts_fire_in_virtual_time() -> None:
    clock = FakeClock()

    async def slow() -> None:
        await clock.sleep(100)

    with pytest.raises(TimeoutError):
        run_on(clock, within(5, slow()))
    assert clock.monotonic() == pytest.approx(5)


def test_fake_sleep_refuses_a_real_loop() -> None:
    clock = FakeClock()
    with pytest.raises(ConfigError, match="own loop"):
        asyncio.run(clock.sleep(1))


def test_clock_needs_an_aware_start() -> None:
    with pytest.raises(ConfigError, match="timezone-aware"):
        FakeClock(datetime(2027, 3, 1, 9))


def test_advance_never_goes_back() -> None:
    clock = FakeClock()
    clock.advance(2)
    assert clock.monotonic() == 2
    with pytest.raises(ConfigError):
        clock.advance(-1)


def test_a_fake_clock_starting_too_close_to_the_last_date_is_refused() -> None:
    """A start in year 9999 overflowed mid-run: a stamp, or a write's key expiring a day on."""
    with pytest.raises(ConfigError, match="must be at most 9000-01-01"):
        FakeClock(datetime(9999, 12, 31, tzinfo=UTC))
    assert FakeClock(LATEST_START).now() == LATEST_START
