"""The scheduler (issue 21, docs/triggers.md "Schedules"): in each process that executes runs
(embedded: the server; distributed: each worker), a loop that every ``poll`` seconds starts
the runs of the schedules' ticks that have come, as each schedule's user.

Exactly once, however many processes: a tick's run is started with the idempotency key
``tick:{trigger_id}:{tick_ms}`` (the database's unique key: a second start of it gives the
first run), *then* the schedule is moved on by a claim (``UPDATE ... WHERE next_fire_at =`` the
tick read) in the transaction that records the tick in the history: of processes handling
one tick, one moves it on and records it. A process that dies between the start and the claim
leaves the tick due: the next pass finds its run (``repeated``) and records that.

Missed ticks: a tick handled more than ``LATE_MS`` after its instant was missed (no process
ran then). ``skip`` starts nothing for missed ticks and moves on to the next future one;
``run_once`` starts one run, for the latest. A tick on time always starts its run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from dhub.domain.errors import DhubError, InvalidInput
from dhub.domain.ids import new_id
from dhub.domain.schedules import iso, latest_due, next_after
from dhub.domain.triggers import ScheduleConfig, TriggerSpec
from dhub.services.agents import AgentService
from dhub.services.runs import RunService
from dhub.services.runtime import Runtime
from dhub.services.triggers import HISTORY_KEPT, TriggerService
from dhub.store import triggers as store

log = logging.getLogger("dhub.schedules")
LATE_MS = 60_000  # a tick handled later than this after its instant was missed


class Scheduler:
    """Starts the runs of due ticks: ``pass_once`` now, or every ``poll`` seconds from
    ``start`` until ``stop``. "Now" is the trigger service's clock (a fake one in tests)."""

    def __init__(self, triggers: TriggerService, poll: float = 5.0) -> None:
        self.triggers = triggers
        self.poll = poll
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """Stop the loop, at once: a tick cut off before its claim is due again, and the next
        pass of any process finds its run by its key."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.pass_once()
            except Exception:  # the database away, say: the next pass tries again
                log.exception("a pass over the schedules failed; the next one tries again")
            await asyncio.sleep(self.poll)

    async def pass_once(self) -> int:
        """Handle the schedules due now (at most a batch of them); how many there were."""
        now = round(self.triggers.clock() * 1000)
        async with self.triggers.db.read() as conn:
            due = await store.due_schedules(conn, now)
        for record in due:
            try:
                await self._fire(record, now)
            except Exception:  # one schedule's failure never holds up the others
                log.exception("schedule %s: its tick failed; the next pass tries again", record.id)
        return len(due)

    async def _fire(self, record: store.TriggerRecord, now: int) -> None:
        config = TriggerSpec.model_validate_json(record.document).config
        assert isinstance(config, ScheduleConfig) and record.next_fire_at is not None
        rule = config.rule(record.created_at)
        first = record.next_fire_at
        latest = latest_due(rule, first, now)
        following = next_after(rule, latest)
        missed = now - latest > LATE_MS
        earlier = _missed_text(first, latest, config.timezone, missed)
        if missed and config.missed == "skip":
            skipped = f"{earlier} while no server ran: skipped (missed: skip)"
            await self._record(record, first, following, latest, "skipped", skipped, None)
            return
        reason = None if not earlier else f"{earlier} while no server ran: one run for the latest"
        try:
            who = await self.triggers.acting_user(record)
            key = f"tick:{record.id}:{latest}"
            event = {"type": "schedule", "trigger_id": record.id,
                     "tick": iso(latest, config.timezone), "missed": missed}  # fmt: skip
            run, created = await self.triggers.runs.start_once(
                who, record.agent_id, dict(config.inputs), key, event
            )
        except InvalidInput as exc:
            found = "; ".join(f"{e.loc}: {e.message}" for e in exc.errors[:3])
            why = f"The agent cannot start with the schedule's inputs: {found}"
            await self._record(record, first, following, latest, "refused", why, None)
            return
        except DhubError as exc:  # its user can no longer run the agent
            await self._record(record, first, following, latest, "refused", str(exc), None)
            return
        status = "started" if created else "repeated"
        await self._record(record, first, following, latest, status, reason, run.id)

    async def _record(
        self, record: store.TriggerRecord, due: int, following: int, tick: int, status: str,
        reason: str | None, run_id: str | None,
    ) -> None:  # fmt: skip
        """Move the schedule on from ``due`` to ``following`` and record ``tick`` (its key:
        the instant in the schedule's zone), only when this process's claim moved it."""
        at = round(self.triggers.clock() * 1000)
        config = TriggerSpec.model_validate_json(record.document).config
        assert isinstance(config, ScheduleConfig)
        key = iso(tick, config.timezone)
        event = store.TriggerEvent(new_id("tev"), record.id, "tick", key, status, reason,
                                   run_id, at)  # fmt: skip
        async with self.triggers.db.write() as conn:
            if await store.claim_tick(conn, record.id, due, following, tick, at):
                await store.add_event(conn, event)
                await store.prune_events(conn, record.id, HISTORY_KEPT)


def _missed_text(first: int, latest: int, timezone: str, missed: bool) -> str:
    """The ticks missed, in words ('' for none): all from ``first`` to ``latest`` when
    ``latest`` was missed too, else those before ``latest``."""
    if missed and latest == first:
        return f"the tick of {iso(latest, timezone)} was missed"
    if missed:
        return f"the ticks from {iso(first, timezone)} to {iso(latest, timezone)} were missed"
    if latest == first:
        return ""
    return f"the ticks from {iso(first, timezone)} to before {iso(latest, timezone)} were missed"


def scheduler_for(
    runtime: Runtime,
    triggers: TriggerService | None = None,
    clock: Callable[[], float] = time.time,
) -> Scheduler | None:
    """The scheduler of a process that executes runs (embedded: the server; distributed: a
    worker), on services of its own when given none (``dhub worker``, with ``clock``); None
    in an API-only process of distributed mode, or with DHUB_SCHEDULE_POLL_SECONDS=0."""
    poll = runtime.settings.schedule_poll_seconds
    if not runtime.executes_runs or poll <= 0:
        return None
    if triggers is None:
        agents = AgentService(runtime.db, runtime.providers)
        runs = RunService(runtime.db, agents, runtime.graphs, runtime.executor, runtime.dispatch)
        triggers = TriggerService(runtime.db, agents, runs, runtime.vault, clock)
    return Scheduler(triggers, poll)
