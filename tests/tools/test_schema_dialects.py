"""A schema names only the drafts the runner reads as 2020-12, and nothing it carries can make the
compiled validator accept what the reference refuses.

`$schema`, at any depth, is absent or one of `ALLOWED_DIALECTS`; `$vocabulary` is refused
anywhere; both validators get copies without `$schema`, so none switches draft. The differential
test generates schemas mixing `$schema`, `$id`, anchors, dynamic and recursive references,
`$vocabulary` and the usual assertions, with the exploits found by hand as explicit examples,
and holds one direction: whenever the compiled validator accepts an instance the reference
accepts it too, or the schema was refused when it loaded. Meanwhile a loopback server serving a
meta-schema that turns every assertion off counts the requests it gets: none.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from runner.base.errors import ContractError
from runner.tools.contracts import CompiledContract, Contract, compile_contract, load_contracts
from tests.support.meta_server import CORE_ONLY, MetaSchemaServer
from tests.support.network import allow_loopback_only
from tests.support.paths import ROOT
from tests.support.travel import FLIGHT_ARGS

META_URL = "META_URL"
"""Stands for the live meta-schema server's URL in a schema (its port is known only at run)."""
DRAFTS = [
    f"{scheme}://json-schema.org/{draft}/schema{end}"
    for scheme in ("http", "https")
    for draft in ("draft/2020-12", "draft/2019-09", "draft-07")
    for end in ("", "#")
]
"""Each spelling of the three drafts real servers emit (`_validators.ALLOWED_DIALECTS`)."""


@pytest.fixture(scope="module")
def meta_server() -> Iterator[MetaSchemaServer]:
    running = MetaSchemaServer()
    yield running
    running.stop()


@pytest.fixture
def served(meta_server: MetaSchemaServer, monkeypatch: pytest.MonkeyPatch) -> MetaSchemaServer:
    allow_loopback_only(monkeypatch)
    meta_server.requests.clear()
    return meta_server


def _with_input(folder: Path, edit: dict[str, Any]) -> Path:
    """The travel contracts, search_flights' input schema updated with `edit` (top-level keys)."""
    shutil.copytree(ROOT / "contracts", folder, dirs_exist_ok=True)
    path = folder / "search_flights.json"
    data = json.loads(path.read_text())
    data["input_schema"].update(edit)
    path.write_text(json.dumps(data))
    return folder


def _origin(schema: dict[str, Any]) -> dict[str, Any]:
    """search_flights' properties with `origin` replaced by `schema`."""
    data = json.loads((ROOT / "contracts" / "search_flights.json").read_text())
    return {"properties": {**data["input_schema"]["properties"], "origin": schema}}


@pytest.mark.parametrize(
    ("edit", "place", "value"),
    [
        ({"$schema": "https://example.org/my-schema"}, "/", "https://example.org/my-schema"),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "/", "draft-04"),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema/"}, "/", "2020-12/schema/"),
        ({"$schema": 7}, "/", "7"),
        (_origin({"$schema": "urn:x", "type": "string"}), "/properties/origin", "urn:x"),
        (
            {"$defs": {"a": {"$id": "https://example.org/a", "$schema": "https://example.org/m"}}},
            "/$defs/a",
            "https://example.org/m",
        ),
        ({"$vocabulary": CORE_ONLY}, "/", "$vocabulary"),
        (_origin({"$vocabulary": CORE_ONLY, "type": "string"}), "/properties/origin", "core"),
    ],
)
def test_a_draft_or_vocabulary_the_runner_does_not_read_is_refused_in_one_line(
    tmp_path: Path, edit: dict[str, Any], place: str, value: str
) -> None:
    with pytest.raises(ContractError) as info:
        load_contracts(_with_input(tmp_path, edit))
    message = str(info.value)
    assert "search_flights.json" in message and f"input_schema at {place}:" in message
    assert value in message and "\n" not in message


