from runner.core.budget import Bound, Limits, Usage, blocks_dispatch, limit_spent, spent, time_left


def test_each_bound_trips_on_its_own() -> None:
    limits = Limits(max_attempts=2, max_model_steps=3, max_tokens=100, max_seconds=10)
    assert spent(limits, Usage(started_at=0), now=0) is None
    assert spent(limits, Usage(started_at=0, attempts=2), now=0) is Bound.ATTEMPTS
    assert spent(limits, Usage(started_at=0, model_steps=3), now=0) is Bound.MODEL_STEPS
    assert spent(limits, Usage(started_at=0, tokens_in=60, tokens_out=40), now=0) is Bound.TOKENS
    assert spent(limits, Usage(started_at=5), now=15) is Bound.DEADLINE
    assert spent(limits, Usage(started_at=5), now=14.9) is None


def test_model_steps_do_not_block_a_proposed_call() -> None:
    limits = Limits(max_model_steps=1)
    assert blocks_dispatch(limits, Usage(started_at=0, model_steps=1), now=0) is None
    assert (
        blocks_dispatch(Limits(max_attempts=1), Usage(started_at=0, attempts=1), 0)
        is Bound.ATTEMPTS
    )


def test_time_left_never_negative() -> None:
    limits = Limits(max_seconds=30)
    assert time_left(limits, Usage(started_at=0), now=12) == 18
    assert time_left(limits, Usage(started_at=0), now=45) == 0


def test_defaults_leave_headroom_over_a_measured_real_task() -> None:
    """13 tool actions and about 48,000 tokens on a real third-party domain (core/budget.py)."""
    limits = Limits()
    assert (limits.max_attempts, limits.max_model_steps) == (50, 50)
    assert (limits.max_tokens, limits.max_seconds, limits.max_cost_usd) == (500_000, 300.0, None)


def test_a_run_ended_by_a_bound_says_which_limit_and_how_to_raise_it() -> None:
    said = limit_spent("attempts", Limits())
    assert said is not None and said.startswith("max_attempts 50 (the default) was spent")
    assert "Limits(max_attempts=...)" in said and "budget: {max_attempts: ...}" in said
    own = limit_spent("deadline", Limits(max_seconds=12.5))
    assert own is not None and own.startswith("max_seconds 12.5 was spent;")
    assert limit_spent("model_final", Limits()) is None
