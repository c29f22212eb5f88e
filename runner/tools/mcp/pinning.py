"""A server's tool list pinned as contracts: what the run may call, decided once at its start.

Pure functions over plain JSON (no MCP SDK): the same pin, read back from a run's header, rebuilds
the same contracts for replay, with no server running.

- Names are `server__tool` (the tool's name lowercased, other characters as `_`), so two servers
  cannot shadow each other, nor a local tool (a set with two contracts of one name is refused).
- `inputSchema` is the argument schema, closed (`additionalProperties: false`) and without the
  overlay's `key_argument`; `outputSchema` is the shape of `structured` in the result, else the
  result is text (`TEXT_RESULT`). Either way the result is `{"status": "ok", "text": ...,
  "structured"?: ..., "found"?: bool}` or `{"status": "error", "error_code", "message"}`.
- Annotations are hints from an untrusted party: they can make a tool more restricted (a tool
  whose server says it writes cannot be vouched read-only; a destructive hint requires approval,
  so each call is a proposal a person decides (`runner.engine.approvals`);
  `idempotentHint: false` withdraws `suppresses_duplicates`), never less (`readOnlyHint: true`
  does not make a tool a read, and no hint offers a tool the operator gave no overlay).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Final, Literal

from ...base.errors import ContractError
from ..contracts import CompiledContract, Contract, compile_contract, refuse_unread_dialect
from .config import McpConfig, ServerConfig, ToolErrors, ToolOverlay

SEPARATOR: Final = "__"
PIN_FORMAT: Final = "runner-mcp/1"
ANNOTATION: Final = "mcp"
"""The key of `RunSpec.annotations` (and so of the run's header) the pin is recorded under."""
KEY_META: Final = "io.runner/operation_key"
NO_LOOKUP: Final = "no_lookup"
"""The runtime-only stand-in lookup of a write the operator gave no `reconcile_with`: it answers
that nothing can look the write up, so a lost response ends the run `unknown` with its key."""
_DESCRIPTION_CHARS: Final = 2000

ERROR_RESULT: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["status", "error_code", "message"],
    "properties": {
        "status": {"const": "error"},
        "error_code": {"type": "string"},
        "message": {"type": "string"},
        "retryable": {"type": "boolean"},
    },
    "additionalProperties": False,
}