@pytest.mark.parametrize("dialect", DRAFTS)
def test_each_allowed_dialect_loads_at_any_depth_and_reads_as_2020_12(
    tmp_path: Path, dialect: str
) -> None:
    """Draft 7 would let `$ref` hide its siblings, and jsonschema-rs followed a nested
    `$schema` so: read as 2020-12, `origin` is still a string of three capitals."""
    origin = {
        "$schema": dialect,
        "$ref": "#/$defs/anything",
        "type": "string",
        "pattern": "^[A-Z]{3}$",
    }
    folder = _with_input(
        tmp_path, {"$schema": dialect, **_origin(origin), "$defs": {"anything": {}}}
    )
    compiled = load_contracts(folder)["search_flights"]
    assert compiled.check_arguments(FLIGHT_ARGS, {}) is None
    for origin_value in (1, "sfo"):
        arguments = {**FLIGHT_ARGS, "origin": origin_value}
        assert not compiled.fast_input.is_valid(arguments)
        problem = compiled.check_arguments(arguments, {})
        assert problem is not None and problem.field == "origin"


def test_a_pydantic_schema_naming_draft_7_loads() -> None:
    """What real servers emit: `$defs` with `$ref: "#/$defs/..."`, `$schema` draft 7 at the top."""

    class Airport(BaseModel):
        code: str

    class Search(BaseModel):
        model_config = ConfigDict(extra="forbid")
        origin: Airport
        stops: list[Airport] = []

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **Search.model_json_schema()}
    assert "$defs" in schema
    compiled = _compiled(schema)
    assert compiled.fast_result.is_valid({"origin": {"code": "SFO"}})
    assert not compiled.fast_result.is_valid({"origin": {"code": 1}})
    assert compiled.check_result({"origin": {"code": 1}})


def _compiled(schema: Any) -> CompiledContract:
    """`schema` as the result schema of a contract (the result schema takes any shape)."""
    contract = Contract(
        name="probe",
        description="A contract whose result schema is under test.",
        input_schema={"type": "object", "additionalProperties": False},
        result_schema=schema if isinstance(schema, dict) else {"allOf": [schema]},
        side_effect="read",
        scope="probe.read",
        timeout_s=1,
    )
    return compile_contract(contract, "probe")


# -- the differential test ---------------------------------------------------------------------

DIALECTS = st.sampled_from(
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        META_URL,
        "https://example.org/my-schema",
    ]
)
IDS = st.sampled_from(
    ["http://127.0.0.1:9/root", "http://127.0.0.1:9/a/", "a.json", "urn:x:y", META_URL, "#", ""]
)
REFS = st.sampled_from(
    [
        "#",
        "#/$defs/a",
        "#/$defs/b",
        "#a",
        "#b",
        "#/properties/x",
        "#/$defs/a/properties/x",
        "#/const",
        "#/x-list/0",
        "#/$defs/a/$defs/b",
        "#/required/0",
    ]
)
ANCHORS = st.sampled_from(["a", "b"])
TYPES = st.sampled_from(["string", "integer", "object", "array", "null", "boolean"])


def _keywords(children: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    names = st.sampled_from(["x", "y"])
    return {
        "$schema": DIALECTS,
        "$id": IDS,
        "$anchor": ANCHORS,
        "$dynamicAnchor": ANCHORS,
        "$ref": REFS,
        "$dynamicRef": REFS,
        "$recursiveRef": st.just("#"),
        "$recursiveAnchor": st.booleans(),
        "$vocabulary": st.just(CORE_ONLY),
        "type": TYPES,
        "properties": st.dictionaries(names, children, max_size=2),
        "additionalProperties": children,
        "items": children,
        "prefixItems": st.lists(children, max_size=2),
        "$defs": st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=2),
        "const": children,  # data, unless a `$ref` reaches it
        "x-list": st.lists(children, max_size=1),  # an unknown keyword a `$ref` may reach
        "required": st.lists(names, max_size=2, unique=True),
    }


def _schema_objects(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    keywords = _keywords(children)
    chosen = st.lists(st.sampled_from(sorted(keywords)), max_size=4, unique=True)
    return chosen.flatmap(lambda keys: st.fixed_dictionaries({k: keywords[k] for k in keys}))


SCHEMAS = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional={"type": TYPES}),
    _schema_objects,
    max_leaves=10,
).filter(lambda schema: isinstance(schema, dict))
INSTANCES = st.recursive(
    st.none() | st.booleans() | st.integers(-1, 2) | st.sampled_from(["", "s"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "z"]), children, max_size=3)
    ),
    max_leaves=6,
)

