from runner.core.states import TERMINAL, State


def test_seven_states_four_terminal() -> None:
    assert [s.value for s in State] == [
        "plan",
        "call",
        "observe",
        "complete",
        "abstain",
        "escalate",
        "unknown",
    ]
    assert {s.value for s in TERMINAL} == {"complete", "abstain", "escalate", "unknown"}