def ok_result(output_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ok shape; `structured` follows the tool's `outputSchema` when it has one."""
    structured = {k: v for k, v in (output_schema or {}).items() if k not in {"$defs", "$schema"}}
    return {
        "type": "object",
        "required": ["status", "text", *(["structured"] if output_schema is not None else [])],
        "properties": {
            "status": {"const": "ok"},
            "text": {"type": "string"},
            "structured": structured,
            "found": {"type": "boolean"},
        },
        "additionalProperties": False,
    }


TEXT_RESULT: Final = {"oneOf": [ok_result(None), ERROR_RESULT]}
"""The result schema of a tool with no `outputSchema`: its content blocks as one text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedTool:
    """One listed tool as the run saw it, and what the runner made of it."""

    server: str
    tool: str
    """The server's own name for it."""
    name: str
    """The namespaced name the model sees (`server__tool`)."""
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    """As the server listed them (`readOnlyHint`, ...): recorded, trusted only to restrict."""
    overlay: dict[str, Any] | None
    side_effect: Literal["read", "write"]
    scope: str
    timeout_s: float
    needs_approval: bool
    """Each call is recorded as a proposal and sent only once a person approved it (unless the
    overlay waives it with `allow_without_approval`: see `asks_approval`)."""
    offered: bool
    refused: str | None = None
    """Why the tool is not offered (None: it is)."""
    reconcile_with: str | None = None
    """The namespaced lookup of a write."""
    suppresses_duplicates: bool = False
    key_argument: str | None = None
    audience: Literal["model", "runtime"] = "model"
    hints_applied: list[str] = field(default_factory=list)
    """Restrictions the server's hints imposed on the overlay, in words."""
    errors: ToolErrors = "unknown"
    """Writes: what an `isError` result means (the overlay's, else the server's `errors`; a pin
    recorded before the setting existed reads `unknown`, as such runs did)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def asks_approval(self) -> bool:
        """Whether its contract requires approval: it needs one and the operator did not waive it
        (`allow_without_approval`, the operator's explicit opt-out, recorded in the overlay)."""
        waived = bool((self.overlay or {}).get("allow_without_approval"))
        return self.needs_approval and not waived


def namespaced(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{re.sub(r'[^a-z0-9_]', '_', tool.lower())}"


def _hint(annotations: Mapping[str, Any], key: str) -> bool | None:
    value = annotations.get(key)
    return value if isinstance(value, bool) else None


def _refused(base: dict[str, Any], reason: str) -> PinnedTool:
    return PinnedTool(**{**base, "offered": False, "refused": reason})


def _pin_one(
    server: str, config: ServerConfig, listed: Mapping[str, Any], names: set[str]
) -> PinnedTool:
    tool = str(listed.get("name", ""))
    name = namespaced(server, tool)
    annotations = listed.get("annotations") or {}
    annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    raw_overlay = config.tools.get(tool)
    overlay = raw_overlay or ToolOverlay()
    output = listed.get("outputSchema")
    text = " ".join(str(listed.get("description") or "").split())[:_DESCRIPTION_CHARS]
    hints: list[str] = []
    read_hint, destructive = (
        _hint(annotations, "readOnlyHint"),
        _hint(annotations, "destructiveHint"),
    )
    says_it_writes = read_hint is False or (read_hint is not True and destructive is True)
    side_effect: Literal["read", "write"] = "read" if overlay.read_only else "write"
    if overlay.read_only and says_it_writes:
        side_effect = "write"
        hints.append("the server says it writes: the operator's read_only is overridden")
    suppresses = overlay.suppresses_duplicates
    if suppresses and _hint(annotations, "idempotentHint") is False:
        suppresses = False
        hints.append("idempotentHint false: suppresses_duplicates withdrawn")
    needs_approval = overlay.requires_approval
    if side_effect == "write" and destructive is True and read_hint is not True:
        needs_approval = True
        hints.append("destructiveHint: needs approval")
    key_argument = overlay.key_argument
    reconcile = overlay.reconcile_with
    base: dict[str, Any] = {
        "server": server,
        "tool": tool,
        "name": name,
        "description": f"{text} (tool {tool!r} of MCP server {server!r})".strip(),
        "input_schema": listed.get("inputSchema")
        if isinstance(listed.get("inputSchema"), dict)
        else {},
        "output_schema": output if isinstance(output, dict) else None,
        "annotations": annotations,
        "overlay": raw_overlay.model_dump(exclude_defaults=True) if raw_overlay else None,
        "side_effect": side_effect,
        "scope": overlay.scope or config.scope,
        "timeout_s": overlay.timeout_s or config.timeout_s,
        "needs_approval": needs_approval,
        "offered": True,
        "reconcile_with": (
            namespaced(server, reconcile)
            if reconcile is not None
            else f"{server}{SEPARATOR}{NO_LOOKUP}"
            if side_effect == "write"
            else None
        ),
        "suppresses_duplicates": suppresses if side_effect == "write" else False,
        "key_argument": key_argument,
        "audience": "runtime" if overlay.runtime_only else "model",
        "hints_applied": hints,
        "errors": (overlay.errors or config.errors) if side_effect == "write" else "unknown",
    }
    if not tool:
        return _refused(base, "the server listed a tool with no name")
    if name == f"{server}{SEPARATOR}{NO_LOOKUP}":  # the runner's stand-in would answer it
        return _refused(base, f"{name} is reserved for the runner's stand-in lookup")
    if name in names:
        return _refused(
            base, f"it would be named {name}, which is already the name of another tool of {server}"
        )
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
        return _refused(base, f"{name!r} is not a valid tool name (at most 64 of a-z 0-9 _)")
    if raw_overlay is None:
        return _refused(
            base, "no operator overlay (a tool is offered only when the config names it)"
        )
    if side_effect == "write" and overlay.read_only:
        return _refused(
            base,
            "the operator says read_only but the server's hints say it "
            "writes: configure it as a write",
        )
    if key_argument is not None and key_argument not in (
        base["input_schema"].get("properties") or {}
    ):
        return _refused(base, f"key_argument {key_argument!r} is not one of its arguments")
    pinned = PinnedTool(**base)
    try:
        compiled_contract(pinned)
    except ContractError as exc:
        return _refused(base, str(exc))
    return pinned


def pin_server(
    server: str, config: ServerConfig, listed: Iterable[Mapping[str, Any]]
) -> list[PinnedTool]:
    """Every tool a server listed, pinned: offered with its contract, or refused and why."""
    pinned: list[PinnedTool] = []
    names: set[str] = set()
    for item in listed:
        one = _pin_one(server, config, item, names)
        names.add(one.name)
        pinned.append(one)
    by_name = {item.name: item for item in pinned}
    return [_with_lookup(item, by_name) for item in pinned]


def _with_lookup(item: PinnedTool, by_name: Mapping[str, PinnedTool]) -> PinnedTool:
    """A write whose lookup is not offered, or not a read, cannot be reconciled: refused."""
    if not (item.offered and item.overlay and item.overlay.get("reconcile_with")):
        return item
    target = by_name.get(item.reconcile_with or "")
    if target is None or not target.offered:
        reason = f"its lookup {item.reconcile_with} is not offered"
    elif target.side_effect != "read":
        reason = f"its lookup {item.reconcile_with} is not a read"
    else:
        return item
    return PinnedTool(**{**item.to_json(), "offered": False, "refused": reason})


def _input_schema(pinned: PinnedTool) -> dict[str, Any]:
    schema = copy.deepcopy(pinned.input_schema)
    schema["additionalProperties"] = False  # the model may send only the declared arguments
    if pinned.key_argument is not None:
        schema.get("properties", {}).pop(pinned.key_argument, None)
        required = [r for r in schema.get("required", []) if r != pinned.key_argument]
        if "required" in schema:
            schema["required"] = required
    return schema


def _result_schema(pinned: PinnedTool) -> dict[str, Any]:
    output = pinned.output_schema
    if output is None:
        return copy.deepcopy(TEXT_RESULT)
    schema: dict[str, Any] = {"oneOf": [ok_result(output), ERROR_RESULT]}
    if "$defs" in output:  # `#/$defs/...` references resolve at the root
        schema["$defs"] = copy.deepcopy(output["$defs"])
    return schema


def compiled_contract(pinned: PinnedTool) -> CompiledContract:
    """The pinned tool's contract, compiled (`ContractError` if its schemas do not compile)."""
    source = f"{pinned.server}.{pinned.tool} (MCP)"
    # In the server's own terms (the result schema wraps `outputSchema`, without its `$schema`).
    refuse_unread_dialect(source, "inputSchema", pinned.input_schema)
    refuse_unread_dialect(source, "outputSchema", pinned.output_schema)
    try:
        contract = Contract(
            name=pinned.name,
            description=pinned.description.ljust(20),
            input_schema=_input_schema(pinned),
            result_schema=_result_schema(pinned),
            side_effect=pinned.side_effect,
            scope=pinned.scope,
            timeout_s=pinned.timeout_s,
            reconcile_with=pinned.reconcile_with,
            suppresses_duplicates=pinned.suppresses_duplicates,
            audience=pinned.audience,
            requires_approval=pinned.side_effect == "write" and pinned.asks_approval,
            approval_summary=(pinned.overlay or {}).get("approval_summary"),
        )
    except ValueError as exc:
        raise ContractError(source, str(exc).splitlines()[0]) from exc
    return compile_contract(contract, source)


def no_lookup_contract(server: str, scope: str) -> CompiledContract:
    """The stand-in lookup of a server's writes that have no `reconcile_with`."""
    contract = Contract(
        name=f"{server}{SEPARATOR}{NO_LOOKUP}",
        description=f"Stand-in lookup for writes of MCP server {server} that cannot be looked up.",
        input_schema={"type": "object", "additionalProperties": False},
        result_schema=copy.deepcopy(TEXT_RESULT),
        side_effect="read",
        scope=scope,
        timeout_s=1,
        audience="runtime",
    )
    return compile_contract(contract, f"{server}.{NO_LOOKUP} (runner)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """Every server's pinned tools: what a run may call, recorded in its header."""

    servers: dict[str, dict[str, Any]]
    tools: tuple[PinnedTool, ...]

    @classmethod
    def of(cls, config: McpConfig, listed: Mapping[str, Sequence[Mapping[str, Any]]]) -> Pin:
        tools = [
            pinned
            for server, server_config in config.servers.items()
            for pinned in pin_server(server, server_config, listed.get(server, ()))
        ]
        servers = {name: server.recorded() for name, server in config.servers.items()}
        return cls(servers=servers, tools=tuple(tools))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PIN_FORMAT,
            "servers": self.servers,
            "tools": [tool.to_json() for tool in self.tools],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pin:
        if data.get("format") != PIN_FORMAT:
            raise ContractError("mcp pin", f"format {data.get('format')!r} is not {PIN_FORMAT}")
        try:
            tools = tuple(PinnedTool(**tool) for tool in data["tools"])
            return cls(servers=dict(data["servers"]), tools=tools)
        except (KeyError, TypeError) as exc:
            raise ContractError("mcp pin", f"cannot be read: {exc}") from exc

    @property
    def offered(self) -> tuple[PinnedTool, ...]:
        return tuple(tool for tool in self.tools if tool.offered)

    @property
    def refused(self) -> dict[str, str]:
        return {tool.name: tool.refused or "" for tool in self.tools if not tool.offered}

    def model_tools(self) -> tuple[str, ...]:
        """The names a `RunSpec.tools` may list: offered tools the model sees."""
        return tuple(tool.name for tool in self.offered if tool.audience == "model")

    def contracts(self) -> list[CompiledContract]:
        """The offered tools' contracts, with each server's stand-in lookup where one is used."""
        return list(_contracts(json.dumps(self.to_json(), sort_keys=True)))


@lru_cache(maxsize=32)
def _contracts(pin_json: str) -> tuple[CompiledContract, ...]:
    """Compiled once per process per pin (runs and replays of one pin share them)."""
    pin = Pin.from_json(json.loads(pin_json))
    compiled = [compiled_contract(tool) for tool in pin.offered]
    stand_ins = {
        (tool.server, tool.scope)
        for tool in pin.offered
        if tool.reconcile_with == f"{tool.server}{SEPARATOR}{NO_LOOKUP}"
    }
    seen: set[str] = set()
    for server, scope in sorted(stand_ins):
        if server not in seen:
            seen.add(server)
            compiled.append(no_lookup_contract(server, scope))
    return tuple(compiled)


def recorded_pin(annotations: Mapping[str, Any]) -> Pin | None:
    """The pin a run's header records (None: the run used no MCP server)."""
    data = annotations.get(ANNOTATION)
    return Pin.from_json(data) if isinstance(data, Mapping) else None
