"""The HTTP API: runs, their transitions and live events, cancel, approvals, health.

Every route but `/healthz`, `/openapi.json` and the page's shell takes `Authorization: Bearer
<key>`; the key gives the tenant, the principal and the roles. Another tenant's run or approval is
404, exactly as one that does not exist.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, which name
# dependencies local to `create_app`.

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, Header, Path, Query
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..base.errors import StoreError
from .config import ApiKey, Role
from .errors import (
    ERROR_RESPONSES,
    RUN_KIND,
    ApiError,
    BodyLimit,
    ErrorBody,
    install_error_handlers,
    store_error_body,
)
from .live import LiveRun
from .page import page_html, state_diagram_svg
from .runs import RunService

POLL_S = 0.1
"""How often an events stream looks for new transitions (the store is the only channel, so the
same stream works when another process or worker drives the run)."""

RUN_ID = Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")
MAX_SEQ = 10**9
"""The highest seq a client may name (`?after=`, `Last-Event-ID`): past it no run goes, and a
bound keeps what reaches the store within the integers it holds."""
SEQ_TEXT = re.compile(r"-?[0-9]{1,20}")
LAST_EVENT_ID = (
    f"The seq of the last event received: a whole number from -1 to {MAX_SEQ} (one past the "
    "run's last transition waits there for the next); anything else is refused with 400 "
    "`bad_last_event_id`."
)


class FixtureRun(BaseModel):
    """A scripted run of a bundled or configured fixture (demos and tests)."""

    model_config = ConfigDict(extra="forbid")
    fixture: str = Field(min_length=1, max_length=200)


def run_kind(body: Any) -> str | None:
    """Which run a body asks for: one naming `fixture` is a scripted run, any other object a
    live run (so a live body's problem is named in its own terms, not as a missing `fixture`);
    None (refused) for what is not a JSON object."""
    if isinstance(body, dict):
        return "FixtureRun" if "fixture" in body else "LiveRun"
    if isinstance(body, FixtureRun | LiveRun):
        return type(body).__name__
    return None


SubmitBody = Annotated[
    Annotated[FixtureRun, Tag("FixtureRun")] | Annotated[LiveRun, Tag("LiveRun")],
    Discriminator(
        run_kind,
        custom_error_type=RUN_KIND,
        custom_error_message='a run is a JSON object: {"fixture": NAME} or {"task", "tools", '
        '"model", "budget"}',
    ),
]


class RunCreated(BaseModel):
    run_id: str


class RunItem(BaseModel):
    run_id: str
    name: str
    status: Literal["queued", "failed", "running", "ended", "unreadable"]
    """`queued`: accepted, not started yet; `failed`: it could not start (`reason` says why);
    `unreadable`: its stored record cannot be read back (changed outside the runner)."""
    state: str | None
    """Null only for an `unreadable` run."""
    reason: str | None
    attempts: int | None
    started_at: str | None
    """On the run's clock (a fixture's is virtual); null while it is queued."""
    continues: str | None


class Continuation(BaseModel):
    """Where the continuation of a run that ended waiting for approval stands now."""

    state: Literal["waiting", "queued", "running", "ended", "failed"]
    """`waiting`: for `waiting_for` more decisions (a continuation starts once every proposal
    is decided); `queued`: decided, not begun; `running`, `ended`: the continuation `run_id`;
    `failed`: it could not start or go on (`continuation_error` says why)."""
    waiting_for: int
    run_id: str | None


class RunDetail(BaseModel):
    """The object `runner show --json` prints (its keys are not all listed here), plus what
    the service knows of the run."""

    model_config = ConfigDict(extra="allow")
    run_id: str
    status: Literal["queued", "failed", "running", "ended"]
    state: str
    error: str | None
    """Why the run failed or stopped, while it has not ended."""
    continues: str | None
    continued_as: str | None
    continuation: Continuation | None
    """Null unless the run ended waiting for approval."""
    continuation_error: str | None
    """Why its continuation could not start or go on: only while that is the current truth
    (`continuation.state` is `failed`)."""


class RunPage(BaseModel):
    runs: list[RunItem]
    total: int
    next_offset: int | None


class TransitionPage(BaseModel):
    run_id: str
    transitions: list[dict[str, Any]]
    next_after: int


class CancelAccepted(BaseModel):
    run_id: str
    cancel_requested: bool


class ApprovalItem(BaseModel):
    approval_id: str
    run_id: str
    operation_key: str
    tool: str
    summary: str
    params: dict[str, Any]
    reasons: list[str]
    proposed_at: str


class ApprovalList(BaseModel):
    approvals: list[ApprovalItem]


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str | None = Field(default=None, max_length=2000)


class Decided(BaseModel):
    approval_id: str
    run_id: str
    verdict: Literal["approved", "denied"]
    approver: str


class FixtureList(BaseModel):
    fixtures: list[str]


class Health(BaseModel):
    status: Literal["ok"]
    fixtures: int


def create_app(service: RunService) -> FastAPI:
    app = FastAPI(
        title="runner",
        version="1",
        description="Runs of the runner as a service: submit, watch, cancel, approve.",
        responses=ERROR_RESPONSES,
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=service.config.max_body_bytes)
    bearer = HTTPBearer(auto_error=False, description="an API key from the service config")

    async def caller(  # async: no I/O, so no trip through the thread pool
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> ApiKey:
        if credentials is None:
            raise ApiError(401, "unauthorized", "send Authorization: Bearer <API key>")
        key = service.config.key_for(credentials.credentials)
        if key is None:
            raise ApiError(401, "unauthorized", "unknown API key")
        return key

    def role(needed: Role) -> Any:
        async def check(key: Annotated[ApiKey, Depends(caller)]) -> ApiKey:
            if needed not in key.roles:
                raise ApiError(403, "forbidden", f"this key lacks the role {needed!r}")
            return key

        return Depends(check)

    @app.api_route("/healthz", methods=["GET", "HEAD"], response_model=Health)
    def healthz() -> Health:
        """Whether the service answers, and how many fixtures it offers. No key needed."""
        return Health(status="ok", fixtures=len(service.fixtures))

    # async: on PostgreSQL accepting a run only queues it; on SQLite the job is written to the
    # store file, in a thread (another process's lock must not stall the loop).
    @app.post(
        "/v1/runs",
        status_code=202,
        response_model=RunCreated,
        responses={415: {"model": ErrorBody, "description": "the body is not JSON"}},
    )
    async def submit(body: SubmitBody, key: Annotated[ApiKey, role("submit")]) -> RunCreated:
        """Accept a run: `{"fixture": NAME}` (a bundled fixture, or one under the config's
        `fixtures:`) or a live-model run `{"task", "tools", "model", "budget"}`. Role `submit`.

        The run is the key's tenant's and principal's, never the body's. It is stored before
        the answer goes out, so a 202 is kept across a stop or a crash of the service."""
        submit_queued = getattr(service, "submit_queued", None)  # PostgreSQL: to the workers
        if isinstance(body, LiveRun):
            submit_live = getattr(service, "submit_queued_live", None)
            if submit_live is not None:
                return RunCreated(run_id=await submit_live(key, body))
            return RunCreated(run_id=await anyio.to_thread.run_sync(service.submit_live, key, body))
        if submit_queued is not None:
            return RunCreated(run_id=await submit_queued(key, body.fixture))
        run_id = await anyio.to_thread.run_sync(service.submit_fixture, key, body.fixture)
        return RunCreated(run_id=run_id)

    @app.get("/v1/runs", response_model=RunPage)
    def runs(
        key: Annotated[ApiKey, role("read")],
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        order: Annotated[Literal["oldest", "newest"], Query()] = "oldest",
    ) -> dict[str, Any]:
        """This tenant's runs, paged, in the order they were accepted (those not started yet
        too, `status` `queued`). Role `read`."""
        return service.list_runs(key, offset, limit, newest_first=order == "newest")

    @app.get("/v1/runs/{run_id}", response_model=RunDetail)
    def run(run_id: Annotated[str, RUN_ID], key: Annotated[ApiKey, role("read")]) -> dict[str, Any]:
        """One run: the object `runner show --json` prints, plus what the service knows of it
        (`status`, `state`, `tenant`, `holds`, where its continuation stands). Role `read`."""
        return service.run(key, run_id)

    @app.get("/v1/runs/{run_id}/transitions", response_model=TransitionPage)
    def transitions(
        run_id: Annotated[str, RUN_ID],
        key: Annotated[ApiKey, role("read")],
        after: Annotated[int, Query(ge=-1, le=MAX_SEQ)] = -1,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """A run's transitions after seq `after`, at most `limit` of them. Role `read`."""
        return service.transitions(key, run_id, after, limit)

    @app.get(
        "/v1/runs/{run_id}/events",
        response_class=EventSourceResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "one per transition"},
            400: {
                "model": ErrorBody,
                "description": f"`Last-Event-ID` is not a whole number from -1 to {MAX_SEQ}",
            },
        },
    )
    async def events(
        run_id: Annotated[str, RUN_ID],
        key: Annotated[ApiKey, role("read")],
        last_event_id: Annotated[
            str | None, Header(max_length=20, description=LAST_EVENT_ID)
        ] = None,
        after: Annotated[int, Query(ge=-1, le=MAX_SEQ)] = -1,
    ) -> EventSourceResponse:
        """A run's transitions as server-sent events: one `transition` event per transition,
        `id:` its seq, then one `end` event. Reconnect with `Last-Event-ID` to go on after the
        last one seen. Role `read`."""
        await anyio.to_thread.run_sync(service.check_tenant, key, run_id)
        if last_event_id is not None:
            after = max(after, last_seen(last_event_id))
        # The first read before the stream starts: a record that cannot be read is refused
        # with an error answer, not an empty stream.
        first = await anyio.to_thread.run_sync(service.events_after, run_id, after)
        return EventSourceResponse(_stream(service, run_id, after, first), ping=15)

    @app.post("/v1/runs/{run_id}/cancel", status_code=202, response_model=CancelAccepted)
    def cancel(
        run_id: Annotated[str, RUN_ID], key: Annotated[ApiKey, role("submit")]
    ) -> dict[str, Any]:
        """Cancel a run: its calls in flight are settled, then it ends `abstain (cancelled)`;
        409 `ended` for a run that has ended. Role `submit`."""
        return service.cancel(key, run_id)

    @app.get("/v1/fixtures", response_model=FixtureList)
    def fixtures(key: Annotated[ApiKey, role("read")]) -> FixtureList:
        """The fixtures a fixture run may name. Role `read`."""
        return FixtureList(fixtures=sorted(service.fixtures))

    @app.get("/v1/approvals", response_model=ApprovalList)
    def approvals(key: Annotated[ApiKey, role("read")]) -> dict[str, Any]:
        """This tenant's proposals waiting for a person's decision. Role `read`."""
        return {"approvals": service.approvals(key)}

    for verb in ("approve", "deny"):
        _decision_route(app, service, verb, role("approve"))

    @app.api_route(
        "/", methods=["GET", "HEAD"], response_class=HTMLResponse, include_in_schema=False
    )
    def page() -> HTMLResponse:
        return HTMLResponse(page_html())

    @app.get("/v1/diagram.svg", include_in_schema=False)
    def diagram() -> Any:
        from fastapi.responses import Response  # noqa: PLC0415

        return Response(state_diagram_svg(), media_type="image/svg+xml")

    return app


