"""A contract's `$ref`s stay inside the contract: nothing is fetched when it loads (no file, no
network), so a run replays against the very schema it ran with."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.base.errors import ContractError
from runner.tools.contracts import Contract, compile_contract, load_contracts
from tests.support.network import allow_loopback_only
from tests.support.paths import ROOT
from tests.support.travel import FLIGHT_ARGS


def _with_origin(folder: Path, origin: dict[str, Any], **defs: Any) -> Path:
    """The travel contracts, search_flights' `origin` argument replaced by `origin`."""
    shutil.copytree(ROOT / "contracts", folder, dirs_exist_ok=True)
    path = folder / "search_flights.json"
    data = json.loads(path.read_text())
    data["input_schema"]["properties"]["origin"] = origin
    if defs:
        data["input_schema"]["$defs"] = defs
    path.write_text(json.dumps(data))
    return folder


def test_a_file_reference_is_refused_naming_it(tmp_path: Path) -> None:
    outside = tmp_path / "airport.json"
    outside.write_text(json.dumps({"type": "string", "pattern": "^[A-Z]{3}$"}))
    ref = outside.as_uri()
    folder = _with_origin(tmp_path / "c", {"$ref": ref})
    with pytest.raises(ContractError) as info:
        load_contracts(folder)
    message = str(info.value)
    assert "search_flights.json" in message and "input_schema at /properties/origin" in message
    assert repr(ref) in message and "outside the contract" in message and "\n" not in message


@pytest.mark.parametrize(
    "ref", ["airport.json", "airport.json#/x", "//example.org/a", "urn:example:airport"]
)
def test_a_relative_or_other_reference_is_refused(tmp_path: Path, ref: str) -> None:
    with pytest.raises(ContractError, match="outside the contract"):
        load_contracts(_with_origin(tmp_path, {"$ref": ref}))


def test_a_dynamic_reference_outside_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"\$dynamicRef 'https://example.org/a'"):
        load_contracts(_with_origin(tmp_path, {"$dynamicRef": "https://example.org/a"}))


