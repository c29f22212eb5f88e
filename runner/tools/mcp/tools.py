"""`McpTools`: the configured servers' pinned tools, as contracts and as a `ToolBox`.

    tools = await McpTools.connect(McpConfig.load(Path("servers.yaml")))
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=..., clock=...)
    result = await engine.run(tools.pinned_spec(spec), model)
    await tools.aclose()

`connect` lists every server's tools once and pins them (`Pin`): every run keeps those contracts,
whatever the server lists later, and `pinned_spec` records the pin in the run's header, so replay
rebuilds the contracts from the record alone (`recorded_contracts`).

What a call comes to (the classifier then maps it as for any tool):
- a result: `{"status": "ok", "text", "structured"?, "found"?}` (`found` copied from structured
  content, for lookups); `isError`: `{"status": "error", "error_code": "tool_error", "message"}`
  (`permanent`), and for a write the typed error its text states as JSON (the tool-result
  convention), else by the pin's `errors`: `outcome_unknown` (the SDK makes any exception
  `isError`, one raised after the write committed too), then the lookup; or, for a server the
  operator says refuses a write without acting (`errors: not_applied`), `tool_error` as for a
  read, a failure the policy decides;
- a JSON-RPC error: invalid params is `invalid_arguments`; method not found is `permanent`; any
  other is `permanent` for a read, and for a write `unknown_outcome` (the server may have acted
  before it failed), then the lookup;
- no answer (process died, transport dropped): `ConnectionError`, so `transient` for a read and
  `unknown_outcome` for a write; a hang: the call's timeout, `TimeoutError`, likewise. Either way
  the next call runs on a fresh connection (a restarted process). A connection that cannot be
  opened at all means the call was never sent: `ConnectionError` for a read, and for a write a
  retryable `service_unavailable` error (nothing to reconcile);
- an answer that is not a `CallToolResult`: a payload that fails the result schema
  (`malformed_result`; `unknown_outcome` for a write);
- any other failure of the SDK: the tool's exception (`permanent`), and for a write
  `ConnectionError` (`unknown_outcome`: it does not say whether the write happened).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ...base._jsonsafe import NotJson, json_value
from ...base.clock import Clock
from ...base.errors import ConfigError
from ..contracts import CompiledContract, ContractSet
from ..declare import checked_contract_set
from ..invocation import ToolImplementation, ToolInvocation, ToolResponse
from ..toolbox import ComposesInOrder
from .config import McpConfig, ToolErrors
from .pinning import ANNOTATION, KEY_META, NO_LOOKUP, SEPARATOR, Pin, PinnedTool, recorded_pin


class AnnotatedSpec(Protocol):
    """What `McpTools.pinned_spec` needs of a run's spec (`RunSpec` is one): a dataclass with
    annotations, declared here so the tools layer names nothing of the record layer above it."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def annotations(self) -> Mapping[str, Any]: ...


SpecT = TypeVar("SpecT", bound=AnnotatedSpec)

if TYPE_CHECKING:
    from ._link import ServerLink

_INVALID_PARAMS = -32602
_METHOD_NOT_FOUND = -32601


def _error(code: str, message: str) -> dict[str, Any]:
    return {"status": "error", "error_code": code, "message": message, "retryable": False}


def _write_error(text: str, errors: ToolErrors) -> dict[str, Any]:
    """`isError` from a write: the typed error its text states (`{"status": "error",
    "error_code": ...}`, the tool-result convention: the server says what became of it), else
    what the operator said such an error means (`errors`). By default `outcome_unknown`: an SDK
    server turns any exception in a tool into `isError`, one raised after the write committed
    too, so only a lookup by key can tell whether it happened. `not_applied`: the server refuses
    a write before acting, so its error is `tool_error` (`permanent`), as for a read."""
    try:
        stated = json.loads(text)
    except ValueError:
        stated = None
    if isinstance(stated, dict) and stated.get("status") == "error":
        code = stated.get("error_code")
        if isinstance(code, str) and code:
            typed = _error(code, str(stated.get("message", "")) or code)
            if isinstance(stated.get("retryable"), bool):
                typed["retryable"] = stated["retryable"]
            return typed
    code = "tool_error" if errors == "not_applied" else "outcome_unknown"
    return _error(code, text or "the tool reported an error")