def last_seen(header: str) -> int:
    """The seq a `Last-Event-ID` names, within the bound `?after=` keeps; `ApiError` (400)
    for anything else (a value past what the store holds was a 500)."""
    seq = int(header) if SEQ_TEXT.fullmatch(header) else None
    if seq is None or not -1 <= seq <= MAX_SEQ:
        raise ApiError(
            400,
            "bad_last_event_id",
            f"Last-Event-ID is a whole number from -1 to {MAX_SEQ}, got {header[:20]!r}",
        )
    return seq


def _decision_route(app: FastAPI, service: RunService, verb: str, needs: Any) -> None:
    @app.post(
        f"/v1/approvals/{{approval_id}}/{verb}",
        response_model=Decided,
        name=verb,
        operation_id=f"{verb}_approval",
        description=f"{verb.capitalize()} a pending proposal (the approver is the key's "
        "principal, the note is recorded), then continue its run at once; 409 `decided` for a "
        "proposal already decided, `no_secret` without an approval secret. Role `approve`.",
    )
    def decide(
        approval_id: Annotated[str, Path(min_length=3, max_length=300)],
        key: Annotated[ApiKey, needs],
        body: DecisionBody | None = None,
    ) -> dict[str, Any]:
        return service.decide(key, approval_id, verb, body.note if body else None)


async def _stream(
    service: RunService,
    run_id: str,
    after: int,
    first: tuple[list[dict[str, Any]], dict[str, Any] | None],
) -> AsyncIterator[ServerSentEvent]:
    """Every transition after `after`, in order, each with `id:` its seq; then `end`, whose id
    is the run's last seq (never a higher one the client sent). `first` is the first read. A
    record found unreadable on the way ends the stream with an `error` event (what the error
    answer would have said)."""
    streamed = False
    records, end = first
    while True:
        for record in records:
            after, streamed = record["seq"], True
            yield ServerSentEvent(json.dumps(record), event="transition", id=str(after))
        if end is not None and not records:
            if not streamed:  # `after` is the client's: it may be past the run's last seq
                after = await anyio.to_thread.run_sync(service.last_seq, run_id, after)
            yield ServerSentEvent(json.dumps(end), event="end", id=str(after))
            return
        if not records:
            await asyncio.sleep(POLL_S)
        try:
            records, end = await anyio.to_thread.run_sync(service.events_after, run_id, after)
        except StoreError as exc:
            _status, body = store_error_body(exc)
            yield ServerSentEvent(json.dumps(body), event="error")
            return
