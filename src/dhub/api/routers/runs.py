"""/api/v1/agents/{id}/runs and /api/v1/runs: thin routes over RunService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.responses import ERROR_RESPONSES, JSON, encode
from dhub.domain.bounds import SeqNumber
from dhub.domain.errors import FieldError, InvalidInput
from dhub.services import usage as usage_service
from dhub.services.types import CommandRecord, EventRecord, RunRecord

router = APIRouter(tags=["runs"], responses=ERROR_RESPONSES)

RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled"]


class Run(BaseModel):
    id: str
    agent_id: str
    agent_version: int
    user_id: str
    status: RunStatus
    waiting: dict[str, Any] | None
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    usage: dict[str, Any]
    created_at: int
    started_at: int | None
    finished_at: int | None
    updated_at: int


class RunList(BaseModel):
    data: list[Run]
    next_cursor: str | None


class RunEvent(BaseModel):
    seq: int
    type: str
    node_id: str | None
    data: dict[str, Any]
    created_at: int


class RunEventList(BaseModel):
    data: list[RunEvent]


class StartRun(BaseModel):
    inputs: dict[str, Any] = {}
    version: int | None = None
    stream: bool = False
    reasoning_effort: str | None = None  # a react agent's, for this run


def run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id, "agent_id": run.agent_id, "agent_version": run.agent_version,
        "user_id": run.user_id, "status": run.status, "waiting": run.waiting,
        "inputs": run.inputs, "outputs": run.outputs, "error": run.error, "usage": run.usage,
        "created_at": run.created_at, "started_at": run.started_at,
        "finished_at": run.finished_at, "updated_at": run.updated_at,
    }  # fmt: skip


def event_json(event: EventRecord) -> dict[str, Any]:
    return {
        "seq": event.seq, "type": event.type, "node_id": event.node_id, "data": event.data,
        "created_at": event.created_at,
    }  # fmt: skip


_START_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": StartRun.model_json_schema()}},
    }
}


@router.post(
    "/agents/{agent_id}/runs", status_code=202, response_model=Run, openapi_extra=_START_BODY
)
async def start_run(agent_id: str, request: Request, ctx: Ctx) -> Any:
    """Start a run of the agent (its latest version, or ``version``); it executes in the
    background: poll the run, or read its events."""
    body = await json_body(request)
    run = await ctx.svc.runs.start(ctx.who, agent_id, body)
    if isinstance(body, dict) and body.get("stream") is True:
        return stream_events(ctx.svc.runs.follow(run.id, 0))
    return JSON(run_json(run), status_code=202, headers={"Location": f"/api/v1/runs/{run.id}"})


class AgentEvent(BaseModel):
    type: str
    payload: dict[str, Any] = {}
    idempotency_key: str | None = None


_EVENT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": AgentEvent.model_json_schema()}},
    }
}


@router.post(
    "/agents/{agent_id}/events",
    status_code=202,
    response_model=Run,
    openapi_extra=_EVENT_BODY,
    responses={200: {"model": Run, "description": "The run this idempotency key started"}},
)
async def send_event(agent_id: str, request: Request, ctx: Ctx) -> Any:
    """Start a run from an event: its payload gives the start variables. A repeated
    ``idempotency_key`` answers 200 with the run the first event started."""
    run, created = await ctx.svc.runs.start_event(ctx.who, agent_id, await json_body(request))
    headers = {"Location": f"/api/v1/runs/{run.id}"}
    return JSON(run_json(run), status_code=202 if created else 200, headers=headers)


@router.get("/runs", response_model=RunList)
async def list_runs(
    ctx: Ctx,
    agent_id: str | None = None,
    status: RunStatus | None = None,
    limit: int = Query(50, ge=1, le=200),
    cursor: str | None = None,
) -> Any:
    """Runs of an agent the caller may read, or (without ``agent_id``) the caller's own runs
    (admins: every run); newest first."""
    page = await ctx.svc.runs.page(ctx.who, agent_id, status, limit, cursor)
    return JSON({"data": [run_json(r) for r in page.data], "next_cursor": page.next_cursor})


class UsageTotals(BaseModel):
    """Tokens and cost summed over runs; ``by_model`` has the same counts per
    ``"<provider>/<model>"``. ``cost_usd`` leaves out calls of a model without a known price
    (``cost_note`` then names it)."""

    runs: int
    calls: int
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None
    cost_note: str | None = None
    by_model: dict[str, dict[str, Any]]


@router.get("/usage", response_model=UsageTotals)
async def usage_totals(
    ctx: Ctx,
    agent_id: str | None = None,
    user_id: str | None = None,
    since: Annotated[
        str | None,
        Query(alias="from", max_length=64, description="Runs created at or after (ISO 8601)"),
    ] = None,
    until: Annotated[
        str | None,
        Query(alias="to", max_length=64, description="Runs created before (ISO 8601)"),
    ] = None,
) -> Any:
    """Tokens and cost of the runs ``GET /runs`` would list with these filters, summed."""
    since_ms, until_ms = _ms(_instant(since, "from")), _ms(_instant(until, "to"))
    if since_ms is not None and until_ms is not None and since_ms >= until_ms:
        message = f"'from' ({since}) must be before 'to' ({until})."
        raise InvalidInput([FieldError("/query/from", message, "range"),
                            FieldError("/query/to", message, "range")])  # fmt: skip
    query = usage_service.UsageQuery(agent_id, user_id, since_ms, until_ms)
    return JSON(await usage_service.report(ctx.svc.runs, ctx.who, query))


def _instant(text: str | None, name: str) -> datetime | None:
    """An ISO 8601 date or date-time; the error the same whatever the text (it names the
    parameter and the form, never repeats the value)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        message = (
            f"'{name}' should be an ISO 8601 date or date-time: 2026-12-01, "
            "2026-12-01T09:00:00Z or 2026-12-01T18:00:00+09:00."
        )
        raise InvalidInput([FieldError(f"/query/{name}", message, "invalid")]) from None