def _text_of(content: Iterable[Any]) -> str:
    """Text blocks as they are; other blocks (images, audio, resources) named, not passed on."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "?")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        else:
            mime = getattr(block, "mime_type", None) or ""
            parts.append(f"[{kind} {mime}]".replace(" ]", "]"))
    return "\n".join(parts)


def payload_of(result: Any, pinned: PinnedTool) -> object:
    """A `CallToolResult` as the runner's result shape (see the module docstring)."""
    text = _text_of(result.content)
    if result.is_error:
        if pinned.side_effect == "write":
            return _write_error(text, pinned.errors)
        return _error("tool_error", text or "the tool reported an error")
    payload: dict[str, Any] = {"status": "ok", "text": text}
    structured = result.structured_content
    if structured is not None:
        try:
            payload["structured"] = json_value(structured)
        except NotJson as exc:
            return {"status": "malformed", "detail": f"structured content: {exc}"}
        found = structured.get("found") if isinstance(structured, dict) else None
        if isinstance(found, bool):
            payload["found"] = found
    elif pinned.output_schema is not None:
        return {"status": "malformed", "detail": "no structured content for its outputSchema"}
    return payload


class McpTools(ComposesInOrder):
    """The pinned tools of every configured server: contracts, and a `ToolBox` to call them
    (`before` puts them ahead of another toolbox: `tools.before(local)`)."""

    def __init__(
        self,
        config: McpConfig,
        pin: Pin,
        *,
        clock: Clock | None = None,
        links: Mapping[str, ServerLink] | None = None,
    ) -> None:
        from ._link import ServerLink  # noqa: PLC0415  # the SDK, loaded only when used

        missing = sorted(set(pin.servers) - set(config.servers))
        if missing:  # its tools could only fail, a write without being sent
            names = ", ".join(missing)
            raise ConfigError(f"the run pinned MCP server {names}, which the config does not name")
        self.config = config
        self.pin = pin
        self.clock = clock
        self.links = dict(links or {})
        for name, server in config.servers.items():
            self.links.setdefault(name, ServerLink(name, server, config))
        self._by_name = {tool.name: tool for tool in pin.offered}
        self._stand_ins = {  # only those the pin uses: any other name is someone else's
            f"{t.server}{SEPARATOR}{NO_LOOKUP}" for t in pin.offered
        } & {t.reconcile_with for t in pin.offered}

    @classmethod
    async def connect(cls, config: McpConfig, *, clock: Clock | None = None) -> McpTools:
        """Start or reach every server, list its tools and pin them.

        `clock`: the engine's clock; a fake clock is told the calls are real I/O. A server that
        cannot be reached or listed is a `ConfigError` (nothing has run yet)."""
        try:
            from ._link import ServerLink  # noqa: PLC0415  # the optional SDK
        except ImportError as exc:
            raise ConfigError(
                "MCP servers need the mcp SDK: pip install 'runner-fsm[mcp]'"
            ) from exc
        listed: dict[str, list[dict[str, Any]]] = {}
        links = {name: ServerLink(name, server, config) for name, server in config.servers.items()}
        for name, link in links.items():
            try:
                listed[name] = await asyncio.wait_for(
                    link.list_tools(), config.servers[name].timeout_s
                )
            except Exception as exc:
                for opened in links.values():
                    await opened.aclose()
                timeout = config.servers[name].timeout_s
                why = f"no answer in {timeout:g} s" if isinstance(exc, TimeoutError) else exc
                if link.stderr_tail:  # why a server that could not start says it did not
                    why = f"{why}; its stderr: {link.stderr_tail}"
                raise ConfigError(f"MCP server {name}: cannot list its tools: {why}") from exc
        return cls(config, Pin.of(config, listed), clock=clock, links=links)

    @classmethod
    def connect_sync(cls, config: McpConfig, *, clock: Clock | None = None) -> McpTools:
        """`connect` from synchronous code (the connections it opened are closed again; each
        run's loop opens its own on its first call)."""

        async def pinned() -> McpTools:
            tools = await cls.connect(config, clock=clock)
            await tools.aclose()
            return tools

        return asyncio.run(pinned())

    @property
    def contracts(self) -> list[CompiledContract]:
        return self.pin.contracts()

    def contract_set(self, *others: Iterable[CompiledContract]) -> ContractSet:
        """These contracts and any others (local tools); a name declared twice is refused."""
        return checked_contract_set([*self.contracts, *(c for group in others for c in group)])

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The namespaced tools the model may be offered (for `RunSpec.tools`)."""
        return self.pin.model_tools()

    @property
    def refused(self) -> dict[str, str]:
        """Listed tools not offered, and why."""
        return self.pin.refused

    def unused_overlays(self) -> list[str]:
        """Overlays that offer nothing, and why: the operator's likely typos, in words."""
        problems = [
            f"{tool.name} not offered: {tool.refused}"
            if tool.tool == tool.name.partition(SEPARATOR)[2]
            else f"{tool.server} tool {tool.tool!r} not offered: {tool.refused}"
            for tool in self.pin.tools
            if tool.overlay is not None and not tool.offered
        ]
        for name, server in self.config.servers.items():
            listed = {tool.tool for tool in self.pin.tools if tool.server == name}
            problems += [
                f"server {name} lists no tool {tool!r} (its overlay is unused)"
                for tool in server.tools
                if tool not in listed
            ]
        return problems

    def annotations(self) -> dict[str, Any]:
        return {ANNOTATION: self.pin.to_json()}

    def pinned_spec(self, spec: SpecT) -> SpecT:
        """`spec` with the pin in its annotations, so the run's header records the tool list."""
        return dataclasses.replace(spec, annotations={**spec.annotations, **self.annotations()})

    def on_clock(self, clock: Clock) -> McpTools:
        """The same pin and connections, telling `clock` (a run's own) when calls are real I/O."""
        return McpTools(self.config, self.pin, clock=clock, links=self.links)

    def implementation(self, tool: str) -> ToolImplementation | None:
        if tool in self._stand_ins:
            return _no_lookup
        pinned = self._by_name.get(tool)
        if pinned is None:
            return None

        async def call(invocation: ToolInvocation) -> ToolResponse:
            return await self._call(pinned, invocation)

        return call

    async def _call(self, pinned: PinnedTool, invocation: ToolInvocation) -> ToolResponse:
        from ._link import McpMalformed, McpRefused, McpUnreachable  # noqa: PLC0415  # the SDK

        arguments = dict(invocation.arguments)
        key = invocation.operation_key
        if key is not None and pinned.key_argument is not None:
            arguments[pinned.key_argument] = key
        meta = {KEY_META: key} if key is not None else None
        link = self.links[pinned.server]
        real_io = self.clock.real_io() if self.clock is not None else nullcontext()
        try:
            with real_io:
                result = await link.call(pinned.tool, arguments, meta, invocation.timeout_s)
        except McpRefused as exc:
            if exc.code == _INVALID_PARAMS:
                return ToolResponse(payload=_error("invalid_arguments", str(exc)))
            if pinned.side_effect == "write" and exc.code != _METHOD_NOT_FOUND:
                raise ConnectionError(f"MCP server {pinned.server}: {exc}") from exc
            return ToolResponse(payload=_error("jsonrpc_error", str(exc)))
        except McpMalformed as exc:
            return ToolResponse(payload={"status": "malformed", "detail": str(exc)})
        except McpUnreachable as exc:  # never sent: a write may be retried with its key
            if pinned.side_effect == "write":
                unsent = _error("service_unavailable", f"not sent: {exc}")
                return ToolResponse(payload={**unsent, "retryable": True})
            raise ConnectionError(str(exc)) from exc
        except (TimeoutError, ConnectionError):
            raise
        except Exception as exc:  # the SDK failed in a way it does not document: for a write,
            if pinned.side_effect == "write":  # that says nothing about whether it happened
                raise ConnectionError(f"MCP server {pinned.server}: {exc!r}") from exc
            raise
        return ToolResponse(payload=payload_of(result, pinned))

    async def aclose(self) -> None:
        """Close every connection opened on the running loop (stdio servers are stopped, in
        real time: a fake clock must not skip their shutdown's waits)."""
        with self.clock.real_io() if self.clock is not None else nullcontext():
            for link in self.links.values():
                await link.aclose()


async def _no_lookup(invocation: ToolInvocation) -> ToolResponse:
    return ToolResponse(
        payload=_error("no_lookup", "the operator configured no reconcile_with for this write")
    )


def recorded_contracts(annotations: Mapping[str, Any]) -> list[CompiledContract]:
    """The contracts a run's header pinned (none for a run without MCP servers)."""
    pin = recorded_pin(annotations)
    return pin.contracts() if pin is not None else []


def with_recorded(contracts: ContractSet, annotations: Mapping[str, Any]) -> ContractSet:
    """`contracts` plus those a run's header pinned: what a replay or grade of it needs."""
    pinned = recorded_contracts(annotations)
    if not pinned:
        return contracts
    return checked_contract_set([*contracts.values(), *pinned])
