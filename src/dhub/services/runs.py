"""Runs of agents (DESIGN.md 4): start, read, list, cancel, read their events.

A run is visible to whoever may read its agent, and started or cancelled by whoever may run it
(the ``runner`` scope); a run of a built-in agent only to its user and admins
(``policy.sees_run``). Start inputs are checked against the start node before the run exists
(422 naming each input). The run then executes in this process's RunExecutor.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.exc import IntegrityError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.bounds import INT32_MAX
from dhub.domain.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.domain.nodes import InputField
from dhub.engine import checkpoints
from dhub.engine.compile import CompiledGraph
from dhub.engine.state import CancelRun, RunState
from dhub.engine.stepper import Stepper
from dhub.engine.values import InputError, check_submission
from dhub.observability import metrics, traces
from dhub.providers.types import EFFORTS
from dhub.runtime.dispatch import STEPS_CHANNEL, Dispatch, InProcess, notify
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Answer, Decision
from dhub.runtime.run_writer import start_state
from dhub.services.agents import AgentService
from dhub.services.graphs import Graphs
from dhub.services.model_checks import override_errors
from dhub.store import conversations as chats
from dhub.store import inbox
from dhub.store import runs as store
from dhub.store.db import Database

FINISHED = ("succeeded", "failed", "cancelled")
_REFUSED = {
    "answered": "This task of run '{run_id}' has an answer saved already (the first one "
    "stays, and the run applies it); read the run and its tasks again.",
    "closed": "Run '{run_id}' no longer waits for that answer (it was answered, timed out, or "
    "the run ended); read the run and its tasks again.",
}


@dataclass(frozen=True)
class RunPage:
    data: list[store.RunRecord]
    next_cursor: str | None


class EventHub:
    """Wakes the streams of a run when the executor saved a step of it (in this process)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def notify(self, run_id: str) -> None:
        for event in self._waiting.get(run_id, ()):
            event.set()

    async def wait(self, run_id: str, seconds: float) -> None:
        """Until the run's next saved step, or ``seconds``."""
        with self.watching(run_id) as woken:
            await self.until(woken, seconds)

    @contextlib.contextmanager
    def watching(self, run_id: str) -> Iterator[asyncio.Event]:
        """An event set by the run's next saved step from now on: taken before reading the
        stored events, a step saved during that read is not missed (a wait begun after the
        read would sleep through it, until the keep-alive)."""
        event = asyncio.Event()
        self._waiting.setdefault(run_id, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._waiting.get(run_id, set())
            waiting.discard(event)
            if not waiting:
                self._waiting.pop(run_id, None)

    @staticmethod
    async def until(woken: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), seconds)


