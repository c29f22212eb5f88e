"""Pinning a server's tool list: names, schemas, overlays, and hints that can only restrict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, ConfigDict

from runner.base.errors import ConfigError, ContractError
from runner.tools.contracts import ContractSet
from runner.tools.declare import declare_contract
from runner.tools.mcp import McpConfig, Pin, PinnedTool, with_recorded
from runner.tools.mcp.pinning import compiled_contract, pin_server
from runner.tools.mcp.tools import payload_of
from tests.support.paths import ROOT


def _config(tools: dict[str, Any], **server: Any) -> McpConfig:
    return McpConfig.of(
        {"servers": {"srv": {"command": "x", "scope": "s.read", "tools": tools, **server}}},
        base_dir=Path("."),
    )


def _listed(name: str = "t", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "A tool that does a thing.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        **fields,
    }


def _pin(tools: dict[str, Any], *listed: dict[str, Any]) -> list[PinnedTool]:
    config = _config(tools)
    return pin_server("srv", config.servers["srv"], listed or [_listed()])


def test_names_are_namespaced_and_sanitized() -> None:
    pinned = _pin({"Fetch-Page": {"read_only": True}}, _listed("Fetch-Page"))
    assert [(p.name, p.offered) for p in pinned] == [("srv__fetch_page", True)]


def test_two_tools_that_sanitize_to_one_name_do_not_shadow_each_other() -> None:
    tools = {"a-b": {"read_only": True}, "a_b": {"read_only": True}}
    first, second = _pin(tools, _listed("a-b"), _listed("a_b"))
    assert first.offered and not second.offered
    assert second.refused == (
        "it would be named srv__a_b, which is already the name of another tool of srv"
    )


def test_a_local_tool_of_the_same_name_is_refused() -> None:
    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")

    local = declare_contract(
        name="srv__t",
        description="A local tool named like an MCP one.",
        arguments=Args,
        result=dict,
        scope="s.read",
        timeout_s=1,
    )
    pin = Pin.of(_config({"t": {"read_only": True}}), {"srv": [_listed()]})
    with pytest.raises(ContractError, match="declared twice"):
        with_recorded(ContractSet([local]), {"mcp": pin.to_json()})


@pytest.mark.parametrize("name", ["Bad", "a__b", "a-b", "_a", ""])
def test_a_server_name_that_could_not_be_split_back_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="servers"):
        McpConfig.of({"servers": {name: {"command": "x", "scope": "s"}}}, base_dir=Path("."))


def test_a_config_error_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "servers.yaml"
    path.write_text("servers:\n  a: {command: x, url: 'http://h/mcp', scope: s}\n")
    with pytest.raises(ConfigError, match=r"servers\.yaml.*exactly one of command"):
        McpConfig.load(path)
    path.write_text("servers:\n  a: {command: x, scope: s, tools: {w: {reconcile_with: nope}}}\n")
    with pytest.raises(ConfigError, match="reconcile_with names 'nope'"):
        McpConfig.load(path)


def test_no_overlay_no_offer_whatever_the_server_claims() -> None:
    (pinned,) = _pin({}, _listed(annotations={"readOnlyHint": True}))
    assert not pinned.offered and "no operator overlay" in (pinned.refused or "")


def test_read_only_hint_never_makes_a_write_a_read() -> None:
    (pinned,) = _pin({"t": {}}, _listed(annotations={"readOnlyHint": True}))
    assert pinned.side_effect == "write" and pinned.offered  # a write, with its key


def test_a_server_that_says_it_writes_cannot_be_vouched_read_only() -> None:
    (pinned,) = _pin({"t": {"read_only": True}}, _listed(annotations={"readOnlyHint": False}))
    assert not pinned.offered and "configure it as a write" in (pinned.refused or "")


def test_a_destructive_tool_is_offered_under_approval_unless_the_operator_waives_it() -> None:
    hints = {"readOnlyHint": False, "destructiveHint": True}
    (asking,) = _pin({"t": {}}, _listed(annotations=hints))
    assert asking.needs_approval and asking.offered and asking.asks_approval
    assert compiled_contract(asking).contract.requires_approval
    (waived,) = _pin({"t": {"allow_without_approval": True}}, _listed(annotations=hints))
    assert waived.needs_approval and waived.offered  # recorded as needing it
    assert not waived.asks_approval and not compiled_contract(waived).contract.requires_approval


def test_requires_approval_from_the_overlay_makes_a_contract_that_requires_it() -> None:
    overlay = {"requires_approval": True, "approval_summary": "Do {x} now"}
    (pinned,) = _pin(
        {"t": overlay},
        _listed(inputSchema={"type": "object", "properties": {"x": {"type": "string"}}}),
    )
    contract = compiled_contract(pinned).contract
    assert pinned.offered and contract.requires_approval
    assert contract.approval_summary == "Do {x} now"
    (bad,) = _pin({"t": {"requires_approval": True, "approval_summary": "Do {nope}"}})
    assert not bad.offered and "approval_summary names nope" in (bad.refused or "")


def test_idempotent_hint_false_withdraws_suppresses_duplicates() -> None:
    tools = {"t": {"suppresses_duplicates": True}}
    (pinned,) = _pin(tools, _listed(annotations={"idempotentHint": False}))
    assert pinned.offered and not pinned.suppresses_duplicates
    (trusting,) = _pin({"t": {}}, _listed(annotations={"idempotentHint": True}))
    assert not trusting.suppresses_duplicates  # a hint never grants it


def test_a_write_without_reconcile_with_gets_the_stand_in_lookup() -> None:
    pin = Pin.of(_config({"t": {}}), {"srv": [_listed()]})
    names = {c.name: c for c in pin.contracts()}
    assert names["srv__t"].contract.reconcile_with == "srv__no_lookup"
    assert names["srv__no_lookup"].contract.audience == "runtime"


def test_the_argument_schema_is_closed_and_hides_the_key_argument() -> None:
    listed = _listed(
        inputSchema={
            "type": "object",
            "properties": {"q": {"type": "string"}, "rid": {"type": "string"}},
            "required": ["q", "rid"],
            "additionalProperties": True,
        }
    )
    pin = Pin.of(_config({"t": {"key_argument": "rid"}}), {"srv": [listed]})
    contract = next(c for c in pin.contracts() if c.name == "srv__t")
    schema = contract.contract.input_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["q"]
    assert "rid" not in schema["properties"]
    assert contract.check_arguments({"q": "x", "extra": 1}, {}) is not None
    assert contract.check_arguments({"q": "x", "rid": "k"}, {}) is not None  # never the model's


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "properties": {"token": {"type": "string"}}}, "only the runtime"),
        ({"type": "array"}, "type object"),
        (
            {"type": "object", "properties": {"d": {"type": "string", "format": "x-fancy"}}},
            "cannot be asserted",
        ),
    ],
)
def test_a_schema_the_runner_cannot_hold_to_its_rules_is_refused(
    schema: dict[str, Any], why: str
) -> None:
    (pinned,) = _pin({"t": {"read_only": True}}, _listed(inputSchema=schema))
    assert not pinned.offered and why in (pinned.refused or "")


def test_output_schema_with_defs_checks_structured_content() -> None:
    output = {
        "type": "object",
        "$defs": {
            "Page": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        },
        "properties": {"pages": {"type": "array", "items": {"$ref": "#/$defs/Page"}}},
        "required": ["pages"],
    }
    pin = Pin.of(_config({"t": {"read_only": True}}), {"srv": [_listed(outputSchema=output)]})
    (contract,) = pin.contracts()
    ok = {"status": "ok", "text": "", "structured": {"pages": [{"n": 1}]}}
    assert contract.check_result(ok) == ()
    assert contract.check_result({**ok, "structured": {"pages": [{"n": "1"}]}})
    assert contract.check_result({"status": "ok", "text": ""})  # structured is required


def test_the_pin_round_trips_through_a_header() -> None:
    pin = Pin.of(_config({"t": {"read_only": True}}), {"srv": [_listed()]})
    again = Pin.from_json(pin.to_json())
    assert again == pin
    assert [c.contract for c in again.contracts()] == [c.contract for c in pin.contracts()]


def test_text_results_take_the_documented_shape() -> None:
    (pinned,) = _pin({"t": {"read_only": True}})
    result = CallToolResult(
        content=[
            TextContent(type="text", text="hello"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
        ]
    )
    assert payload_of(result, pinned) == {"status": "ok", "text": "hello\n[image image/png]"}
    failed = CallToolResult(content=[TextContent(type="text", text="boom")], is_error=True)
    assert payload_of(failed, pinned) == {
        "status": "error",
        "error_code": "tool_error",
        "message": "boom",
        "retryable": False,
    }


def test_is_error_from_a_write_is_unknown_unless_its_text_types_it() -> None:
    """An SDK server turns any exception in a tool into `isError`, one raised after the write
    committed too: a write's untyped `isError` leaves its outcome unknown (then the lookup by
    key), and only an error the tool types (the tool-result convention, as JSON text) says what
    became of it. A read's stays `tool_error`."""
    (write,) = _pin({})
    assert write.side_effect == "write"

    def failed(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    unknown = payload_of(failed("Error executing tool book: disk I/O error"), write)
    assert unknown["error_code"] == "outcome_unknown"  # type: ignore[index]
    typed = '{"status": "error", "error_code": "sold_out", "message": "no room left"}'
    assert payload_of(failed(typed), write) == {
        "status": "error",
        "error_code": "sold_out",
        "message": "no room left",
        "retryable": False,
    }
    (read,) = _pin({"t": {"read_only": True}})
    assert payload_of(failed(typed), read)["error_code"] == "tool_error"  # type: ignore[index]


HINTS = st.dictionaries(
    st.sampled_from(["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "x"]),
    st.one_of(st.booleans(), st.none(), st.integers(), st.text(max_size=3)),
)
OVERLAYS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "read_only": st.booleans(),
            "requires_approval": st.booleans(),
            "allow_without_approval": st.booleans(),
        },
    ),
    st.fixed_dictionaries(
        {"suppresses_duplicates": st.booleans(), "requires_approval": st.booleans()}
    ),
)