class _Listener:
    """A real loopback HTTP listener that counts the connections it gets."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            self.connections += 1
            client.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n{"type":"string"}')
            client.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.server.close()


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Listener]:
    allow_loopback_only(monkeypatch)
    running = _Listener()
    yield running
    running.stop()


def test_an_http_reference_is_refused_and_never_fetched(
    tmp_path: Path, listener: _Listener
) -> None:
    ref = f"http://127.0.0.1:{listener.port}/airport.json"
    with pytest.raises(ContractError, match="outside the contract"):
        load_contracts(_with_origin(tmp_path, {"$ref": ref}))
    assert listener.connections == 0


def test_references_within_the_contract_still_load(tmp_path: Path) -> None:
    airport = {"type": "string", "pattern": "^[A-Z]{3}$"}
    contracts = load_contracts(_with_origin(tmp_path, {"$ref": "#/$defs/airport"}, airport=airport))
    problem = contracts["search_flights"].check_arguments({**FLIGHT_ARGS, "origin": "sfo"}, {})
    assert problem is not None and problem.field == "origin"


def test_a_reference_to_nothing_within_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as info:
        load_contracts(_with_origin(tmp_path, {"$ref": "#/$defs/missing"}))
    message = str(info.value)
    assert "'/$defs/missing' does not exist" in message
    assert "\n" not in message and "Failed validating" not in message


@pytest.mark.parametrize(
    "dialect",
    ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema"],
)
def test_every_schema_is_read_as_draft_2020_12_by_both_validators(
    tmp_path: Path, dialect: str
) -> None:
    """The reference reads Draft 2020-12 whatever `$schema` says; the compiled validator did
    follow `$schema`, and accepted alone what the reference refuses (`prefixItems` means
    nothing in draft 7)."""
    folder = _with_origin(tmp_path, {"prefixItems": [{"type": "string"}]})
    path = folder / "search_flights.json"
    data = json.loads(path.read_text())
    data["input_schema"]["$schema"] = dialect
    path.write_text(json.dumps(data))
    problem = load_contracts(folder)["search_flights"].check_arguments(
        {**FLIGHT_ARGS, "origin": [1]}, {}
    )
    assert problem is not None and problem.field == "origin.0"


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#"}, " at /: a reference leads back here on the same value"),
        ({"$dynamicRef": "#"}, " at /: a reference leads back here on the same value"),
        (
            {"$ref": "#/$defs/a/x", "$defs": {"a": True}},
            ": a reference points into what is not a schema",
        ),
        (
            {"$ref": "#/required/0", "required": ["a"]},
            ": a reference points into what is not a schema",
        ),
        (
            {"$ref": "#/prefixItems/x", "prefixItems": [{}]},
            ": a reference points into what is not a schema",
        ),
    ],
)
def test_a_reference_the_reference_validator_cannot_follow_is_one_clear_line(
    schema: dict[str, Any], says: str
) -> None:
    """Not a crash of the load (an MCP server could list such a tool to stop the pin)."""
    contract = Contract(
        name="probe",
        description="A contract whose result schema is under test.",
        input_schema={"type": "object", "additionalProperties": False},
        result_schema=schema,
        side_effect="read",
        scope="probe.read",
        timeout_s=1,
    )
    with pytest.raises(ContractError) as info:
        compile_contract(contract, "probe")
    assert f"result_schema{says}" in str(info.value)
    assert "\n" not in str(info.value)


def _compiled(input_schema: dict[str, Any], result_schema: dict[str, Any] | None = None) -> Any:
    contract = Contract(
        name="loops",
        description="A tool whose schemas try reference loops on the runner.",
        input_schema={"type": "object", "additionalProperties": False, **input_schema},
        result_schema=result_schema or {"type": "object"},
        side_effect="read",
        scope="travel.read",
        timeout_s=5,
    )
    return compile_contract(contract, "loops.json")


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"properties": {"a": {"$ref": "#/properties/a"}}}, "/properties/a"),
        ({"properties": {"a": {"allOf": [{"$ref": "#/properties/a"}, {"type": "string"}]}}}, None),
        ({"$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"anyOf": [{"$ref": "#/$defs/x"}]}}}, None),
        ({"$defs": {"n": {"$anchor": "me", "not": {"$ref": "#me"}}}}, "/$defs/n"),
        ({"allOf": [{"$ref": "#"}]}, "/"),
    ],
)
def test_a_reference_loop_that_consumes_nothing_is_refused_when_it_loads(
    schema: dict[str, Any], where: str | None
) -> None:
    """Validating such a schema never ends: jsonschema ran out of stack mid-run (a traceback
    from `check_arguments`), jsonschema-rs accepted."""
    with pytest.raises(
        ContractError, match="a reference leads back here on the same value"
    ) as info:
        _compiled(schema)
    if where is not None:
        assert f"input_schema at {where}:" in str(info.value)


def test_a_recursive_schema_that_reads_a_smaller_value_each_turn_still_loads() -> None:
    tree = {"properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    compiled = _compiled(tree)
    assert compiled.check_arguments({"kids": [{"kids": []}]}, {}) is None
    problem = compiled.check_arguments({"kids": [{"kids": [{"name": 1}]}]}, {})
    assert problem is not None and problem.reason == "unexpected argument"


def test_a_loop_behind_an_embedded_id_is_a_refused_value_not_a_crash() -> None:
    """An `$id` below the root makes `#` its own resource: left to the validators' guard, the
    loop answers the call `invalid_arguments` (and a result `malformed`) instead of raising."""
    looping = {"$id": "https://example.test/a", "allOf": [{"$ref": "#"}, {"type": "string"}]}
    compiled = _compiled({"properties": {"a": looping}}, {"properties": {"a": looping}})
    problem = compiled.check_arguments({"a": 1}, {})
    assert problem is not None and "its references loop" in problem.reason
    assert compiled.check_result({"a": 1}) == (
        "(root): the schema cannot be checked on this value: its references loop",
    )


@pytest.mark.parametrize(
    "schema",
    [
        {
            "properties": {"q": {"$ref": "#/$defs/k/const"}},
            "$defs": {"k": {"const": {"type": "string", "pattern": "(?i)^x$"}}},
        },
        {
            "properties": {
                "q": {"default": {"type": "integer"}},
                "b": {"$ref": "#/properties/q/default"},
            }
        },
        {
            "properties": {
                "q": {"examples": [{"format": "idn-hostname"}]},
                "b": {"$ref": "#/properties/q/examples/0"},
            }
        },
        {
            "properties": {
                "q": {"enum": [{"type": "integer"}]},
                "b": {"$ref": "#/properties/q/enum/0"},
            }
        },
    ],
)
def test_a_reference_into_data_is_refused_when_it_loads(schema: dict[str, Any]) -> None:
    """The data was applied as a schema that no check of the load had read: a refused pattern
    (`(?i)`) or format in a `const` was enforced through a `$ref` to it."""
    with pytest.raises(
        ContractError, match=r"points into data \(const, enum, default or examples\)"
    ):
        _compiled(schema)


def test_names_that_are_data_keywords_elsewhere_still_load() -> None:
    compiled = _compiled(
        {
            "properties": {"default": {"type": "string"}, "b": {"$ref": "#/properties/default"}},
            "$defs": {"const": {"type": "string"}},
        }
    )
    assert compiled.check_arguments({"b": "x"}, {}) is None
    assert compiled.check_arguments({"b": 1}, {}) is not None
