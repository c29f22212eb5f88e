"""Tools declared in Python: the contract a JSON file holds, decided alike, exported, dispatched."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, IPvAnyAddress, field_validator
from pydantic.json_schema import SkipJsonSchema

from runner.base.clock import FakeClock
from runner.base.errors import ContractError
from runner.cli import main
from runner.engine.engine import Engine
from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.record.spec import RunResult, RunSpec
from runner.store import MemoryStore
from runner.tools.contracts import CompiledContract, load_contract_file, load_contracts
from runner.tools.declare import DeclaredTools, contract_json, declare_contract, declared_in
from runner.tools.invocation import Principal, ToolInvocation
from tests.support import declared_tools
from tests.support.paths import ROOT

DECLARED = declared_tools.tools.contracts[0]
MODULE = declared_tools.__name__
FILE = load_contract_file(ROOT / "contracts" / "search_flights.json", {})  # schema only, no rules


def _exported(tmp: Path) -> CompiledContract:
    (tmp / "search_flights.json").write_text(contract_json(DECLARED), encoding="utf-8")
    return load_contracts(tmp)["search_flights"]


MISSING = object()
AIRPORT = ["SFO", "NRT", "sfo", "SF", "SFOX", "SFO\n", 12, None, MISSING]
DATE = ["2027-04-01", "2028-02-29", "2027-02-29", "2027-4-1", "2027-04-01\n", 5, MISSING]
STAMP = ["2027-03-01T09:00:00Z", "2027-12-31T23:59:60Z", "2027-03-01T09:00:00", "x", None, MISSING]
ANYTHING = [None, True, 0, -1, 1.5, "x", [], {}]
VALID_ARGUMENTS = {
    "origin": "SFO",
    "destination": "NRT",
    "date_start": "2027-04-01",
    "date_end": "2027-04-03",
    "accessibility": "wheelchair",
}
ARGUMENT_VALUES: dict[str, list[Any]] = {
    "origin": AIRPORT,
    "destination": AIRPORT,
    "date_start": DATE,
    "date_end": DATE,
    "accessibility": ["wheelchair", "none", "Wheelchair", None, MISSING],
    "max_results": [0, 1, 5, 10, 11, 5.0, 5.5, True, "5", None, MISSING],
    "from": ["SFO", MISSING],
    "tenant": ["acme", MISSING],
}
OPTION = {"flight_id": "NH7", "assistance_status": "reported_available"}
OK = {"status": "ok", "options": [OPTION], "source_timestamp": "2027-03-01T09:00:00Z"}
ERROR = {"status": "error", "error_code": "rate_limited", "retryable": True}
RESULT_VALUES: dict[str, list[Any]] = {
    "status": ["ok", "error", "OK", None, MISSING],
    "options": [[], [OPTION] * 10, [OPTION] * 11, [1], None, MISSING],
    "source_timestamp": STAMP,
    "error_code": ["rate_limited", "access_denied", "teapot", None, MISSING],
    "retryable": [True, False, "yes", None, MISSING],
    "message": ["slow down", "m" * 500, "m" * 501, None, 4, MISSING],
    "field": ["origin", None, MISSING],
    "extra": [*ANYTHING, MISSING],
}
OPTION_VALUES: dict[str, list[Any]] = {
    "flight_id": ["NH7", "N", "", 7, MISSING],
    "assistance_status": ["unknown", "reported_unavailable", "maybe", MISSING],
    "departs_at": STAMP,
    "price_usd": [0, 120.5, -1, "12", None, MISSING],
    "seat": [*ANYTHING, MISSING],
}


@st.composite
def _near(draw: st.DrawFn, base: dict[str, Any], values: dict[str, list[Any]]) -> dict[str, Any]:
    """`base` (valid) with up to three keys changed: most inputs are one mistake from valid."""
    changed = dict(base)
    for key in draw(st.lists(st.sampled_from(sorted(values)), max_size=3, unique=True)):
        value = draw(st.sampled_from(values[key]))
        if value is MISSING:
            changed.pop(key, None)
        else:
            changed[key] = value
    return changed


ARGUMENTS = _near(VALID_ARGUMENTS, ARGUMENT_VALUES)
RESULT = st.one_of(
    st.builds(
        lambda top, option: {**top, "options": [option]} if top.get("options") == [OPTION] else top,
        _near(OK, RESULT_VALUES),
        _near(OPTION, OPTION_VALUES),
    ),
    _near(ERROR, RESULT_VALUES),
    st.sampled_from(ANYTHING),
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> CompiledContract:
    return _exported(tmp_path_factory.mktemp("export"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=ARGUMENTS, payload=RESULT)
def test_declared_contract_decides_like_the_json_file_and_its_export(
    arguments: dict[str, Any], payload: Any, exported: CompiledContract
) -> None:
    declared_verdict = DECLARED.check_arguments(arguments, {})
    # The export is the same schema: the same problem, word for word.
    assert exported.check_arguments(arguments, {}) == declared_verdict
    # The hand-written file is another text of the same contract: the same verdict.
    assert (FILE.check_arguments(arguments, {}) is None) == (declared_verdict is None)
    declared_errors = DECLARED.check_result(payload)
    assert exported.check_result(payload) == declared_errors
    assert (FILE.check_result(payload) == ()) == (declared_errors == ())
    # The fast path decides as the reference on the declared schemas too.
    reference = not any(True for _ in DECLARED.result_validator.iter_errors(payload))
    assert DECLARED.fast_result.is_valid(payload) == reference


def test_the_export_round_trips_to_the_same_contract(tmp_path: Path) -> None:
    exported = _exported(tmp_path)
    assert exported.contract == DECLARED.contract
    assert contract_json(exported) == contract_json(DECLARED)


def _drive(tools: DeclaredTools) -> RunResult:
    """One run that calls search_flights once, then answers."""
    model = ScriptedModel(
        [
            ScriptedTurn.model_validate(
                {"tool_calls": [{"name": "search_flights", "args": VALID_ARGUMENTS}]}
            ),
            ScriptedTurn.model_validate({"final": "NH7, assistance unknown"}),
        ]
    )
    engine = Engine(
        contracts=tools.contract_set(),
        toolbox=tools,
        store=MemoryStore(),
        clock=FakeClock(datetime(2027, 3, 1, 9, tzinfo=UTC)),
    )
    spec = RunSpec(
        task="find flights",
        tenant="acme",
        principal=Principal(id="svc", scopes=frozenset({"travel.read"})),
        tools=("search_flights",),
    )
    return engine.run_sync(spec, model)


def test_a_declared_tool_is_dispatched_with_its_model_and_its_result_dumped() -> None:
    tools = DeclaredTools()
    seen: list[declared_tools.SearchFlights] = []

    @tools.tool(
        arguments=declared_tools.SearchFlights,
        result=declared_tools.FlightsFound | declared_tools.ToolError,
        scope="travel.read",
        timeout_s=10,
        results_field="options",
    )
    async def search_flights(args: declared_tools.SearchFlights) -> declared_tools.FlightsFound:
        """Search flights between two airports; use it to find options, never to book them."""
        seen.append(args)
        option = declared_tools.FlightOption(flight_id="NH7", assistance_status="unknown")
        return declared_tools.FlightsFound(
            status="ok", options=[option], source_timestamp=datetime(2027, 3, 1, tzinfo=UTC)
        )

    result = _drive(tools)
    assert result.terminal.value == "complete"
    assert [r.result_class for r in result.transitions if r.trigger == "classify"] == ["ok"]
    assert seen and seen[0].origin == "SFO" and str(seen[0].date_start) == "2027-04-01"
    # None fields are left out of the payload, so the result passes its schema (no nulls there).
    options = result.evidence[0]["result"]["options"]
    assert options == [{"flight_id": "NH7", "assistance_status": "unknown"}]
    assert search_flights.__name__ == "search_flights"  # the function is returned unchanged


class Loose(BaseModel):
    city: str


class Checked(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str

    @field_validator("city")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class Host(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: IPvAnyAddress


class Lettered(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = Field(pattern=r"^\p{L}+$")


class Ok(BaseModel):
    status: Literal["ok"]


class Bounded(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int | None = None


def _declare(arguments: type[BaseModel], result: Any = Ok) -> CompiledContract:
    return declare_contract(
        name="lookup_city",
        description="Look a city up by name; never use it to book anything.",
        arguments=arguments,
        result=result,
        scope="travel.read",
        timeout_s=5,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (Loose, "must forbid extra fields"),
        (Checked, "pydantic validators cannot be written as JSON Schema (Checked._upper)"),
        (Host, "format 'ipvanyaddress' cannot be asserted"),
        (Lettered, "pattern '^\\\\p{L}+$' is refused"),
    ],
)
def test_what_a_schema_cannot_carry_is_refused_by_name(
    arguments: type[BaseModel], message: str
) -> None:
    with pytest.raises(ContractError, match="lookup_city") as caught:
        _declare(arguments)
    assert message in str(caught.value)


def test_a_pydantic_constraint_the_schema_would_drop_is_refused() -> None:
    class Leaky(BaseModel):  # pydantic cannot put `ge` on the int inside this union
        model_config = ConfigDict(extra="forbid")
        count: int | SkipJsonSchema[None] = Field(default=None, ge=1)

    with pytest.raises(ContractError, match="'ge' is a pydantic constraint"):
        _declare(Leaky)
    assert _declare(Bounded).name == "lookup_city"


def test_a_tool_must_be_async() -> None:
    tools = DeclaredTools()
    with pytest.raises(ContractError, match="must be an async def"):

        @tools.tool(arguments=Bounded, result=Ok, scope="s", timeout_s=1)
        def lookup_city(args: Bounded) -> Ok:  # pragma: no cover - refused when declared
            """Look a city up by name; never use it to book anything."""
            return Ok(status="ok")


def test_contracts_export_writes_the_json_for_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert declared_in(declared_tools) == [DECLARED]
    out = tmp_path / "contracts"
    assert main(["contracts", "export", "--module", MODULE, "--out", str(out)]) == 0
    written = out / "search_flights.json"
    assert written.read_text(encoding="utf-8") == contract_json(DECLARED)
    assert "search_flights.json" in capsys.readouterr().out
    assert main(["--contracts", str(out), "contracts", "check"]) == 0
    # --check: the files are what the module declares (0), or the drift is named (1).
    args = ["contracts", "export", "--module", MODULE, "--out", str(out), "--check"]
    assert main(args) == 0
    written.write_text(written.read_text().replace('"timeout_s": 10.0', '"timeout_s": 9'))
    assert main(args) == 1
    assert "search_flights.json differs" in capsys.readouterr().out
    # Without --out: the one contract on stdout.
    assert main(["contracts", "export", "--module", MODULE]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "search_flights"


def test_contracts_export_of_a_module_that_does_not_import_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["contracts", "export", "--module", "tests.no_such_module"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "tests.no_such_module" in err


def test_a_file_contract_is_implemented_with_a_plain_mapping() -> None:
    tools = DeclaredTools()
    received: list[tuple[dict[str, Any], str]] = []

    @tools.implement(FILE)
    async def search_flights(arguments: dict[str, Any], invocation: ToolInvocation) -> object:
        received.append((arguments, invocation.tenant))
        return {"status": "ok", "options": [], "source_timestamp": "2027-03-01T09:00:00Z"}

    result = _drive(tools)
    assert received == [(VALID_ARGUMENTS, "acme")]
    assert [r.result_class for r in result.transitions if r.trigger == "classify"] == ["empty"]


def test_a_dangling_reconcile_with_is_refused_when_the_set_is_built() -> None:
    hold = declare_contract(
        name="hold_seat",
        description="Hold a seat on a flight; use it only once the traveller has chosen one.",
        arguments=Bounded,
        result=Ok,
        scope="travel.book",
        timeout_s=5,
        side_effect="write",
        reconcile_with="lookup_seat",
    )
    tools = DeclaredTools()
    tools.add(hold)
    with pytest.raises(ContractError, match="reconcile_with names 'lookup_seat'"):
        tools.contract_set()


def test_a_discriminated_union_result_decides_by_its_status() -> None:
    result = Annotated[
        declared_tools.FlightsFound | declared_tools.ToolError, Field(discriminator="status")
    ]
    compiled = _declare(Bounded, result)
    assert (
        compiled.check_result({"status": "error", "error_code": "rate_limited", "retryable": True})
        == ()
    )
    assert compiled.check_result({"status": "error", "error_code": "x", "retryable": True}) == (
        "error_code: 'x' is not one of "
        "['invalid_arguments', 'access_denied', 'rate_limited', 'service_unavailable']",
    )


def test_contract_set_takes_contracts_loaded_from_files_as_they_come(tmp_path: Path) -> None:
    """`contract_set(load_contracts(folder))` crashed: a `ContractSet` is a mapping of names."""
    declared = declared_tools.tools.contract_set()
    folder = tmp_path / "contracts"
    folder.mkdir()
    for name in declared:  # the declared tools' contracts, as files, under other names
        data = json.loads(contract_json(declared[name]))
        data["name"] = f"filed_{name}"
        (folder / f"filed_{name}.json").write_text(json.dumps(data))
    loaded = load_contracts(folder)
    combined = declared_tools.tools.contract_set(loaded)
    assert set(combined) == {*declared, *loaded} and len(loaded) == len(declared) > 0
    assert declared_tools.tools.contract_set(loaded.values()).keys() == combined.keys()
    with pytest.raises(ContractError, match="declared twice"):
        declared_tools.tools.contract_set(loaded, [load_contracts(folder)[next(iter(loaded))]])
