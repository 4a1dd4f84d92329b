"""Triggers (issue 21, docs/triggers.md): webhooks and schedules that start an event agent's
runs, each as the user who created (or last re-enabled) it.

- Managing them (``/api/v1/agents/{id}/triggers``) needs ``edit`` on the agent; a hidden agent
  is answered as any other hidden agent is (services/agents.py).
- Every delivery and tick acts for the trigger's user as they are *now*: one who can no longer
  run the agent (access revoked, marking lost, user deleted) stops the trigger, with the
  reason shown, and nothing starts.
- A webhook delivery is checked (size, source, signature, timestamp: domain/triggers.py)
  before anything is read for it; its ``X-Dhub-Delivery`` id is the run's idempotency key, so
  a retried delivery gives the first run, never a second.
- A schedule's ticks are started by services/schedules.py (the scheduler of each process that
  executes runs); here, its ``next_fire_at`` is set as it is made, patched, stopped, started.
- History keeps the newest ``HISTORY_KEPT`` events per trigger: refused deliveries come from
  anyone, and must not grow it without bound.
"""

from __future__ import annotations

import secrets as random_secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from dhub.access.principal import Principal
from dhub.access.tokens import principal_of
from dhub.domain.errors import DhubError, FieldError, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.domain.merge_patch import merge_patch
from dhub.domain.pointers import from_validation_error
from dhub.domain.schedules import iso, next_after, upcoming
from dhub.domain.triggers import (
    DELIVERY_HEADER,
    MAX_DELIVERY_ID,
    ScheduleConfig,
    TriggerSpec,
    WebhookConfig,
    signature_problem,
    source_allowed,
)
from dhub.engine.expressions import ExpressionError, Where, shared
from dhub.services.agents import AgentService
from dhub.services.runs import RunService
from dhub.services.secret_vault import SecretVault
from dhub.store import triggers as store
from dhub.store.db import Database

HISTORY_KEPT = 1000
# Headers a delivery's run never keeps in sys.event (readers of the run would see them): its
# signature, and any credential a sender's HTTP client adds of its own accord.
_UNKEPT_HEADERS = frozenset({"x-dhub-signature", "authorization", "proxy-authorization", "cookie"})
_CONFIG_TAGS = frozenset({"webhook", "schedule"})  # the union's tags, not in error pointers
SECRET_PREFIX = "whsec_"


