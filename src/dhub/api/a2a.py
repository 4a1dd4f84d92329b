"""``/a2a``: dhub's agents to other agent platforms over A2A, the Agent2Agent protocol
(docs/a2a.md), with the official SDK's JSON-RPC binding.

- ``GET /a2a/agents``: the cards of the agents the caller may run (discovery);
- ``GET /a2a/agents/{agent_id}/.well-known/agent-card.json``: one agent's card;
- ``POST /a2a/agents/{agent_id}``: its JSON-RPC endpoint (A2A 1.0 methods, and 0.3's
  ``message/send``, ``tasks/get``... through the SDK's compatibility adapter).

Every route authenticates with the bearer token like every /api/v1 route (the ``Ctx``
dependency), and looks the agent up as one the caller may run before anything else, so an
agent it may not run (marked, unshared, only readable) is answered exactly as an id no agent
has: the same 404, before the body is read. The SDK's dispatcher then parses the JSON-RPC
request and calls ``RunsHandler``, which keeps nothing itself: a task is a run
(services/a2a_tasks.py). The SDK's default handler keeps its tasks' live state in the memory
of one process, which neither survives a restart nor lets another API process answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
from a2a.server import jsonrpc_models as rpc
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from fastapi import APIRouter, Request
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response
from starlette.types import Message as AsgiMessage

from dhub.access.principal import Principal
from dhub.api import a2a_shapes as shapes
from dhub.api.deps import Ctx, json_body
from dhub.api.responses import JSON
from dhub.domain.errors import DhubError, InvalidInput
from dhub.services.a2a_tasks import A2ATasks, Delegate, NotCancelable, UnknownTask
from dhub.services.types import RunRecord

_CALL = "dhub.a2a"  # the scope key of what a call needs (``Call``)

router = APIRouter(prefix=shapes.PREFIX, tags=["a2a"])


@dataclass(frozen=True, slots=True)
class Call:
    """What the handler needs of the request: who calls which agent, and with what."""

    who: Principal
    agent: Delegate
    tasks: A2ATasks
    base: str  # the server's URL, to say where a run is answered
    wait_seconds: float  # how long message/send waits for its run


def _tasks(request: Request) -> A2ATasks:
    svc = request.app.state.services
    return A2ATasks(svc.agents, svc.runs, svc.conversations)


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("")
async def list_cards(request: Request, ctx: Ctx) -> Any:
    """The cards of the agents the caller may run, in their creation order: every agent a
    caller may delegate a task to, so a platform need not know their ids beforehand."""
    base = _base(request)
    found = await _tasks(request).delegates(ctx.who)
    return JSON({"data": [agent_card_to_dict(shapes.card(a, base)) for a in found]})


@router.get("/{agent_id}" + shapes.CARD_PATH)
async def get_card(agent_id: str, request: Request, ctx: Ctx) -> Any:
    """The agent's card, where A2A clients look for it below the agent's URL."""
    agent = await _tasks(request).delegate(ctx.who, agent_id)
    return JSON(agent_card_to_dict(shapes.card(agent, _base(request))))


@router.post(
    "/{agent_id}",
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "additionalProperties": True}}}}},
)  # fmt: skip
async def json_rpc(agent_id: str, request: Request, ctx: Ctx) -> Response:
    """A JSON-RPC request to the agent (SendMessage, SendStreamingMessage, GetTask,
    CancelTask, SubscribeToTask; message/send, message/stream, tasks/get, tasks/cancel,
    tasks/resubscribe in A2A 0.3): answered as JSON, or as an event stream for streaming."""
    tasks = _tasks(request)
    agent = await tasks.delegate(ctx.who, agent_id)
    try:
        # Read as every body of the API is (domain/bounds.py: its size, no NUL character,
        # its depth), then handed to the SDK as read.
        body = orjson.dumps(await json_body(request))
    except InvalidInput as exc:  # not JSON, or beyond the bounds: JSON-RPC's own errors
        unreadable = any(e.code == "json_invalid" for e in exc.errors)
        kind = rpc.JSONParseError if unreadable else rpc.InvalidRequestError
        refusal = kind(message=exc.detail, data={"errors": [e.as_dict() for e in exc.errors]})
        return JSONResponse(build_error_response(None, refusal))
    call = Call(ctx.who, agent, tasks, _base(request), request.app.state.a2a_wait_seconds)
    return await _DISPATCHER.handle_requests(_replaying(request, body, call))


def _replaying(request: Request, body: bytes, call: Call) -> StarletteRequest:
    """The request for the SDK: with the ``Call``, and the body already read here; then the
    client's own messages (its disconnecting), should anything listen for them."""
    read = False

    async def receive() -> AsgiMessage:
        nonlocal read
        if read:
            return await request.receive()
        read = True
        return {"type": "http.request", "body": body, "more_body": False}

    return StarletteRequest({**request.scope, _CALL: call}, receive)


