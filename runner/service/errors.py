"""One error shape for every refusal: `{"error": {"code", "message"}}` with the right status.

Validation errors are 422 (malformed JSON 400, a run sent as other than JSON 415), unknown paths
404, bodies over the limit 413; nothing a client sends can make the service answer 500 (a store
that cannot serve a request answers 503 while locked, 500 for a record damaged outside the runner,
in the same shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..base.errors import RunnerError, StoreCorrupt, StoreError, StoreLocked

_log = structlog.get_logger("runner.service")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "not_json",
    422: "invalid",
    429: "too_many",
}


RUN_KIND = "run_kind"
"""The error type of a submitted body that is no run at all (`app.run_kind`)."""
_RUN_TAGS = frozenset({"FixtureRun", "LiveRun"})
"""The submit body's kinds: in a problem's location after `body`, not a field of it."""
_FIELD_CODES = {"budget": "invalid_budget"}
"""A problem in one of these body fields has its own code (the HTTP API reference promises them)."""
_FROM_THE_KEY = frozenset({"tenant", "principal", "api_key", "key"})


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(RunnerError):
    """A refusal with its status and code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409, 413, 422, 429)
}


def store_error_body(exc: StoreError) -> tuple[int, dict[str, Any]]:
    """The answer to a request the store could not serve (logged in full here: the client is
    told what kind of trouble, not the store's file or host): 503 while another process holds
    the store's lock, 500 for a record changed or damaged outside the runner."""
    _log.error("the store could not serve a request", error=str(exc))
    if isinstance(exc, StoreLocked):
        code, message = "store_busy", "the store is locked by another process; try again"
        return 503, {"error": {"code": code, "message": message}}
    if isinstance(exc, StoreCorrupt):
        code = "unreadable_record"
        message = "the stored record cannot be read back: it was changed outside the runner"
    else:
        code, message = "store_error", f"the store failed: {type(exc).__name__}"
    return 500, {"error": {"code": code, "message": f"{message} (the service log has more)"}}


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the first route's methods, not the path's
            headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
        return error_response(
            exc.status_code, _CODES.get(exc.status_code, "error"), str(exc.detail), headers
        )

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = exc.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            return error_response(400, "bad_json", "the body is not valid JSON")
        first = problems[0] if problems else {}
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        status, code, message = _explained(first, json_sent=media.endswith(("/json", "+json")))
        return error_response(status, code, message)

    async def store_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StoreError)
        status, body = store_error_body(exc)
        return JSONResponse(body, status_code=status)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)


def _explained(problem: Mapping[str, Any], *, json_sent: bool) -> tuple[int, str, str]:
    """A validation problem as the status, code and message of its refusal: where it is (the
    field of the body's own kind of run) and what is wrong there."""
    loc = [str(part) for part in problem.get("loc", ())]
    if loc[:1] == ["body"] and loc[1:2] and loc[1] in _RUN_TAGS:
        del loc[1]
    where, kind = ".".join(loc), problem.get("type")
    if kind == RUN_KIND and not json_sent:
        return 415, "not_json", "send the run as JSON (Content-Type: application/json)"
    field = loc[1] if loc[:1] == ["body"] and len(loc) > 1 else None
    if kind == "extra_forbidden" and field in _FROM_THE_KEY:
        return 422, "invalid", f"{where}: not taken from a body: the API key gives it"
    code = _FIELD_CODES.get(field or "", "invalid")
    return 422, code, f"{where}: {problem.get('msg', 'invalid request')}"


def _allowed(request: Request) -> list[str]:
    """Every method some route serves at this request's path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        matched = isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE
        if matched and route.methods:
            methods |= route.methods
    return sorted(methods)


class BodyLimit:
    """Refuse a request body over `limit` bytes with 413, by its Content-Length or as it
    streams in (a chunked body has none)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._refuse(scope, receive, send, 400, "bad Content-Length")
                    return
                if declared > self.limit:
                    await self._refuse(scope, receive, send, 413, self._too_large())
                    return
        # No Content-Length (a chunked body): read it here, up to the limit, then hand it on.
        chunks: list[bytes] = []
        seen = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left: the app sees the disconnect as it would have
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self._refuse(scope, receive, send, 413, self._too_large())
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"the request body is over {self.limit} bytes"

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, message: str
    ) -> None:
        await error_response(status, _CODES[status], message)(scope, receive, send)
