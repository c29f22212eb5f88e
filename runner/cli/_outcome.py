"""How `run`, `resume` and `continue` print a scenario run: its view (text or `--json`), then
whether it met what its fixture expects."""

from __future__ import annotations

import json

from ..harness.scenario import ScenarioRun
from ..proof.report import RunView, printable, run_json, run_text


def print_scenario(
    outcome: ScenarioRun, heading: str, as_json: bool, *, continuation: bool = False
) -> None:
    """One scenario run as `run` prints it; a `continuation` is checked against the fixture's
    `approval.expect` (what the run comes to after the decision), not its `expect`."""
    view = RunView.of_result(outcome.result, outcome.holds)
    expect = {"passed": outcome.passed, "failures": outcome.failures}
    if as_json:
        print(json.dumps(run_json(view, expect), sort_keys=True))
        return
    print(run_text(view, heading))
    for child in outcome.children:  # the child runs its child-run tools started
        print(run_text(RunView.of_result(child, None), f"child {child.name}"))
    declared = (
        outcome.fixture.approval.expect if continuation and outcome.fixture.approval else None
    )
    if outcome.fixture.expect is not None or declared is not None:
        verdict = "met" if outcome.passed else "FAILED: " + "; ".join(outcome.failures)
        print(f"  expect: {printable(verdict)}")
    print()