class RunService:
    def __init__(
        self,
        db: Database,
        agents: AgentService,
        graphs: Graphs,
        executor: RunExecutor,
        dispatch: Dispatch | None = None,
    ) -> None:
        self.db = db
        self.agents = agents
        self.graphs = graphs
        self.executor = executor
        # Where runs execute: this process's executor, or workers through the queue.
        self.dispatch: Dispatch = dispatch or InProcess(executor)
        self.hub = EventHub()
        self.keepalive = 15.0  # seconds between keep-alive comments of an idle stream
        executor.listen(self.hub.notify)

    async def start(self, who: Principal, agent_id: str, body: Any) -> store.RunRecord:
        inputs, version, effort = _start_body(body)
        extra = {"reasoning_effort": effort} if effort is not None else {}
        return await self.launch(who, agent_id, inputs, version, None, extra)

    async def start_event(
        self, who: Principal, agent_id: str, body: Any
    ) -> tuple[store.RunRecord, bool]:
        """A run started by an event (input mode ``event``): the start variables come from
        its payload, ``sys.event`` holds it. A repeated idempotency key gives the run the
        first event started (and False), never a second run."""
        kind, payload, key = _event_body(body)
        event = {"type": kind, "payload": payload}
        return await self.start_once(who, agent_id, payload, key, event)

    async def start_once(
        self,
        who: Principal,
        agent_id: str,
        inputs: dict[str, Any],
        key: str | None,
        event: dict[str, Any],
    ) -> tuple[store.RunRecord, bool]:
        """A run from an event (an API call, a webhook delivery, a schedule's tick) with
        ``inputs``; ``sys.event`` holds ``event``. A repeated ``key`` gives the run the first
        one started (and False), never a second: the database's unique key decides, so it
        holds across processes too."""
        if key is not None:
            record = await self.agents.runnable(who, agent_id)
            if record.is_builtin:
                key = _own_key(who.user_id, key)
            async with self.db.read() as conn:
                found = await store.find_by_idempotency_key(conn, agent_id, key)
            if found is not None:
                return found, False
        try:
            run = await self.launch(who, agent_id, inputs, None, key, {"event": event})
        except IntegrityError:  # the same key, started concurrently: that run it is
            async with self.db.read() as conn:
                found = await store.find_by_idempotency_key(conn, agent_id, str(key))
            if found is None:
                raise
            return found, False
        return run, True

    async def launch(
        self,
        who: Principal,
        agent_id: str,
        inputs: dict[str, Any],
        version: int | None,
        key: str | None,
        sys_extra: dict[str, Any],
        chat: tuple[str, dict[str, Any], str | None] | None = None,
    ) -> store.RunRecord:
        """Check and create a run, then start it; ``chat``: the conversation (id, variables,
        and the turn that was its latest when the caller checked it had ended) whose turn
        this run is."""
        record, document = await self.agents.for_run(who, agent_id, version)
        version = version or record.version
        graph = await self.graphs.load(agent_id, version, who, document, starting=True)
        if isinstance(effort := sys_extra.get("reasoning_effort"), str):
            refused = override_errors(self.agents.providers, graph, effort)
            if refused:
                raise InvalidInput(refused)
        if chat is not None and graph.spec.mode == "react":
            sys_extra = {**sys_extra, **await self._history(chat[0])}
        if chat is not None and "message" in _start_variables(graph):
            inputs = {**inputs, "message": sys_extra.get("message", "")}
        try:
            typed = Stepper(graph).check_inputs(inputs)
        except InputError as exc:
            errors = [
                FieldError(f"/inputs/{name}", f"'{name}' {problem}.", "invalid_input")
                for name, problem in exc.problems
            ]
            raise InvalidInput(
                errors or [FieldError("/inputs", str(exc), "invalid_input")]
            ) from exc
        at = now_ms()
        run = store.RunRecord(
            id=new_id("run"), agent_id=agent_id, agent_version=version, user_id=who.user_id,
            status="queued", waiting=None, inputs=typed, outputs=None, error=None, usage={},
            conversation_id=chat[0] if chat else None, idempotency_key=key, step_count=1,
            event_count=0,
            created_at=at, started_at=None, finished_at=None, updated_at=at,
            lease_owner=self.executor.owner if self.dispatch.holds_new_runs else None,
            lease_expires_at=self.executor.lease_until(at) if self.dispatch.holds_new_runs
            else None,
        )  # fmt: skip
        context = {"run_id": run.id, "agent_id": agent_id, "user_id": who.user_id, **sys_extra}
        if chat is not None:
            context["conversation_id"] = chat[0]
        context.update(traces.carried())  # the request's trace, which the run continues
        conversation = chat[1] if chat else None
        async with self.db.write() as conn:
            await store.insert_run(conn, run, start_state(context, conversation))
            await self.dispatch.created(conn, run)  # distributed: its job, in this transaction
            if chat is not None:
                # The turn is taken in this transaction, if still the one the caller saw:
                # two messages sent at once cannot both start a turn.
                if not await chats.take_turn(conn, chat[0], run.id, chat[2]):
                    raise Conflict(
                        f"Conversation '{chat[0]}' is already answering another message; "
                        "send this one when that turn is done."
                    )
                message = str(sys_extra.get("message", ""))
                await chats.add_message(conn, chat[0], "user", message, run.id, at)
        self.dispatch.start(run, context, conversation)
        return run

    async def _history(self, conversation_id: str) -> dict[str, Any]:
        """Where a react chat turn starts: the transcript its last turn left (tool calls and
        the compaction summary included), else the conversation's messages."""
        async with self.db.read() as conn:
            conversation = await chats.get_conversation(conn, conversation_id)
            if conversation is not None and conversation.transcript:
                saved = conversation.transcript
                return {"history": saved.get("messages") or [], "summary": saved.get("summary")}
            found = await chats.messages(conn, conversation_id)
        return {"history": [{"role": m.role, "content": m.content} for m in found]}

    async def get(self, who: Principal, run_id: str) -> store.RunRecord:
        async with self.db.read() as conn:
            run = await store.get_run(conn, run_id)
        missing = NotFound(f"No run with id '{run_id}'.")
        if run is None:
            raise missing
        try:
            seen = await self.agents.read_access(who, run.agent_id)
        except NotFound:
            raise missing from None
        if not policy.sees_run(who, seen, run.user_id):
            raise missing
        return run

    async def page(
        self,
        who: Principal,
        agent_id: str | None,
        status: str | None,
        limit: int,
        cursor: str | None,
    ) -> RunPage:
        """With ``agent_id``: that agent's runs (the caller may read it). Without: the runs the
        caller started (admins: every run), of agents it may still read."""
        visible: list[str] | None = None
        hidden: list[str] = []
        everyones = who.is_admin
        if agent_id is not None:
            seen = await self.agents.read_access(who, agent_id)
            everyones = policy.sees_others_runs(seen)
        else:
            visible, hidden = await self.agents.run_scope(who)
        mine = None if everyones else who.user_id
        flt = store.RunFilter(agent_id=agent_id, status=status, user_id=mine)
        after = _decode(cursor) if cursor else None
        async with self.db.read() as conn:
            found = await store.list_runs(conn, flt, visible, after, limit + 1, hidden)
        more = len(found) > limit
        return RunPage(found[:limit], _encode(found[limit - 1].id) if more else None)

    async def cancel(self, who: Principal, run_id: str) -> store.RunRecord:
        run = await self.get(who, run_id)
        await self.agents.runnable(who, run.agent_id)
        if run.status in FINISHED:
            raise Conflict(f"Run '{run_id}' already ended ({run.status}); nothing to cancel.")
        if await self.executor.cancel(run_id):  # live in this process: cancelled here
            return await self.get(who, run_id)
        if self.dispatch.holds_new_runs:
            await self._cancel_stored(run)
            return await self.get(who, run_id)
        for _ in range(2):  # a worker may park the run as the cancellation reaches it
            try:
                await self._cancel_stored(run)
                break
            except Conflict:
                if await self.dispatch.cancel(run_id):  # the worker holding it cancelled it
                    break
        else:
            raise Conflict(
                f"Run '{run_id}' is busy in a worker; its cancellation is queued and takes "
                "effect when the worker reads it. Read the run again in a moment."
            )
        return await self.get(who, run_id)

    async def _cancel_stored(self, run: store.RunRecord) -> None:
        """A run no task of this process holds (parked, or its worker stopped): the stepper
        cancels its saved state, and that step is saved like any other, under the lease (so
        a worker that woke it meanwhile cannot step it too)."""
        graph = await self.graphs(run.agent_id, run.agent_version, run.user_id)
        at = now_ms()
        # An owner of its own: the claim fails while this process's executor holds the run
        # live (an API process that is also a worker), as it does for any other holder.
        owner, seconds = f"{self.executor.owner}/cancel", self.executor.lease_seconds
        async with self.db.write() as conn:
            if not await store.claim(conn, run.id, owner, at, seconds):
                raise Conflict(f"Run '{run.id}' is being executed by another server; try again.")
            current = await store.get_run(conn, run.id)
            saved = await store.load_state(conn, run.id)
            assert current is not None
            cancel = CancelRun("cancelled through the API", at / 1000)
            step = Stepper(graph).step(RunState.from_dict(saved), cancel)
            await store.record_step(
                conn, run.id, current.step_count, checkpoints.diff(saved, step.state.to_dict()),
                events=step.events,
                closed=dict.fromkeys(saved.get("pending", {}), "cancelled"),
                changes={"status": "cancelled", "waiting": None, "finished_at": at}, at=at,
                owner=owner,
            )  # fmt: skip
            await inbox.settle(conn, [], [run.id])  # what was left for it is moot
            if not self.dispatch.holds_new_runs:
                await notify(conn, STEPS_CHANNEL, [run.id])  # other API processes' streams
        self.hub.notify(run.id)  # the streams of this process
        metrics.run_finished(run.agent_id, "cancelled", run.created_at)

    async def events(
        self, who: Principal, run_id: str, after: int, limit: int
    ) -> list[store.EventRecord]:
        await self.get(who, run_id)
        async with self.db.read() as conn:
            return await store.events_after(conn, run_id, after, limit)

    async def follow(self, run_id: str, after: int) -> AsyncIterator[store.EventRecord | None]:
        """Every event after ``after``, in order, as they are saved, until the run ends
        (``None`` every ``keepalive`` seconds while nothing happens). The stored log is the
        source: a stream that reconnects with its last seq sees each event exactly once. The
        caller checks access first (``get``): a stream's status is sent before it starts."""
        while True:
            with self.hub.watching(run_id) as woken:
                async with self.db.read(snapshot=True) as conn:
                    found = await store.events_after(conn, run_id, after, 500)
                    run = await store.get_run(conn, run_id)
                for event in found:
                    after = event.seq
                    yield event
                if found:
                    continue
                if run is None or run.status in FINISHED:
                    return
                await self.hub.until(woken, self.keepalive)
            yield None


