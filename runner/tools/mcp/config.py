"""The MCP servers a run may use, and the operator's overlay on each of their tools.

A config file (YAML or JSON) names each server, how to reach it (a command the runner starts and
speaks to over stdio, or a streamable-HTTP URL), the scope its tools need by default, and an
overlay per tool the operator allows. A tool without an overlay is never offered: the server's
own description of it (its annotations included) is a claim from an untrusted party.

    servers:
      docs:
        command: python
        args: [docs_server.py]        # relative paths are read from the config file's folder
        scope: docs.read
        tools:
          search: {read_only: true}
      booking:
        url: http://127.0.0.1:8765/mcp
        scope: booking.write
        tools:
          book: {reconcile_with: find_booking, key_argument: request_id,
                 suppresses_duplicates: true, errors: not_applied}
          find_booking: {read_only: true, runtime_only: true, key_argument: request_id}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic import model_validator as after_validator

from ...base._documents import (
    TOO_DEEP,
    TOO_LONG_NUMBER,
    DocumentProblem,
    check_shape,
    load_yaml,
    read_text,
)
from ...base.errors import ConfigError

SERVER_NAME: Final = r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
"""Lowercase words joined by single underscores: `server__tool` then splits at its first `__`."""

ServerName = Annotated[str, StringConstraints(pattern=SERVER_NAME, max_length=24)]

ToolErrors = Literal["unknown", "not_applied"]
"""What a write's tool-level error (`isError: true`) means: `unknown` (it may have been applied
before it failed: looked up by key) or `not_applied` (the server refused it and did nothing: a
failure the policy decides). A lost or broken transport is unknown whatever this says."""


class ToolOverlay(BaseModel):
    """What the operator says about one tool of a server; it is the only source of trust."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_only: bool = False
    """The operator vouches that the tool changes nothing. Without it the tool is a write."""
    scope: str | None = Field(default=None, min_length=1)
    """The principal scope needed to see and call it (default: the server's `scope`)."""
    timeout_s: float | None = Field(default=None, gt=0, le=600)
    """Per-call timeout (default: the server's `timeout_s`)."""
    reconcile_with: str | None = None
    """Writes: the server's tool (its MCP name) that looks a write up by its operation key. None:
    a lost response cannot be looked up, and the run ends `unknown` with the key."""
    suppresses_duplicates: bool = False
    """Writes: the server returns the existing record for a repeated key (so a write the lookup
    did not find may be sent again with the same key)."""
    key_argument: str | None = Field(default=None, min_length=1)
    """The tool argument the runtime fills with the operation key (never shown to the model; it
    is taken out of the argument schema). The key also travels in `_meta` as
    `io.runner/operation_key`."""
    requires_approval: bool = False
    """Writes: each call needs a person's approval (a destructive hint sets it too): it is
    recorded as a proposal and the run ends `escalate` (`approval_required`) until one is given."""
    approval_summary: str | None = Field(default=None, min_length=1, max_length=300)
    """Writes under approval: what a person reads, e.g. `Cancel {room} for {nights} nights`
    (named arguments filled in; default `tool: k=v, ...`)."""
    allow_without_approval: bool = False
    """The operator's explicit opt-out: send the calls of a tool that needs approval (by this
    overlay or the server's destructive hint) without asking anyone. Recorded in the pin."""
    runtime_only: bool = False
    """Called by the runner itself (a reconciliation lookup), never offered to the model."""
    errors: ToolErrors | None = None
    """Writes: what an `isError` result means (`ToolErrors`; default: the server's `errors`).
    Recorded in the pin, so a resumed run reads its errors as it was started with."""

    @after_validator(mode="after")
    def _consistent(self) -> ToolOverlay:
        if self.read_only and (self.reconcile_with is not None or self.suppresses_duplicates):
            raise ValueError("a read_only tool has no reconcile_with or suppresses_duplicates")
        if self.read_only and self.errors is not None:
            raise ValueError("a read_only tool has no errors (a read's isError is a failure)")
        return self


class ServerConfig(BaseModel):
    """One MCP server: a command to start (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """The server process's environment beyond the MCP SDK's few inherited variables (`HOME`,
    `PATH`, `USER`, ...): a stdio server does not inherit the runner's environment, API keys
    included. Never recorded: it may hold secrets."""
    cwd: str | None = None
    """The server process's working directory (default: the config file's folder)."""
    url: str | None = None
    scope: str = Field(min_length=1)
    """The scope a tool of this server needs, unless its overlay names another."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    errors: ToolErrors = "unknown"
    """What an `isError` result of this server's writes means, unless a tool's overlay says
    (`ToolErrors`): `unknown`, the safe default, or `not_applied` for a server that raises only
    when it refused a write and changed nothing."""
    tools: dict[str, ToolOverlay] = Field(default_factory=dict)
    """Overlays by the server's own tool name; a tool without one is not offered."""

    @after_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"  # not the URL:
                raise ValueError(f"url must be http(s)://HOST/..., got {got}")  # it may hold a key
        for name, overlay in self.tools.items():
            target = overlay.reconcile_with
            if target is not None and target not in self.tools:
                raise ValueError(
                    f"tools.{name}.reconcile_with names {target!r}, which has no overlay here"
                )
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "streamable_http"

    def recorded(self) -> dict[str, Any]:
        """How the server was reached, for a run's header: no environment, no URL secrets."""
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port is not None else host
            return {"transport": self.transport, "url": f"{parts.scheme}://{netloc}{parts.path}"}
        return {"transport": self.transport, "command": self.command, "args": list(self.args)}


class McpConfig(BaseModel):
    """Every MCP server of a run; `base_dir` resolves relative `cwd`s (the config's folder)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[ServerName, ServerConfig] = Field(min_length=1)
    base_dir: str = "."

    @classmethod
    def load(cls, path: Path) -> McpConfig:
        """Read a YAML or JSON config; every problem is one `ConfigError` naming the file."""
        try:
            data = load_yaml(read_text(path))
            check_shape(data)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"mcp config {path}: cannot read: {exc}") from exc
        except RecursionError as exc:
            raise ConfigError(f"mcp config {path}: {TOO_DEEP}") from exc
        except DocumentProblem as exc:
            raise ConfigError(f"mcp config {path}: {exc}") from exc
        except ValueError as exc:
            raise ConfigError(f"mcp config {path}: {TOO_LONG_NUMBER}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"mcp config {path}: must be a mapping with a `servers` key")
        return cls.of(data, base_dir=path.resolve().parent, source=f"mcp config {path}")

    @classmethod
    def of(cls, data: dict[str, Any], *, base_dir: Path, source: str = "mcp config") -> McpConfig:
        """A config from its data (the library's way in); `ConfigError` if it is wrong."""
        try:
            return cls.model_validate({**data, "base_dir": str(base_dir)})
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ConfigError(f"{source}: {details}") from exc

    def working_dir(self, server: ServerConfig) -> Path:
        base = Path(self.base_dir)
        return base / server.cwd if server.cwd is not None else base
