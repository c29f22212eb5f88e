"""What the runner would make of a fixture's script, before running it (`runner fixtures check`).

Each scripted model call is admitted as the engine admits it (a known tool the model is offered,
a scope the principal holds, arguments that pass the contract and its semantic rules), and each
scripted `respond` is checked against the tool's result schema. Whatever would be refused is a
finding naming the place in the file, the result class the run would record and why; a fixture
that names that class itself (in a turn's `when`, or as `expect.reason`) scripts it on purpose,
so it is a note instead of a warning. Nothing here depends on the world: the contracts say it all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..base._jsonsafe import NotJson, json_value
from ..tools.contracts import ContractSet
from .fixtures import Fixture


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptFinding:
    """One scripted call or response the runner would refuse."""

    where: str
    """Where in the fixture: `model[0].tool_calls[1] TOOL` or `environment.TOOL[2]`."""
    result_class: str
    """What the run would record for it: invalid_arguments, unknown_tool, malformed_result..."""
    detail: str
    anticipated: bool
    """The fixture names `result_class` itself: it scripts this on purpose."""

    def line(self) -> str:
        label = "note" if self.anticipated else "warning"
        tail = f" (the fixture expects {self.result_class})" if self.anticipated else ""
        return f"{label}: {self.where}: would be {self.result_class}: {self.detail}{tail}"


def _named_classes(fixture: Fixture) -> set[str]:
    named = {cls for turn in fixture.model for cls in turn.when or ()}
    if fixture.expect is not None and fixture.expect.reason is not None:
        named.add(fixture.expect.reason)
    return named


def _call_findings(fixture: Fixture, contracts: ContractSet) -> Iterable[tuple[str, str, str]]:
    """(where, class, why) for each scripted call, in the order the engine admits it."""
    scopes = set(fixture.principal.scopes)
    context = {"task": fixture.constraints}  # what the scenario gives the semantic rules
    for turn_index, turn in enumerate(fixture.model):
        for call_index, call in enumerate(turn.tool_calls or ()):
            where = f"model[{turn_index}].tool_calls[{call_index}] {call.name}"
            contract = contracts.get(call.name)
            if contract is None or contract.contract.audience != "model":
                yield where, "unknown_tool", "no contract offers this tool to the model"
            elif contract.contract.scope not in scopes:
                needed = contract.contract.scope
                yield where, "access_denied", f"scope {needed} is not granted to the principal"
            elif call.name not in fixture.tools:
                yield where, "unknown_tool", "not one of the fixture's tools"
            else:
                try:  # as the runtime takes a model's arguments: plain JSON or refused
                    arguments = json_value(call.args, refuse_surrogates=True)
                except NotJson as exc:
                    why = f"arguments are not plain JSON: {exc}{_hint(exc)}"
                    yield where, "invalid_arguments", why
                    continue
                problem = contract.check_arguments(arguments, context)
                if problem is not None:
                    field = f"{problem.field}: " if problem.field else ""
                    yield where, "invalid_arguments", f"{field}{problem.reason}"


def _response_findings(fixture: Fixture, contracts: ContractSet) -> Iterable[tuple[str, str, str]]:
    for tool, outcomes in fixture.environment.items():
        contract = contracts.get(tool)
        if contract is None:
            continue  # loading the fixture already refused a tool without a contract
        is_write = contract.contract.side_effect == "write"
        for index, outcome in enumerate(outcomes):
            if "respond" not in outcome.model_fields_set:
                continue
            # A garbled answer from a write does not say whether it happened.
            kind = "unknown_outcome" if is_write else "malformed_result"
            try:
                payload = json_value(outcome.respond)
            except NotJson as exc:
                why = f"the payload is not plain JSON: {exc}{_hint(exc)}"
                yield f"environment.{tool}[{index}]", kind, why
                continue
            errors = contract.check_result(payload)
            if errors:
                yield f"environment.{tool}[{index}]", kind, errors[0]


def _hint(exc: NotJson) -> str:
    if "date" in str(exc) or "time" in str(exc):
        return " (YAML reads an unquoted date or time as one: quote it)"
    return ""


def check_script(fixture: Fixture, contracts: ContractSet) -> list[ScriptFinding]:
    """Every scripted call and response of `fixture` that the runner would refuse."""
    named = _named_classes(fixture)
    found = [*_call_findings(fixture, contracts), *_response_findings(fixture, contracts)]
    return [
        ScriptFinding(where=where, result_class=kind, detail=why, anticipated=kind in named)
        for where, kind, why in found
    ]