class TaskService:
    """Human tasks: the pending input forms and actor confirmations of waiting runs. A task
    is answered by one of its assignees or, when it has none, by the run's user."""

    def __init__(self, db: Database, runs: RunService) -> None:
        self.db = db
        self.runs = runs

    async def mine(self, who: Principal) -> list[store.CommandRecord]:
        """Open tasks the caller may answer; a task whose answer is saved (the run has not
        applied it yet, e.g. the server restarts) is no longer one."""
        visible, hidden = await self.runs.agents.run_scope(who)
        async with self.db.read(snapshot=True) as conn:
            found = await store.open_tasks(conn, sorted(who.principal_ids), visible, hidden)
            answered = await inbox.answered(conn, [t.run_id for t in found])
        return [t for t in found if (t.run_id, t.command_id) not in answered]

    async def _task(
        self, who: Principal, run_id: str, kind: str, match: Callable[[store.CommandRecord], bool]
    ) -> tuple[store.RunRecord, store.CommandRecord]:
        run = await self.runs.get(who, run_id)
        async with self.db.read() as conn:
            pending = await store.pending_commands(conn, run_id)
        found = [c for c in pending if c.kind == kind and match(c)]
        if not found:
            raise NotFound(f"Run '{run_id}' is not waiting for that ({run.status}).")
        task = found[0]
        allowed = {run.user_id, *task.assignees}  # DESIGN.md 2: admins are not among them
        if not allowed & who.principal_ids:
            raise Forbidden(
                f"Only {', '.join(sorted(allowed))} may answer this task of run '{run_id}'."
            )
        return run, task

    async def answer(self, who: Principal, run_id: str, node_id: str, body: Any) -> None:
        _, task = await self._task(who, run_id, "await_input", lambda c: c.node_id == node_id)
        values = body.get("values") if isinstance(body, dict) else None
        if not isinstance(values, dict):
            raise InvalidInput([FieldError("/values", "values should be an object of the "
                                           "form's fields.", "type")])  # fmt: skip
        fields = [InputField.model_validate(f) for f in task.payload["fields"]]
        try:
            check_submission(fields, values)
        except InputError as exc:
            raise InvalidInput([FieldError("/values", str(exc), "invalid_answer")]) from exc
        await self._hand(run_id, task.command_id, Answer(values, who.user_id))

    async def decide(self, who: Principal, run_id: str, call_id: str, body: Any) -> None:
        _, task = await self._task(
            who, run_id, "await_confirmation", lambda c: c.command_id == call_id
        )
        if not isinstance(body, dict) or not isinstance(body.get("approve"), bool):
            raise InvalidInput([FieldError("/approve", "approve (true or false) is required.",
                                           "missing")])  # fmt: skip
        arguments = body.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise InvalidInput([FieldError("/arguments", "arguments should be an object.", "type")])
        decision = Decision(body["approve"], arguments, str(body.get("reason") or ""), who.user_id)
        await self._hand(run_id, task.command_id, decision)

    async def _hand(self, run_id: str, command_id: str, value: Answer | Decision) -> None:
        """Saved (committed) before the caller answers 202: an acknowledged answer survives
        any crash, and the run applies it once. A second answer to the task is 409."""
        outcome = await self.runs.dispatch.hand(run_id, command_id, value)
        if outcome != "saved":
            raise Conflict(_REFUSED[outcome].format(run_id=run_id))


