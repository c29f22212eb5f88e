from runner.core.budget import Bound, Limits, Usage, blocks_dispatch, spent, time_left


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


def test_defaults_match_the_design() -> None:
    limits = Limits()
    assert (limits.max_attempts, limits.max_seconds) == (8, 30.0)
