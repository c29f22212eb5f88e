"""Scenario fixtures: YAML or JSON files that script the model and the tools for one task, in
any world (`world.py`): the format is the same whichever world plays the tools.

A fixture is validated against its own schema (the pydantic models below) and against the loaded
contracts; a bad file is one `FixtureError` naming the file and every problem found.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import to_jsonable_python

from ..base._documents import (
    TOO_DEEP,
    TOO_LONG_NUMBER,
    DocumentProblem,
    check_shape,
    load_json,
    load_yaml,
    read_text,
)
from ..base._jsonsafe import NotJson, json_value
from ..base.clock import LATEST_START
from ..base.errors import FixtureError
from ..core.budget import Limits
from ..core.evidence import EvidenceRequirement
from ..core.observations import RESULT_CLASSES
from ..core.policy import ApprovalRules
from ..core.states import TERMINAL, State
from ..models.pricing import ModelPrice
from ..models.scripted import ScriptedTurn
from ..tools.contracts import ContractSet
from ..tools.retrieval import ToolRetrieval

FIXTURE_SUFFIXES = (".yaml", ".yml", ".json")


class TaskConstraints(BaseModel):
    """What the task authorizes, set by the runtime (the fixture), never by the model: the
    semantic rules of a world's contracts see it as the run's context (`{"task": ...}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    earliest: date | None = None
    """First date any search or booking may touch."""
    latest: date | None = None
    """Last date any search or booking may touch."""


class PrincipalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    scopes: list[str]


class ClockSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: AwareDatetime = Field(default=datetime(2027, 3, 1, 9, 0, tzinfo=UTC), le=LATEST_START)
    """At most `clock.LATEST_START`: a start near year 9999 overflowed mid-run."""


class ToolOutcome(BaseModel):
    """One scripted outcome of one call: respond (verbatim), time out, or fail."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    respond: Any = None
    """Returned verbatim, so malformed outputs are plain data."""
    retry_after: str | None = None
    """The Retry-After header's value: delay-seconds (`2` or `"2"`) or an HTTP-date."""
    timeout: bool = False
    """No response before the call's timeout."""
    fail: Literal["connection", "crash"] | None = None
    """Raise instead of answering: a dropped connection or a crash inside the tool."""
    write: Literal["commit", "commit_then_lose_response", "fail_before_commit"] | None = None
    """For supplier writes: commit and respond; commit and lose the response (the caller sees a
    timeout); or fail before committing (the caller sees a timeout too)."""

    latency_s: float = Field(default=0.0, ge=0, strict=True)

    @field_validator("retry_after", mode="before")
    @classmethod
    def _delay_seconds(cls, value: object) -> object:
        """A whole number written unquoted is delay-seconds, as the header would carry it."""
        return str(value) if type(value) is int and value >= 0 else value

    @model_validator(mode="after")
    def _one_outcome(self) -> ToolOutcome:
        forms = (
            ("respond" in self.model_fields_set)
            + self.timeout
            + (self.fail is not None)
            + (self.write is not None)
        )
        if forms != 1:
            raise ValueError("an outcome has exactly one of respond, timeout: true, fail, or write")
        return self


class Expect(BaseModel):
    """What the run must come to; every field given is checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    terminal: State
    """Where the run must end: one of the terminal states (checked below)."""
    reason: str | None = None
    attempts: StrictInt | None = None
    model_steps: StrictInt | None = None
    waits_s: list[StrictFloat] | None = None
    transitions: list[State] | None = None
    """The states visited, starting with plan."""
    answer_contains: list[str] | None = None
    holds: StrictInt | None = None
    """Active holds in the supplier database when the run ends."""
    operation_key_preserved: bool | None = None
    """The run ends handing over the key of a write whose outcome is unknown."""
    cost_usd: StrictFloat | None = None
    """What the run's model requests cost in total (to the nano-dollar)."""

    @field_validator("terminal")
    @classmethod
    def _terminal(cls, state: State) -> State:
        if state not in TERMINAL:  # a run never ends in plan, call or observe
            ends = ", ".join(s.value for s in State if s in TERMINAL)
            raise ValueError(f"must be a terminal state ({ends}), got {state.value!r}")
        return state


class ApprovalScript(BaseModel):
    """What needs approval in a fixture, and what the person outside the model decides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: ApprovalRules = Field(default_factory=ApprovalRules)
    """Merged into the run's policy (contracts may require approval on their own, too)."""
    decision: Literal["approve", "deny"] | None = None
    """What the approver decides on the run's pending proposal (None: nobody decides)."""
    approver: str = "approver-1"
    note: str | None = None
    ttl_s: float = Field(default=1800.0, gt=0, strict=True)
    """How long the confirm token is valid after the decision."""
    continue_after_s: float = Field(default=60.0, ge=0, strict=True)
    """When the continuation is asked for, after the decision."""
    present: Literal["issued", "forged", "other_run"] = "issued"
    """Which token the continuation presents: the one issued, one signed with another secret,
    or the one issued for the same proposal of another run of this fixture."""
    tenant: str | None = None
    """Continue under another tenant than the fixture's."""
    policy: dict[str, Any] | None = None
    """Policy fields changed between the decision and the continuation."""
    refused: str | None = None
    """The continuation must be refused with this problem (`forged`, `expired`, `other_run`...),
    storing and sending nothing."""
    expect: Expect | None = None
    """What the continuation after the decision must come to."""


class ChildScript(BaseModel):
    """A child-run tool's sub-agent, scripted: each call of the tool runs it as a run of its own
    (`runner.engine.children.ChildRun`), under the fixture's tenant, principal and clock, on a
    budget carved from what the calling run has left, its tools played in the fixture's world."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(min_length=1)
    """The child's task, a template over the call's arguments (`Research: {question}`)."""
    budget: Limits = Field(default_factory=Limits)
    """The most a child may ever have; cut down to what the calling run has left."""
    tools: list[str] = Field(min_length=1)
    environment: dict[str, list[ToolOutcome]] = Field(default_factory=dict)
    model: list[ScriptedTurn] = Field(min_length=1)
    """Each child follows this script from its start."""
    price: ModelPrice | None = None
    expect: Expect | None = None
    """What every child run of the tool must come to."""

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ChildScript:
        problems = []
        known = (info.context or {}).get("known_tools")
        if known is not None:
            missing = [tool for tool in self.tools if tool not in known]
            if missing:
                problems.append(f"tools without a contract: {', '.join(missing)}")
        unknown = sorted(set(self.environment) - set(self.tools))
        if unknown:
            problems.append(f"environment scripts tools not in tools: {', '.join(unknown)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Fixture(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    description: str = Field(min_length=1)
    task: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    principal: PrincipalSpec
    budget: Limits = Field(default_factory=Limits)
    clock: ClockSpec = Field(default_factory=ClockSpec)
    constraints: TaskConstraints = Field(default_factory=TaskConstraints)
    tools: list[str] = Field(min_length=1)
    environment: dict[str, list[ToolOutcome]] = Field(default_factory=dict)
    model: list[ScriptedTurn] = Field(min_length=1)
    price: ModelPrice | None = None
    """What the scripted model's requests cost (None: `SCRIPTED_PRICE`)."""
    retrieval: ToolRetrieval | None = None
    """How the run's catalogue is offered (None: whole at every request)."""
    expect: Expect | None = None
    approval: ApprovalScript | None = None
    required_evidence: list[EvidenceRequirement] = Field(default_factory=list)
    """What a complete answer needs (the completion gate)."""
    prohibited: list[str] = Field(default_factory=list)
    """Calls the script makes (obeying instructions in tool results) that must never be
    dispatched: the injection corpus checks each is refused at admission and recorded."""
    children: dict[str, ChildScript] = Field(default_factory=dict)
    """The child-run tools among `tools`, each with the sub-agent a call of it runs."""

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Fixture:
        problems = []
        known = (info.context or {}).get("known_tools")
        if known is not None:
            missing = [tool for tool in self.tools if tool not in known]
            if missing:
                problems.append(f"tools without a contract: {', '.join(missing)}")
        unknown = sorted(set(self.environment) - set(self.tools))
        if unknown:
            problems.append(f"environment scripts tools not in tools: {', '.join(unknown)}")
        unknown = sorted(set(self.children) - set(self.tools))
        if unknown:
            problems.append(f"children script tools not in tools: {', '.join(unknown)}")
        both = ", ".join(sorted(set(self.children) & set(self.environment)))
        if both:
            problems.append(f"child-run tools are scripted in children, not environment: {both}")
        problems += [
            f"when: {cls!r} is not a result class"
            for turn in (*self.model, *(t for c in self.children.values() for t in c.model))
            for cls in turn.when or ()
            if cls not in RESULT_CLASSES
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def child(self, tool: str) -> Fixture:
        """The fixture a child run of `tool` plays: its script, under this one's tenant,
        principal, clock and constraints."""
        script = self.children[tool]
        return Fixture(
            name=f"{self.name}__{tool}",
            description=f"The sub-agent a call of {tool} runs in {self.name}.",
            task=script.task,
            tenant=self.tenant,
            principal=self.principal,
            budget=script.budget,
            clock=self.clock,
            constraints=self.constraints,
            tools=script.tools,
            environment=script.environment,
            model=script.model,
            price=script.price,
            expect=script.expect,
        )


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(root)"
        parts.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
    return "; ".join(parts)


def parse_fixture(path: Path, known_tools: Iterable[str] | None = None) -> Fixture:
    """Read and validate one fixture file (against `known_tools` too, when given)."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise FixtureError(path, f"cannot read: {exc.strerror}") from exc
    except DocumentProblem as exc:
        raise FixtureError(path, str(exc)) from exc
    try:
        data = load_json(text) if path.suffix == ".json" else load_yaml(text)
        check_shape(data)
    except RecursionError as exc:
        raise FixtureError(path, TOO_DEEP) from exc
    except DocumentProblem as exc:
        raise FixtureError(path, str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise FixtureError(path, f"not valid JSON at line {exc.lineno}: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise FixtureError(path, f"not valid YAML{where}: {problem}") from exc
    except ValueError as exc:  # after JSONDecodeError, its subclass
        raise FixtureError(path, TOO_LONG_NUMBER) from exc
    if not isinstance(data, dict):
        raise FixtureError(path, "must be a mapping of fixture fields")
    context = {"known_tools": set(known_tools)} if known_tools is not None else None
    try:
        fixture = Fixture.model_validate(data, context=context)
    except ValidationError as exc:
        raise FixtureError(path, _format_errors(exc)) from exc
    try:  # a run keeps its fixture in its header: refused here, by file, before any run starts
        # (a JSON dump writes NaN as null: a free-form `respond` or `args` with one would run
        # with NaN and resume, from the header, with null)
        document = to_jsonable_python(
            fixture.model_dump(exclude_unset=True), inf_nan_mode="constants"
        )
        json_value(document, refuse_surrogates=True)
    except NotJson as exc:
        raise FixtureError(path, f"not plain JSON at {exc}") from exc
    return fixture


def load_fixture(path: Path, contracts: ContractSet) -> Fixture:
    """Parse a fixture and check it against the loaded contracts: a child-run tool among its
    tools is scripted in `children` (and only such a tool is), and a child has none of its own."""
    fixture = parse_fixture(path, contracts)
    problems = child_problems(fixture, contracts)
    if problems:
        raise FixtureError(path, "; ".join(problems))
    return fixture


def child_problems(fixture: Fixture, contracts: ContractSet) -> list[str]:
    """What is wrong with how `fixture` scripts its child-run tools (empty: nothing)."""

    def carries_child(tool: str) -> bool:
        compiled = contracts.get(tool)
        return compiled is not None and compiled.carries_child

    problems = [
        f"tools: {tool} is a child-run tool: script its child under children.{tool}"
        for tool in fixture.tools
        if carries_child(tool) and tool not in fixture.children
    ]
    problems += [
        f"children.{tool}: {tool} is not a child-run tool"
        for tool in fixture.children
        if not carries_child(tool) and tool in contracts
    ]
    problems += [
        f"children.{tool}.tools: {inner} is a child-run tool (a scripted child starts none)"
        for tool, script in fixture.children.items()
        for inner in script.tools
        if carries_child(inner)
    ]
    for tool, script in fixture.children.items():
        if carries_child(tool):
            arguments = set(contracts[tool].contract.input_schema.get("properties", {}))
            try:
                named = {f for _, f, _, _ in string.Formatter().parse(script.task) if f}
            except ValueError as exc:
                problems.append(f"children.{tool}.task: not a template: {exc}")
                continue
            unknown = sorted(named - arguments)
            if unknown:
                problems.append(
                    f"children.{tool}.task names {', '.join(unknown)}, not arguments of {tool}"
                )
    return problems


def collect_fixture_paths(paths: Iterable[Path]) -> list[Path]:
    """Expand folders into their fixture files (sorted); a missing path is a `FixtureError`."""
    paths = list(paths)
    found, missing = expand_fixture_paths(paths)
    if missing:
        raise FixtureError(missing[0], "no such file or folder")
    if not found:
        raise FixtureError(", ".join(str(p) for p in paths), "no fixture files found")
    return found


def expand_fixture_paths(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """The fixture files `paths` name (folders expanded, sorted), and the paths not there."""
    found: list[Path] = []
    missing: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.suffix in FIXTURE_SUFFIXES))
        elif path.is_file():
            found.append(path)
        else:
            missing.append(path)
    return found, missing