def _ms(moment: datetime | None) -> int | None:
    """Epoch milliseconds; a time without a zone is UTC."""
    if moment is None:
        return None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


@router.get("/runs/{run_id}", response_model=Run)
async def get_run(run_id: str, ctx: Ctx) -> Any:
    return JSON(run_json(await ctx.svc.runs.get(ctx.who, run_id)))


@router.post("/runs/{run_id}/cancel", response_model=Run)
async def cancel_run(run_id: str, ctx: Ctx) -> Any:
    return JSON(run_json(await ctx.svc.runs.cancel(ctx.who, run_id)))


@router.get(
    "/runs/{run_id}/events",
    response_model=RunEventList,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def run_events(
    run_id: str,
    request: Request,
    ctx: Ctx,
    # Annotated: a Query() default would drop the bounds of SeqNumber.
    after: Annotated[SeqNumber, Query(description="Only events after this seq.")] = 0,
    limit: int = Query(500, ge=1, le=5000),
    last_event_id: Annotated[
        SeqNumber | None,
        Header(description="An event stream resumes after this seq (the last `id:` received)."),
    ] = None,
) -> Any:
    """The run's events as JSON, or (``Accept: text/event-stream``) as a live stream that ends
    with the run; ``Last-Event-ID`` resumes a stream after the last event it received."""
    if "text/event-stream" in request.headers.get("accept", ""):
        start = after if last_event_id is None else last_event_id
        await ctx.svc.runs.get(ctx.who, run_id)
        return stream_events(ctx.svc.runs.follow(run_id, start))
    events = await ctx.svc.runs.events(ctx.who, run_id, after, limit)
    return JSON({"data": [event_json(e) for e in events]})


def stream_events(events: AsyncIterator[EventRecord | None]) -> StreamingResponse:
    async def lines() -> AsyncIterator[bytes]:
        async for event in events:
            if event is None:
                yield b": keep-alive\n\n"
                continue
            data = encode(event_json(event))
            yield b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.type.encode(), data)

    return StreamingResponse(
        lines(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )


class Task(BaseModel):
    run_id: str
    command_id: str
    kind: Literal["await_input", "await_confirmation"]
    node_id: str
    frame: str
    request: dict[str, Any]
    assignees: list[str]
    created_at: int
    due_at: float | None


class TaskList(BaseModel):
    data: list[Task]


def task_json(task: CommandRecord) -> dict[str, Any]:
    return {
        "run_id": task.run_id, "command_id": task.command_id, "kind": task.kind,
        "node_id": task.node_id, "frame": task.frame, "request": task.payload,
        "assignees": task.assignees, "created_at": task.created_at, "due_at": task.due_at,
    }  # fmt: skip


@router.get("/tasks", response_model=TaskList)
async def list_tasks(ctx: Ctx) -> Any:
    """Pending human-input forms and actor confirmations the caller may answer."""
    return JSON({"data": [task_json(t) for t in await ctx.svc.tasks.mine(ctx.who)]})


@router.post("/runs/{run_id}/inputs/{node_id}", status_code=202)
async def answer_input(run_id: str, node_id: str, request: Request, ctx: Ctx) -> Any:
    """Answer a human_input node: ``{"values": {...}}``, checked against its fields."""
    await ctx.svc.tasks.answer(ctx.who, run_id, node_id, await json_body(request))
    return JSON({"accepted": True}, status_code=202)


@router.post("/runs/{run_id}/confirmations/{call_id}", status_code=202)
async def confirm_call(run_id: str, call_id: str, request: Request, ctx: Ctx) -> Any:
    """Approve (maybe with edited ``arguments``) or reject (with a ``reason``) an actor call."""
    await ctx.svc.tasks.decide(ctx.who, run_id, call_id, await json_body(request))
    return JSON({"accepted": True}, status_code=202)