CLOSED = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
ANY = {"$defs": {"any": {}}}


@pytest.mark.slow
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(schema=SCHEMAS, instances=st.lists(INSTANCES, min_size=1, max_size=4))
# The exploit: a top-level `$schema` whose meta-schema declares only the core vocabulary.
@example(schema={"$schema": META_URL, **CLOSED}, instances=[{"a": 1, "b": 2}])
# The same nested under `properties`, and in `$defs` with its own `$id`.
@example(
    schema={"type": "object", "properties": {"a": {"$schema": META_URL, "type": "string"}}},
    instances=[{"a": 1}],
)
@example(
    schema={
        "properties": {"a": {"$ref": "#/$defs/s"}},
        "$defs": {"s": {"$id": "http://127.0.0.1:9/s", "$schema": META_URL, "type": "string"}},
    },
    instances=[{"a": 1}],
)
# Draft 7 named in a subschema: `$ref` hides its siblings there (jsonschema-rs read it so).
@example(
    schema={
        "properties": {
            "a": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "$ref": "#/$defs/any",
                "type": "string",
            }
        },
        **ANY,
    },
    instances=[{"a": 1}],
)
# ... in an object a `$ref` reaches under an unknown keyword, or under `const`.
@example(
    schema={
        "properties": {"a": {"$ref": "#/x-list/0"}},
        "x-list": [
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "$ref": "#/$defs/any",
                "type": "string",
            }
        ],
        **ANY,
    },
    instances=[{"a": 1}],
)
@example(
    schema={
        "properties": {"a": {"$ref": "#/const"}},
        "const": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": "#/$defs/any",
            "type": "string",
        },
        **ANY,
    },
    instances=[{"a": 1}],
)
# `$vocabulary` in the schema itself, and a remote `$id` as the base of an inner reference.
@example(schema={"$vocabulary": CORE_ONLY, **CLOSED}, instances=[{"a": 1}])
@example(
    schema={
        "$id": f"{META_URL}/root",
        "properties": {"a": {"$ref": "#/$defs/s"}},
        "$defs": {"s": {"type": "string"}},
    },
    instances=[{"a": 1}],
)
# Dynamic anchors: the outermost `$dynamicAnchor` of the dynamic scope wins.
@example(
    schema={
        "$dynamicAnchor": "a",
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/b"}},
        "$defs": {
            "b": {
                "$id": "http://127.0.0.1:9/b",
                "$dynamicAnchor": "a",
                "properties": {"x": {"$dynamicRef": "#a"}},
            }
        },
    },
    instances=[{"x": {"x": 1}}],
)
@example(
    schema={
        "$recursiveAnchor": True,
        "properties": {"x": {"$recursiveRef": "#", "type": "string"}},
    },
    instances=[{"x": 1}],
)
# An `$id` claiming to be the 2020-12 meta-schema, with its `$dynamicAnchor`.
@example(
    schema={
        "$id": "https://json-schema.org/draft/2020-12/schema",
        "$dynamicAnchor": "meta",
        **CLOSED,
    },
    instances=[{"a": 1}],
)
# What crashed the load instead of refusing: a loop, and a pointer through `false`.
@example(schema={"$ref": "#"}, instances=[1])
@example(schema={"$dynamicRef": "#/$defs/a/$defs/b", "$defs": {"a": False}}, instances=[None])
def test_the_compiled_validator_never_accepts_what_the_reference_refuses(
    served: MetaSchemaServer, schema: dict[str, Any], instances: list[Any]
) -> None:
    served.requests.clear()  # the loopback guard the fixture set stays for every example
    try:
        compiled = _compiled(json.loads(json.dumps(schema).replace(META_URL, served.meta)))
    except ContractError:
        compiled = None
    if compiled is not None:
        for instance in instances:
            if compiled.fast_result.is_valid(instance):
                try:
                    refused = [e.message for e in compiled.result_validator.iter_errors(instance)]
                except RecursionError:  # a reference loop the value reaches: no verdict at all
                    reject()
                assert refused == [], (instance, refused)
    assert served.requests == []