class Refused(DhubError):
    """A delivery that starts nothing: ``status_code`` says why (401, 403, 409, 422)."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code


@dataclass(frozen=True)
class TriggerView:
    record: store.TriggerRecord
    spec: TriggerSpec
    secret: str | None = None  # a webhook's, only as it is made or rotated

    def json(self, base_url: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.record.id,
            "agent_id": self.record.agent_id,
            "type": self.record.type,
            **self.spec.model_dump(mode="json"),
            "status": self.record.status,
            "stopped_reason": self.record.stopped_reason,
            "runs_as": self.record.created_by,
            "created_at": self.record.created_at,
            "updated_at": self.record.updated_at,
        }
        if self.record.type == "webhook":
            body["url"] = f"{base_url}/hooks/{self.record.id}"
        if isinstance(self.spec.config, ScheduleConfig):
            body.update(_fires(self.record, self.spec.config))
        if self.secret is not None:
            body["secret"] = self.secret
        return body


@dataclass(frozen=True)
class Delivered:
    run_id: str
    created: bool


class TriggerService:
    def __init__(
        self,
        db: Database,
        agents: AgentService,
        runs: RunService,
        vault: SecretVault,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.agents = agents
        self.runs = runs
        self.vault = vault
        self.clock = clock

    # -- managing -------------------------------------------------------------------------------

    async def create(self, who: Principal, agent_id: str, doc: Any) -> TriggerView:
        await self._editable_event_agent(who, agent_id)
        spec = _checked(doc)
        trigger_id, at = new_id("trigger"), round(self.clock() * 1000)
        secret = None
        sealed = None
        next_fire_at = None
        if isinstance(spec.config, WebhookConfig):
            secret = SECRET_PREFIX + random_secrets.token_urlsafe(32)
            sealed = self.vault.seal(trigger_id, secret)
        elif spec.enabled:
            next_fire_at = next_after(spec.config.rule(at), at)
        record = store.TriggerRecord(
            trigger_id, agent_id, spec.config.type, spec.model_dump_json(), sealed,
            who.user_id, "active" if spec.enabled else "stopped",
            None if spec.enabled else "disabled", next_fire_at, None, at, at,
        )  # fmt: skip
        async with self.db.write() as conn:
            await store.insert_trigger(conn, record)
        return TriggerView(record, spec, secret)

    async def all(self, who: Principal, agent_id: str) -> list[TriggerView]:
        await self.agents.editable(who, agent_id)
        async with self.db.read() as conn:
            found = await store.agent_triggers(conn, agent_id)
        return [TriggerView(r, TriggerSpec.model_validate_json(r.document)) for r in found]

    async def get(self, who: Principal, agent_id: str, trigger_id: str) -> TriggerView:
        record = await self._own(who, agent_id, trigger_id)
        return TriggerView(record, TriggerSpec.model_validate_json(record.document))

    async def update(
        self, who: Principal, agent_id: str, trigger_id: str, patch: Any
    ) -> TriggerView:
        """A merge patch of the document (its type stays). ``enabled: true`` on a stopped
        trigger starts it again with the caller as its user (they can run the agent: they
        edit it)."""
        record = await self._own(who, agent_id, trigger_id)
        if not isinstance(patch, dict):
            raise InvalidInput([FieldError("", "The patch should be an object.", "type")])
        before = orjson.loads(record.document)
        spec = _checked(merge_patch(before, patch))
        if spec.config.type != record.type:
            message = f"A trigger's type stays {record.type}: delete it and create another."
            raise InvalidInput([FieldError("/config/type", message, "read_only")])
        values: dict[str, Any] = {"document": spec.model_dump_json(), "updated_at": now_ms()}
        starts = patch.get("enabled") is True and record.status != "active"
        if starts:
            values.update(status="active", stopped_reason=None, created_by=who.user_id)
        elif not spec.enabled:
            values.update(status="stopped", stopped_reason="disabled")
        if isinstance(spec.config, ScheduleConfig):
            active = starts or (spec.enabled and record.status == "active")
            values.update(self._next_fire(record, before, spec.config, active, starts))
        async with self.db.write() as conn:
            await store.update_trigger(conn, trigger_id, values)
            updated = await store.get_trigger(conn, trigger_id)
        assert updated is not None
        return TriggerView(updated, spec)

    def _next_fire(
        self, record: store.TriggerRecord, before: dict[str, Any], config: ScheduleConfig,
        active: bool, starts: bool,
    ) -> dict[str, Any]:  # fmt: skip
        """A schedule's next tick after a patch: none while stopped; counted from now when it
        starts again (ticks while it was stopped are not missed ones) or its rule changed;
        else kept (a tick due and not yet handled stays due)."""
        if not active:
            return {"next_fire_at": None}
        old = before.get("config", {})
        changed = any(old.get(k) != getattr(config, k) for k in ("cron", "every", "timezone"))
        if not starts and not changed and record.next_fire_at is not None:
            return {}
        at = round(self.clock() * 1000)
        return {"next_fire_at": next_after(config.rule(record.created_at), at)}

    async def rotate_secret(self, who: Principal, agent_id: str, trigger_id: str) -> TriggerView:
        record = await self._own(who, agent_id, trigger_id)
        if record.type != "webhook":
            raise InvalidInput([FieldError("", "Only a webhook has a secret.", "value")])
        secret = SECRET_PREFIX + random_secrets.token_urlsafe(32)
        values = {"secret": self.vault.seal(trigger_id, secret), "updated_at": now_ms()}
        async with self.db.write() as conn:
            await store.update_trigger(conn, trigger_id, values)
            updated = await store.get_trigger(conn, trigger_id)
        assert updated is not None
        return TriggerView(updated, TriggerSpec.model_validate_json(updated.document), secret)

    async def delete(self, who: Principal, agent_id: str, trigger_id: str) -> None:
        await self._own(who, agent_id, trigger_id)
        async with self.db.write() as conn:
            await store.delete_trigger(conn, trigger_id)

    async def history(
        self, who: Principal, agent_id: str, trigger_id: str, before: str | None, limit: int
    ) -> list[store.TriggerEvent]:
        await self._own(who, agent_id, trigger_id)
        async with self.db.read() as conn:
            return await store.events(conn, trigger_id, before, limit)

    async def _editable_event_agent(self, who: Principal, agent_id: str) -> None:
        record = await self.agents.editable(who, agent_id)
        if orjson.loads(record.document).get("input_mode") != "event":
            message = (
                "Triggers start event agents (input_mode: event); this one is a chat agent: "
                "its conversations start its runs."
            )
            raise InvalidInput([FieldError("", message, "not_event_agent")])

    async def _own(self, who: Principal, agent_id: str, trigger_id: str) -> store.TriggerRecord:
        """The agent's trigger, for an editor of the agent; any other id is not found."""
        await self.agents.editable(who, agent_id)
        async with self.db.read() as conn:
            record = await store.get_trigger(conn, trigger_id)
        if record is None or record.agent_id != agent_id:
            raise NotFound(f"The agent '{agent_id}' has no trigger '{trigger_id}'.")
        return record

    # -- deliveries -----------------------------------------------------------------------------

    async def deliver(
        self, trigger_id: str, headers: Mapping[str, str], body: bytes, source: str | None
    ) -> Delivered:
        """A webhook delivery: checked, then a run as the trigger's user (or the run this
        delivery id started before). Raises ``Refused`` (recorded in the history) or
        NotFound (no such webhook: nothing recorded)."""
        async with self.db.read() as conn:
            record = await store.get_trigger(conn, trigger_id)
        if record is None or record.type != "webhook" or record.secret is None:
            raise NotFound(f"No webhook '{trigger_id}'.")
        lowered = {k.lower(): v for k, v in headers.items()}
        delivery = lowered.get(DELIVERY_HEADER.lower())
        spec = TriggerSpec.model_validate_json(record.document)
        assert isinstance(spec.config, WebhookConfig)
        try:
            return await self._deliver(record, spec.config, lowered, body, source, delivery)
        except Refused as refused:
            await self._note(record.id, "delivery", delivery, "refused", str(refused), None)
            raise

    async def _deliver(
        self,
        record: store.TriggerRecord,
        config: WebhookConfig,
        headers: dict[str, str],
        body: bytes,
        source: str | None,
        delivery: str | None,
    ) -> Delivered:
        if not source_allowed(config.allowed_sources, source):
            raise Refused(403, f"Deliveries from {source} are not allowed for this webhook.")
        secret = self.vault.unseal(record.id, record.secret or "")
        problem = signature_problem(secret, headers, body, self.clock())
        if problem is not None:
            raise Refused(401, f"Signature refused: {problem}.")
        if delivery is not None and not 1 <= len(delivery) <= MAX_DELIVERY_ID:
            raise Refused(422, f"{DELIVERY_HEADER} should be 1 to {MAX_DELIVERY_ID} characters.")
        if record.status != "active":
            raise Refused(409, f"This trigger is stopped: {record.stopped_reason}.")
        who = await self.acting_user(record)
        payload = _payload(body)
        inputs = _inputs(config, payload, headers)
        key = None if delivery is None else f"hook:{record.id}:{delivery}"
        shown = {k: v for k, v in headers.items() if k not in _UNKEPT_HEADERS}
        event = {"type": "webhook", "trigger_id": record.id, "payload": payload, "headers": shown}
        try:
            run, created = await self.runs.start_once(who, record.agent_id, inputs, key, event)
        except InvalidInput as exc:
            reasons = "; ".join(f"{e.loc}: {e.message}" for e in exc.errors[:3])
            raise Refused(422, f"The agent cannot start with these inputs: {reasons}") from exc
        await self._note(record.id, "delivery", delivery,
                         "started" if created else "repeated", None, run.id)  # fmt: skip
        return Delivered(run.id, created)

    async def acting_user(self, record: store.TriggerRecord) -> Principal:
        """The trigger's user as they are now; one who can no longer run the agent stops it."""
        async with self.db.read() as conn:
            who = await principal_of(conn, record.created_by)
        try:
            await self.agents.runnable(who, record.agent_id)
        except DhubError as exc:
            reason = f"its user {record.created_by} can no longer run the agent"
            async with self.db.write() as conn:
                await store.update_trigger(
                    conn, record.id,
                    {"status": "stopped", "stopped_reason": reason, "updated_at": now_ms()},
                )  # fmt: skip
            raise Refused(409, f"This trigger is stopped: {reason}.") from exc
        return who

    async def _note(
        self, trigger_id: str, kind: str, key: str | None, status: str, reason: str | None,
        run_id: str | None,
    ) -> None:  # fmt: skip
        event = store.TriggerEvent(
            new_id("tev"), trigger_id, kind, (key or "")[:200] or None, status, reason, run_id,
            now_ms(),
        )  # fmt: skip
        async with self.db.write() as conn:
            await store.add_event(conn, event)
            await store.prune_events(conn, trigger_id, HISTORY_KEPT)