def _start_variables(graph: CompiledGraph) -> set[str]:
    start = graph.nodes[graph.start]
    return {v.name for v in getattr(start.config, "variables", [])}


def _own_key(user_id: str, key: str) -> str:
    """The idempotency key of a user's event to a built-in agent, as stored: everyone runs a
    built-in, so one user's key must neither find another's run (and show it) nor block
    another's event. A digest of the pair, to fit the column whatever the ids' lengths."""
    digest = hashlib.sha256(orjson.dumps([user_id, key])).hexdigest()
    return f"user:{digest}"


def _event_body(body: Any) -> tuple[str, dict[str, Any], str | None]:
    if not isinstance(body, dict):
        shape = '{"type": "...", "payload": {...}, "idempotency_key": "..."}'
        raise InvalidInput([FieldError("", f"The body should be an object: {shape}.", "type")])
    errors = [
        FieldError(f"/{k}", f"Unknown field '{k}'.", "unknown_field")
        for k in sorted(set(body) - {"type", "payload", "idempotency_key"})
    ]
    kind, payload, key = body.get("type"), body.get("payload", {}), body.get("idempotency_key")
    if not isinstance(kind, str) or not kind:
        errors.append(FieldError("/type", "type (a non-empty string) is required.", "missing"))
    if not isinstance(payload, dict):
        errors.append(FieldError("/payload", "payload should be an object.", "type"))
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 200):
        errors.append(FieldError("/idempotency_key", "idempotency_key should be a string of "
                                 "1 to 200 characters.", "type"))  # fmt: skip
    if errors:
        raise InvalidInput(errors)
    return str(kind), payload, key


