"""One MCP server's connection on the official SDK: opened lazily, replaced after any failure.

The SDK's transports and `ClientSession` are anyio context managers that must be entered and left
in one task, so each connection lives in an owner task of its own; calls from the run's tasks go
through its session. A call that ends without an answer (the process died, the transport dropped,
the call was cancelled by its timeout) marks the connection broken: the next call starts a fresh
one (for stdio a new process; the old one is stopped by the SDK's shutdown), within that call's
own timeout, so the run never waits past its deadline for a server.

Failures leave here as plain `ConnectionError` / `TimeoutError` (the names a recording rebuilds,
so a replay classifies them the same way), or as `McpRefused` for a JSON-RPC error answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from .config import McpConfig, ServerConfig

# The SDK logs a server's bad output with a traceback; with no handler configured Python's
# last-resort handler prints it to stderr. What went wrong reaches the caller as one error; an
# application that configures logging still sees the SDK's records.
logging.getLogger("mcp").addHandler(logging.NullHandler())

_TRANSPORT_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    OSError,
    httpx2.HTTPError,
)


class McpRefused(Exception):
    """The server answered a call with a JSON-RPC error (it did answer)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"JSON-RPC error {code}: {message}")
        self.code = code


class McpUnreachable(ConnectionError):
    """No connection could be opened, so the call was never sent (`tools.py` turns it back into
    a plain `ConnectionError`, or for a write into a retryable failure)."""


class McpMalformed(Exception):
    """The server's answer is not a `CallToolResult` of this protocol."""


@dataclass(slots=True)
class _Live:
    session: ClientSession
    owner: asyncio.Task[None]
    stop: asyncio.Event
    loop: asyncio.AbstractEventLoop
    broken: bool = False


class ServerLink:
    """The connection to one configured server."""

    def __init__(self, name: str, config: ServerConfig, mcp_config: McpConfig) -> None:
        self.name = name
        self.config = config
        self.cwd = mcp_config.working_dir(config)
        self._live: _Live | None = None
        self._dropped: list[asyncio.Task[None]] = []
        """Owners of dropped connections still winding down (awaited by `aclose`)."""
        self.stderr_tail = ""
        """The last line a stdio server wrote to stderr before its connection ended."""
        self.connections = 0
        """How many connections were opened (a restart opens another)."""

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        if self.config.url is not None:
            async with streamable_http_client(self.config.url) as streams:
                yield streams
            return
        assert self.config.command is not None
        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=dict(self.config.env) or None,
            cwd=Path(self.cwd),
        )
        # The server's stderr is its own business, not the run's: kept per connection only so
        # a server that cannot start can say why (`stderr_tail`; never recorded).
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams
            finally:
                self.stderr_tail = _last_line(errlog)

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        """Hold the connection open until `stop`, in this one task."""
        try:
            async with self._transport() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    McpUnreachable(f"cannot connect to MCP server {self.name}: {_why(exc)}")
                )
        finally:
            if self._live is not None and self._live.stop is stop:
                self._live.broken = True
            if not ready.done():
                ready.set_exception(McpUnreachable(f"MCP server {self.name} closed"))

    async def session(self) -> ClientSession:
        """The live session on the running loop, opening a fresh one if there is none."""
        loop = asyncio.get_running_loop()
        live = self._live
        if live is not None and (live.broken or live.loop is not loop or live.owner.done()):
            await self._drop()
        if self._live is None:
            ready: asyncio.Future[ClientSession] = loop.create_future()
            stop = asyncio.Event()
            owner = loop.create_task(self._own(ready, stop), name=f"mcp server {self.name}")
            try:
                session = await asyncio.shield(ready)
            except BaseException:
                owner.cancel()
                ready.add_done_callback(_retrieved)  # nobody waits for it any more
                raise
            self._live = _Live(session=session, owner=owner, stop=stop, loop=loop)
            self.connections += 1
        return self._live.session

    def _break(self) -> None:
        if self._live is not None:
            self._live.broken = True

    async def _drop(self) -> None:
        """Let the current connection go (its process stopped by the SDK), without waiting on
        it from a call: the owner task winds down on its own."""
        live, self._live = self._live, None
        if live is None:
            return
        if live.loop is asyncio.get_running_loop():
            live.stop.set()
            live.owner.cancel()
            self._dropped = [task for task in self._dropped if not task.done()]
            self._dropped.append(live.owner)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists, each as the wire has it (camelCase keys)."""
        session = await self.session()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.send_request(
                types.ListToolsRequest(params=params), types.ListToolsResult
            )
            tools += [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor or len(tools) > 10_000:
                return tools

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None, timeout: float
    ) -> types.CallToolResult:
        """Call a tool; answers its result, or raises as the module docstring says.

        The SDK's own `call_tool` re-validates structured content against the server's *current*
        listing; the runner checks against the pinned contract instead, so it sends the request
        itself."""
        try:
            session = await self.session()
            params = types.CallToolRequestParams(
                name=tool, arguments=arguments, _meta=cast(types.RequestParamsMeta | None, meta)
            )
            return await session.send_request(
                types.CallToolRequest(params=params),
                types.CallToolResult,
                request_read_timeout_seconds=timeout,
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._break()
                raise ConnectionError(f"MCP server {self.name}: connection closed") from exc
            if exc.code == REQUEST_TIMEOUT:
                self._break()
                raise TimeoutError(f"MCP server {self.name}: no answer in {timeout:g} s") from exc
            raise McpRefused(exc.code, exc.message) from exc
        except ValidationError as exc:
            raise McpMalformed(f"not a CallToolResult: {exc.error_count()} problems") from exc
        except McpUnreachable:  # an OSError too: passed on as is (the call was never sent)
            self._break()
            raise
        except _TRANSPORT_ERRORS as exc:
            self._break()
            raise ConnectionError(f"MCP server {self.name}: {_why(exc)}") from exc
        except ConnectionError:
            self._break()
            raise
        except BaseException:  # cancelled (its timeout, the run): the answer may still come
            self._break()  # on this connection and confuse the next call; start afresh
            raise

    async def aclose(self) -> None:
        """Stop the connection (and any dropped one still stopping) on the running loop."""
        live, self._live = self._live, None
        loop = asyncio.get_running_loop()
        owners = [task for task in self._dropped if task.get_loop() is loop]
        self._dropped = []
        if live is not None and live.loop is loop:
            live.stop.set()
            owners.append(live.owner)
        if owners:  # the SDK bounds each shutdown (about 4 s for a process that will not stop)
            await asyncio.wait(owners, timeout=6)


def _last_line(errlog: TextIO) -> str:
    errlog.flush()
    size = os.fstat(errlog.fileno()).st_size
    text = os.pread(errlog.fileno(), 2000, max(0, size - 2000)).decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _retrieved(future: asyncio.Future[ClientSession]) -> None:
    if not future.cancelled():
        future.exception()


def _why(exc: BaseException) -> str:
    """One line for an error, looking inside the task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