def _fires(record: store.TriggerRecord, config: ScheduleConfig) -> dict[str, Any]:
    """A schedule's next five ticks (none while stopped) and its last, ISO with the offset of
    its time zone."""
    upcoming_ticks: list[int] = []
    if record.status == "active" and record.next_fire_at is not None:
        rule = config.rule(record.created_at)
        upcoming_ticks = [record.next_fire_at, *upcoming(rule, record.next_fire_at, 4)]
    last = record.last_fire_at
    return {
        "next_fires": [iso(at, config.timezone) for at in upcoming_ticks],
        "last_fire": None if last is None else iso(last, config.timezone),
    }


def _checked(doc: Any) -> TriggerSpec:
    if not isinstance(doc, dict):
        raise InvalidInput([FieldError("", "The trigger should be an object.", "type")])
    try:
        return TriggerSpec.model_validate(doc)
    except ValidationError as exc:
        raise InvalidInput(from_validation_error(exc, doc, _CONFIG_TAGS)) from exc


def _payload(body: bytes) -> Any:
    """The body as JSON when it is JSON, else as text."""
    try:
        return orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        return body.decode(errors="replace")


def _inputs(config: WebhookConfig, payload: Any, headers: dict[str, str]) -> dict[str, Any]:
    if config.mapping is None:
        if not isinstance(payload, dict):
            raise Refused(422, "The body should be a JSON object (its fields are the inputs), "
                               "or the webhook should have a mapping.")  # fmt: skip
        return payload
    scope = {"body": payload, "headers": headers}
    inputs: dict[str, Any] = {}
    for name, source in config.mapping.items():
        try:
            inputs[name] = shared().value(source, scope, Where("webhook", f"mapping.{name}"))
        except ExpressionError as exc:
            raise Refused(422, f"The mapping of '{name}' failed: {exc}") from exc
    return inputs
