"""Result classes in one place (issue 10, item 3): every class has its facts in the registry."""

from typing import get_args

from runner.core.observations import ResultClass, ToolObservation
from runner.core.policy import ALLOWED_DECISIONS, DEFAULT_DECISIONS
from runner.core.result_classes import CLASSES, DISPATCHED, LEAVES_WRITE_OPEN


def test_every_result_class_has_its_facts_and_every_observation_a_class() -> None:
    assert list(CLASSES) == list(get_args(ResultClass))
    kinds = {cls.__dataclass_fields__["kind"].default for cls in get_args(ToolObservation)}
    assert kinds | {"model_final"} == set(CLASSES)


def test_the_policy_tables_are_derived_from_the_registry() -> None:
    for kind, facts in CLASSES.items():
        assert ALLOWED_DECISIONS[kind].allowed == facts.allowed
        assert DEFAULT_DECISIONS.get(kind) == facts.default
        if facts.default is not None:
            assert facts.default in facts.allowed, kind


def test_derived_sets_say_what_grading_relied_on() -> None:
    assert {
        "ok", "empty", "rate_limited", "transient", "malformed_result", "unknown_outcome",
        "not_applied",
    } == DISPATCHED  # fmt: skip
    assert {"unknown_outcome", "budget_exhausted"} == LEAVES_WRITE_OPEN
    assert {k for k, f in CLASSES.items() if f.settles_call} == {
        "ok", "empty", "permanent", "malformed_result"
    }  # fmt: skip
    assert {k for k, f in CLASSES.items() if f.retryable} == {
        "rate_limited", "transient", "not_applied"
    }  # fmt: skip