class _Contexts(DefaultServerCallContextBuilder):
    """The SDK's call context (the headers it reads the protocol version from), with the
    ``Call`` the route made."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        context.state[_CALL] = request.scope[_CALL]
        return context


def _call(context: ServerCallContext) -> Call:
    call = context.state.get(_CALL)
    if not isinstance(call, Call):  # only json_rpc reaches the dispatcher, and it sets it
        raise InvalidRequestError("The request reached A2A unauthenticated.")
    return call


class RunsHandler(RequestHandler):
    """A2A's requests, answered from dhub's runs as the caller (services/a2a_tasks.py)."""

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """A new task: the run the message starts, once it ended or waits for a person (or
        the wait is over: it goes on, read it with GetTask); at once if the sender asks to
        return immediately."""
        call = _call(context)
        run = await _start(call, params)
        if not params.configuration.return_immediately:
            run = await call.tasks.settled(call.who, run.id, call.wait_seconds)
        return shapes.task(run, call.base)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task as it starts, then each change of its status until it ends or waits
        for a person (its outputs, as an artifact, just before it completes)."""
        call = _call(context)
        run = await _start(call, params)
        yield shapes.task(run, call.base)
        async for event in _updates(call, run):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        call = _call(context)
        run = await _own(call, params.id)
        yield shapes.task(run, call.base)
        async for event in _updates(call, run):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        call = _call(context)
        return shapes.task(await _own(call, params.id), call.base)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        call = _call(context)
        try:
            run = await call.tasks.cancel(call.who, call.agent, params.id)
        except UnknownTask as exc:
            raise TaskNotFoundError(exc.detail) from None
        except NotCancelable as exc:
            raise TaskNotCancelableError(exc.detail) from None
        return shapes.task(run, call.base)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        call = _call(context)
        raise UnsupportedOperationError(
            "ListTasks is not served: read a task by its id (GetTask), or list your runs of "
            f"this agent at GET {call.base}/api/v1/runs?agent_id={call.agent.agent_id}."
        )

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(
            "The agent's card is already read with your token: it has no extended card."
        )

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        _no_push()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        _no_push()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        _no_push()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        _no_push()


def _no_push() -> NoReturn:
    raise PushNotificationNotSupportedError(
        "Push notifications are not served: follow a task with SendStreamingMessage or "
        "SubscribeToTask, or poll it with GetTask."
    )


async def _start(call: Call, params: SendMessageRequest) -> RunRecord:
    """The run a message starts; what the message got wrong is InvalidParams naming it."""
    message = params.message
    if message.task_id:
        run = await _own(call, message.task_id)  # another's task: as an unknown id
        raise UnsupportedOperationError(
            f"Task '{run.id}' takes no further messages: a person answers a task that waits "
            f"for input at {call.base}/api/v1/runs/{run.id} (see its status message). Send a "
            "new message without taskId (with its contextId to continue a conversation)."
        )
    ask = shapes.ask(message)
    try:
        return await call.tasks.send(call.who, call.agent, ask)
    except InvalidInput as exc:
        raise InvalidParamsError(exc.detail, _violations(exc)) from None
    except DhubError as exc:  # the conversation still answers its last message, say
        raise InvalidRequestError(exc.detail) from None


def _violations(exc: InvalidInput) -> dict[str, Any]:
    """Each problem as the SDK reports a field violation (JSON pointers, as the API names)."""
    return {"errors": [{"field": e.loc or "/", "message": e.message} for e in exc.errors]}


async def _own(call: Call, task_id: str) -> RunRecord:
    try:
        return await call.tasks.task(call.who, call.agent, task_id)
    except UnknownTask as exc:
        raise TaskNotFoundError(exc.detail) from None


async def _updates(
    call: Call, run: RunRecord
) -> AsyncGenerator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    async for now in call.tasks.changes(call.who, run):
        context_id = shapes.context_of(now)
        if now.status == "succeeded":
            yield TaskArtifactUpdateEvent(
                task_id=now.id, context_id=context_id, artifact=shapes.artifact(now),
                last_chunk=True,
            )  # fmt: skip
        status = shapes.status(now, call.base)
        yield TaskStatusUpdateEvent(task_id=now.id, context_id=context_id, status=status)


# One dispatcher for the process: it holds no state of its own (the handler reaches the
# calling app's services through the request), like the routes it serves.
_DISPATCHER = JsonRpcDispatcher(RunsHandler(), _Contexts(), enable_v0_3_compat=True)
