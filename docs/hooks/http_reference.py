"""MkDocs hook: `reference/http-api.md`, written at build time from the service's OpenAPI document.

The page is generated into the build only (`on_files` adds it as a virtual file): there is no
copy in `docs/` to go stale. The document is the one `runner serve` serves at `/openapi.json`,
from `runner.service.build_app(...)` on a scratch SQLite store, rendered as Markdown (no
renderer's scripts: the site stays offline). Every path and method, its parameters, request
body and responses, and every schema they name.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "reference/http-api.md"
METHODS = ("get", "head", "post", "put", "patch", "delete")

INTRO = """\
# HTTP API

`runner serve --config service.yaml` serves this API (the optional extra `service`: FastAPI,
sse-starlette, uvicorn). This page is generated, when the site is built, from the OpenAPI
document the service itself serves at `GET /openapi.json`, so it says what the running service
accepts and answers. The configuration file is described in
[Service configuration](service-config.md).

- **Authentication.** Every `/v1/` request carries `Authorization: Bearer <key>`, a key from the
  config's `api_keys`. The tenant and principal come from the key, never from the body; the
  key's `roles` (`submit`, `read`, `approve`) say which operations it may call.
- **Errors** have one shape, `{"error": {"code": ..., "message": ...}}`
  ([`ErrorBody`](#schema-errorbody)), whatever the status: 400, 401 (no or unknown key), 403 (a
  role the key lacks), 404 (no such run, or another tenant's: the two are indistinguishable),
  409, 413, 415, 422, 429, and 500 or 503 only when the store cannot serve the request.
- **Live events.** `GET /v1/runs/{run_id}/events` is a server-sent event stream: one
  `transition` event per transition with `id:` its seq, then one `end` event; reconnect with
  `Last-Event-ID` to go on after the last one seen.
"""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=render(openapi_document())))
    return files


def openapi_document() -> dict[str, Any]:
    """The document of the app `runner serve` builds (SQLite, the travel world), as served."""
    from runner.service import ServiceConfig, build_app  # noqa: PLC0415  # the service extra
    from runner.travel import load_travel_contracts  # noqa: PLC0415

    config = ServiceConfig.model_validate(
        {
            "api_keys": [
                {
                    "key": "docs-build",
                    "tenant": "docs",
                    "principal": {"id": "docs"},
                    "roles": ["read"],
                }
            ],
            "approval_secret": "the-docs-build-never-decides-an-approval",
        }
    )
    with tempfile.TemporaryDirectory(prefix="runner-docs-") as scratch:
        app = build_app(config, Path(scratch) / "runs.sqlite", load_travel_contracts())
        try:
            with warnings.catch_warnings():
                # FastAPI warns that `/healthz` GET and HEAD, one function, share an operation
                # id; the document is served with it all the same, and this page names none.
                warnings.filterwarnings("ignore", "Duplicate Operation ID", UserWarning)
                document = app.openapi()
        finally:
            app.state.service.close()
    # a copy through JSON: exactly what `GET /openapi.json` sends, nothing FastAPI keeps
    loaded: dict[str, Any] = json.loads(json.dumps(document))
    return loaded


def render(document: dict[str, Any]) -> str:
    info = document.get("info", {})
    parts = [INTRO]
    if info.get("description"):
        parts.append(f"{info['description']} (API version {info.get('version', '?')}.)\n")
    parts.append("## Operations\n")
    parts.append(_operation_list(document))
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            if method in operations:
                parts.append(_operation(path, method, operations[method]))
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        parts.append("## Schemas\n")
        parts += [_schema_section(name, schema) for name, schema in schemas.items()]
    return "\n".join(parts)


def _operation_list(document: dict[str, Any]) -> str:
    rows = ["| method | path | operation |", "|---|---|---|"]
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            if method in operations:
                op = operations[method]
                link = f"[{op.get('summary', '')}](#{_op_anchor(method, path)})"
                rows.append(f"| `{method.upper()}` | `{path}` | {link} |")
    return "\n".join(rows) + "\n"


def _op_anchor(method: str, path: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in path.lower()).strip("-")
    return f"{method}-{slug}"


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}` {{#{_op_anchor(method, path)}}}\n"]
    if op.get("summary"):
        lines.append(f"**{op['summary']}**" + ("" if op.get("description") else "\n"))
    if op.get("description"):
        lines.append(("\n" if op.get("summary") else "") + op["description"].strip() + "\n")
    lines.append(f"Authentication: {_security(op)}.\n")
    parameters = op.get("parameters", [])
    if parameters:
        lines.append("Parameters:\n")
        rows = ["| name | in | type | required | meaning |", "|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            meaning = parameter.get("description") or schema.get("description") or ""
            rows.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_type(schema)} "
                f"| {'yes' if parameter.get('required') else 'no'} | {_cell(meaning)} |"
            )
        lines.append("\n".join(rows) + "\n")
    body = op.get("requestBody")
    if body:
        required = "required" if body.get("required") else "optional"
        for media, content in body.get("content", {}).items():
            lines.append(
                f"Request body ({required}, `{media}`): {_type(content.get('schema', {}))}\n"
            )
    lines.append("Responses:\n")
    lines.append(_responses(op.get("responses", {})))
    return "\n".join(lines)


def _responses(responses: dict[str, Any]) -> str:
    """One row per status, except that error statuses with the same body share one row (every
    operation answers the service's errors in the one error shape)."""
    rows = ["| status | meaning | body |", "|---|---|---|"]
    errors: dict[str, list[tuple[str, str]]] = {}
    for status, response in sorted(responses.items()):
        content = response.get("content", {})
        body = ", ".join(
            f"`{media}`" + (f" {_type(c['schema'])}" if c.get("schema") else "")
            for media, c in content.items()
        )
        meaning = _cell(response.get("description", ""))
        if status.startswith(("4", "5")):
            errors.setdefault(body, []).append((status, meaning))
        else:
            rows.append(f"| {status} | {meaning} | {body or '-'} |")
    for body, said in errors.items():
        statuses = ", ".join(status for status, _ in said)
        meanings = "; ".join(f"{status}: {meaning}" for status, meaning in said)
        rows.append(f"| {statuses} | {meanings} | {body or '-'} |")
    return "\n".join(rows) + "\n"


def _security(op: dict[str, Any]) -> str:
    schemes = [name for requirement in op.get("security", []) for name in requirement]
    if not schemes:
        return "none"
    return " or ".join(
        "bearer API key" if name == "HTTPBearer" else f"`{name}`" for name in schemes
    )


def _schema_anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def _schema_section(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### `{name}` {{#{_schema_anchor(name)}}}\n"]
    if schema.get("description"):
        lines.append(" ".join(schema["description"].split()) + "\n")
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, sub in properties.items():
            meaning = " ".join(str(sub.get("description", "")).split())
            default = f" Default: `{json.dumps(sub['default'])}`." if "default" in sub else ""
            rows.append(
                f"| `{field}` | {_type(sub)} | {'yes' if field in required else 'no'} "
                f"| {_cell(meaning + default).strip()} |"
            )
        lines.append("\n".join(rows) + "\n")
    else:
        lines.append(f"Type: {_type(schema)}\n")
    extra = schema.get("additionalProperties")
    if extra is False:
        lines.append("No other field is accepted.\n")
    elif extra is True:
        lines.append("Other fields may be present.\n")
    return "\n".join(lines)


def _type(schema: dict[str, Any]) -> str:
    """A schema as a short Markdown phrase: `$ref`s link to their section below."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{_schema_anchor(name)})"
    for combinator, word in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")):
        if combinator in schema:
            options = schema[combinator]
            return _constraints(word.join(_type(option) for option in options), schema)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        text = f"array of {_type(items)}" if items else "array"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        text = f"object of {_type(schema['additionalProperties'])}"
    elif isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind:
        text = str(kind)
        if schema.get("format"):
            text += f" ({schema['format']})"
    else:
        text = "any"
    return _constraints(text, schema)


def _constraints(text: str, schema: dict[str, Any]) -> str:
    said = []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema:
            said.append(f"{word} {_number(schema[key])}")
    for key, word in (
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
    ):
        if key in schema:
            said.append(word.format(schema[key]))
    if "pattern" in schema:
        said.append(f"matching `{schema['pattern']}`")
    return f"{text} ({', '.join(said)})" if said else text


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _cell(text: str) -> str:
    """Text for a table cell: a pipe or angle bracket would end the cell or open a tag."""
    flat = " ".join(text.split())
    return flat.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