def _start_body(body: Any) -> tuple[dict[str, Any], int | None, str | None]:
    if not isinstance(body, dict):
        raise InvalidInput([FieldError("", "The body should be an object: "
                                       '{"inputs": {...}, "version": n}.', "type")])  # fmt: skip
    unknown = sorted(set(body) - {"inputs", "version", "stream", "reasoning_effort"})
    errors = [FieldError(f"/{k}", f"Unknown field '{k}'.", "unknown_field") for k in unknown]
    inputs = body.get("inputs", {})
    if not isinstance(inputs, dict):
        errors.append(FieldError("/inputs", "inputs should be an object of named values.", "type"))
    version = body.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)
                                or not 1 <= version <= INT32_MAX):  # fmt: skip
        errors.append(FieldError("/version", "version should be a whole number from 1 to "
                                 f"{INT32_MAX}.", "type"))  # fmt: skip
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in EFFORTS:
        errors.append(FieldError("/reasoning_effort", "reasoning_effort should be one of "
                                 f"{', '.join(EFFORTS)} (or null).", "enum"))  # fmt: skip
    if errors:
        raise InvalidInput(errors)
    return inputs, version, effort


def _encode(run_id: str) -> str:
    return base64.urlsafe_b64encode(run_id.encode()).decode().rstrip("=")


def _decode(cursor: str) -> str:
    try:
        after = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if "\x00" not in after:  # PostgreSQL cannot compare a NUL
            return after
    except (ValueError, UnicodeDecodeError):
        pass
    raise InvalidInput([FieldError("/query/cursor", "Not a cursor this API gave out.", "cursor")])