@settings(max_examples=150, deadline=None)
@given(hints=HINTS, overlay=OVERLAYS)
def test_hints_only_ever_restrict(hints: dict[str, Any], overlay: dict[str, Any] | None) -> None:
    tools = {} if overlay is None else {"t": overlay}
    (pinned,) = _pin(tools, _listed(annotations=hints))
    given_overlay = overlay or {}
    if overlay is None:
        assert not pinned.offered
    if pinned.side_effect == "read":
        assert given_overlay.get("read_only") is True
    if given_overlay.get("requires_approval"):
        assert pinned.needs_approval
    if pinned.offered and pinned.side_effect == "write":  # needing approval, it asks for one
        waived = given_overlay.get("allow_without_approval") is True
        asks = compiled_contract(pinned).contract.requires_approval
        assert asks == (pinned.needs_approval and not waived)
    if pinned.suppresses_duplicates:
        assert given_overlay.get("suppresses_duplicates") is True


def test_import_runner_loads_no_mcp_sdk() -> None:
    code = (
        "import sys, runner, runner.mcp, runner.cli; "
        "assert not any(m == 'mcp' or m.startswith(('mcp.', 'mcp_types')) for m in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _write_pinned(tools: dict[str, Any], **server: Any) -> PinnedTool:
    config = McpConfig.of(
        {"servers": {"srv": {"command": "x", "scope": "s.write", "tools": tools, **server}}},
        base_dir=Path("."),
    )
    (pinned,) = pin_server("srv", config.servers["srv"], [_listed()])
    return pinned


def _is_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


@pytest.mark.parametrize(
    ("server", "overlay", "pinned"),
    [
        ({}, {}, "unknown"),
        ({"errors": "not_applied"}, {}, "not_applied"),
        ({}, {"errors": "not_applied"}, "not_applied"),
        ({"errors": "not_applied"}, {"errors": "unknown"}, "unknown"),
    ],
)
def test_what_a_writes_tool_error_means_is_pinned_tool_over_server(
    server: dict[str, Any], overlay: dict[str, Any], pinned: str
) -> None:
    tool = _write_pinned({"t": overlay}, **server)
    assert tool.errors == pinned
    assert Pin.from_json(Pin(servers={}, tools=(tool,)).to_json()).tools[0].errors == pinned
    code = payload_of(_is_error("Error: no such order"), tool)["error_code"]  # type: ignore[index]
    assert code == ("tool_error" if pinned == "not_applied" else "outcome_unknown")


def test_a_pin_recorded_before_errors_existed_reads_unknown() -> None:
    recorded = _write_pinned({"t": {}}).to_json()
    del recorded["errors"]
    assert PinnedTool(**recorded).errors == "unknown"


def test_a_typed_error_a_write_states_wins_over_errors() -> None:
    tool = _write_pinned({"t": {"errors": "not_applied"}})
    stated = '{"status": "error", "error_code": "service_unavailable", "retryable": true}'
    payload = payload_of(_is_error(stated), tool)
    assert payload == {
        "status": "error",
        "error_code": "service_unavailable",
        "message": "service_unavailable",
        "retryable": True,
    }


def test_a_read_only_tool_takes_no_errors() -> None:
    with pytest.raises(ConfigError, match="read_only tool has no errors"):
        _config({"t": {"read_only": True, "errors": "not_applied"}})
    with pytest.raises(ConfigError, match="errors"):
        _config({"t": {"errors": "maybe"}})
    (read,) = pin_server(
        "srv", _config({"t": {"read_only": True}}, errors="not_applied").servers["srv"], [_listed()]
    )
    assert read.errors == "unknown"  # a read's isError is a failure whatever the server says
