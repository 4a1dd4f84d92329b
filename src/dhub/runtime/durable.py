"""Durable runs in the server process (DESIGN.md 4, 7: the embedded default).

Each run executes as an asyncio task under a lease. Every step is saved before its commands are
performed, in one write transaction: the state patch, the step's events and the commands it
opened and closed (store/runs.py). A run whose process died is found by its lapsed lease and
resumed from its saved state: the calls it was waiting on run again, timers are re-armed at their
own times, people are asked again; nothing whose result was saved runs twice.

People answer through the API: ``answer`` and ``decide`` save the answer in the run's inbox
(runtime/mail.py) before anything else, then tell the run (``mail``): live here, it reads its
inbox; parked, it is woken and reads it as it loads. The step that consumes an answer deletes
its letter in the same transaction, so an acknowledged answer is never lost nor applied twice.
Each server also sweeps the inbox every ``timer_poll`` seconds (and at start-up): a letter
saved just before a crash, or for a run another server holds, reaches its run that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dhub.domain.ids import now_ms
from dhub.engine import journal
from dhub.engine.compile import CompiledGraph
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    Command,
    RunState,
    SleepUntil,
)
from dhub.observability import logs, metrics, traces
from dhub.runtime.admission import Admission
from dhub.runtime.executor import RunResult, resume_workflow, run_workflow
from dhub.runtime.group_commit import AfterWrite, GroupCommitter
from dhub.runtime.mail import Outcome, leave, letter_of
from dhub.runtime.ports import Answer, Clock, Decision, FunctionPort, KnowledgePort, ModelPort
from dhub.runtime.run_writer import (
    Live,
    Parked,
    RunWriter,
    ServerPeople,
    Stopped,
    given_up,
    start_state,
)
from dhub.store import inbox
from dhub.store import runs as store
from dhub.store.db import Database

log = logging.getLogger(__name__)
WOKEN = "~woken"  # admission's turn for runs resumed or woken (their user is not read yet)

# agent id, version, the run's user (whom references resolve for) -> graph
GraphLoader = Callable[[str, int, str], Awaitable[CompiledGraph]]
FunctionsFor = Callable[[str], FunctionPort]  # owner (agent version) -> its function port
KnowledgeFor = Callable[[str, str], KnowledgePort]  # user id, run id -> the run's knowledge port
Work = Callable[[Live], Awaitable[RunResult | None]]  # what a run's task does


@dataclass(frozen=True)
class _Loaded:
    run: store.RunRecord
    graph: CompiledGraph
    state: dict[str, Any]
    commands: list[Command]  # the run's pending commands, oldest first
    letters: list[inbox.Letter]  # its inbox, read with its state


class RunExecutor:
    """Executes and resumes durable runs as tasks of this process, each under a lease.

    A run that waits only for people (or for a timer further away than ``park_after``
    seconds) leaves memory: its last step gives the lease up, and the run is *parked* in the
    database. An answer wakes it (``answer``/``decide``, from any server process), and so does
    its timer (polled every ``timer_poll`` seconds, and once at start-up: timeouts that expired
    while the server was down fire then), as do letters found in the inbox by the same poll."""

    def __init__(
        self,
        db: Database,
        graphs: GraphLoader,
        functions: FunctionsFor,
        model: ModelPort,
        clock: Clock,
        owner: str,
        lease_seconds: float = 30.0,
        park_after: float = 5.0,
        timer_poll: float = 1.0,
        handoff: Handoff | None = None,
        knowledge: KnowledgeFor | None = None,
        after_write: AfterWrite | None = None,
        admission: Admission | None = None,
        max_attempts: int = 5,
    ) -> None:
        self.db = db
        # Executions in a row that may take a run up without it saving a step; the next one
        # fails it (DHUB_RUN_MAX_ATTEMPTS): a run that cannot go on is not retried for ever.
        self.max_attempts = max_attempts
        self._knowledge = knowledge
        self._graphs = graphs
        self._functions = functions
        self._model = model
        self._clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.park_after = park_after
        self.timer_poll = timer_poll
        self.handoff = handoff
        # More work in each step commit's transaction: a distributed worker's handoff, or
        # ``after_write`` (an embedded server on PostgreSQL tells the others' streams).
        self.committer = GroupCommitter(db, handoff.after_write if handoff else after_write)
        self.admission = admission or Admission(1 << 30)  # None: every run at once
        self._live: dict[str, Live] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._chores: list[asyncio.Task[None]] = []
        self._closing = False
        self._draining = False
        self._stopped: list[str] = []  # runs stopped by a drain or a close: to hand back

    def listen(self, listener: Callable[[str], None]) -> None:
        """``listener(run_id)`` is called after each step of a run is saved (for streams)."""
        self._listeners.append(listener)

    def _notify(self, run_id: str) -> None:
        for listener in self._listeners:
            listener(run_id)

    @property
    def live_count(self) -> int:
        """Runs in this process's memory (parked runs are not)."""
        return len(self._live)

    def lease_until(self, now: int) -> int:
        """When a lease taken at ``now`` (ms) expires: a run created here is created held."""
        return now + int(self.lease_seconds * 1000)

    # -- starting, resuming -----------------------------------------------------------------

    def start(
        self,
        run: store.RunRecord,
        context: dict[str, Any],
        conversation: dict[str, Any] | None = None,
    ) -> None:
        """Execute a run just created, its step 0 stored as ``start_state(context,
        conversation)``; a chat turn gets its conversation's variables."""
        self._spawn(
            run.id, lambda live: self._execute(live, run, context, conversation), run.user_id
        )

    async def recover(self) -> list[str]:
        """Resume every unfinished run no worker holds (after a restart), except parked ones,
        and wake the parked runs whose timers are due or that have answers waiting."""
        self._start_chores()
        resumed = await self._resume_lapsed()
        if self.handoff is None:
            await self._wake_due()
            await self._sweep_inbox()
        return resumed

    async def _resume_lapsed(self) -> list[str]:
        async with self.db.read(snapshot=True) as conn:
            lapsed = await store.lapsed_runs(conn, now_ms())
        resumed = [run_id for run_id in lapsed if run_id not in self._live]
        if self.handoff is not None:  # to the queue: any worker may take them
            await (self.handoff.sweep or self.handoff.requeue)(resumed)
            return resumed
        for run_id in resumed:
            self._wake(run_id)
        return resumed

    async def run_here(self, run_id: str) -> None:
        """A worker's job: execute the run in this process until it ends, parks or stops
        (unless another process holds it); it reads its inbox as it loads."""
        live = self._live.get(run_id)
        if live is None:
            live = self._wake(run_id)
        else:
            await self.mail(run_id)
        await asyncio.wait([live.task])

    async def mail(self, run_id: str) -> None:
        """Tell the run that its inbox has letters: live here, it reads them; parked, it is
        woken (embedded mode; a worker gets a job for it) and reads them as it loads. A run
        held by another process gets them from that process's inbox sweep."""
        for _ in range(3):  # a run parking (or ending) as the letter comes is woken anew
            live = self._live.get(run_id)
            if live is None:
                if self.handoff is None:
                    self._wake(run_id)
                return
            if live.queued is not None:
                return  # waiting its turn (admission): it reads its inbox as it loads
            await live.loaded.wait()
            if not live.parking and not live.task.done():
                await self._read_mail(run_id, live)
                if not live.parking and not live.task.done():
                    return
            await asyncio.wait([live.task])

    async def _read_mail(self, run_id: str, live: Live) -> None:
        async with self.db.read() as conn:
            found = await inbox.letters(conn, run_id)
        self._offer(live, found)

    async def _drop_moot(
        self, run_id: str, outstanding: list[Command], letters: list[inbox.Letter]
    ) -> list[inbox.Letter]:
        """The letters for tasks the run has open (and cancellations); the others are
        deleted (none should be left: the step closing a task takes its letter), so that they
        never wake the run again."""
        asks = {c.command_id for c in outstanding if isinstance(c, AwaitInput | AwaitConfirmation)}
        kept = [x for x in letters if x.kind == inbox.CANCEL or x.command_id in asks]
        if len(kept) < len(letters):
            moot = [(run_id, x.command_id) for x in letters if x not in kept]
            async with self.db.write() as conn:
                await inbox.settle(conn, moot, [])
        return kept

    @staticmethod
    def _offer(live: Live, letters: list[inbox.Letter]) -> None:
        """Hand the run the letters for tasks it has open (a letter for anything else is
        moot: its task closed as it was saved, and that step removed it)."""
        issued = live.journal.issued if live.journal is not None else {}
        for letter in letters:
            if isinstance(issued.get(letter.command_id), AwaitInput | AwaitConfirmation):
                live.people.offer(letter)

    def live_ids(self) -> list[str]:
        return list(self._live)

    def _spawn(self, run_id: str, work: Work, who: str = WOKEN) -> Live:
        """Execute ``work`` for the run once admission lets it (``who``: whose turn it takes:
        the user of a new run; runs woken or resumed share one turn)."""
        live = Live(ServerPeople())
        self._live[run_id] = live
        live.queued = self.admission.ticket(who)
        live.task = asyncio.ensure_future(self._admitted(run_id, live, work))
        live.task.add_done_callback(lambda task: self._forget(run_id, live))
        self._start_chores()
        return live

    async def _admitted(self, run_id: str, live: Live, work: Work) -> RunResult | None:
        await self.admission.wait(live.queued)
        live.queued = None
        try:
            return await self._attempt(run_id, work, live)
        finally:
            self.admission.release()

    async def _attempt(self, run_id: str, work: Work, live: Live) -> RunResult | None:
        """``work``; if it fails (its graph does not load, a step cannot be saved), how is
        kept on the run for its error should it give up, and the lease is let go."""
        try:
            return await work(live)
        except (Parked, Stopped, store.StepConflict):
            raise  # not failures: the run parked, the server stops, another worker has it
        except Exception as exc:
            with contextlib.suppress(Exception):  # the lease lapses anyway
                async with self.db.write() as conn:
                    await store.failed_attempt(conn, run_id, self.owner, _describe(exc))
            raise

    def _wake(self, run_id: str) -> Live:
        return self._spawn(run_id, lambda live: self._resume(live, run_id))

    def _forget(self, run_id: str, live: Live) -> None:
        live.loaded.set()
        if self._live.get(run_id) is live:
            del self._live[run_id]
        task = live.task
        if task.cancelled():
            return
        problem = task.exception()
        if isinstance(problem, Parked):
            log.debug("run %s is parked until an answer or its timer", run_id)
        elif isinstance(problem, Stopped):
            log.debug("run %s stopped with the server; it resumes at the next start", run_id)
            self._stopped.append(run_id)
        elif problem is not None:
            log.error("run %s stopped: %r", run_id, problem)

    async def _claim(self, run_id: str) -> bool:
        """Take the run up, unless another process holds it, or its last ``max_attempts``
        executions saved no step: then it is failed instead (False either way)."""
        async with self.db.write() as conn:
            taken = await store.take(conn, run_id, self.owner, now_ms(), self.lease_seconds)
        if taken is None:
            return False
        if taken.attempts <= self.max_attempts:
            return True
        await self._give_up(run_id, taken)
        return False

    async def _give_up(self, run_id: str, taken: store.Taken) -> None:
        """Fail a run that cannot go on, with a step like any other (streams and lists see
        it end), under the lease just taken."""
        async with self.db.read(snapshot=True) as conn:
            run = await store.get_run(conn, run_id)
            pending = await store.pending_commands(conn, run_id)
        if run is None:
            return
        attempts = taken.attempts - 1
        write, letters = given_up(run, pending, self.owner, attempts, taken.last_error)
        try:
            await self.committer.save(write, letters)
        except Exception as exc:
            log.error("run %s could not be failed after %d attempts: %r", run_id, attempts, exc)
            await self._release(run_id, None)
            return
        log.error("run %s failed: %s", run_id, (write.error or {}).get("message"))
        metrics.run_finished(run.agent_id, "failed", run.created_at)
        self._notify(run_id)

    def _journal(self, live: Live, run: store.RunRecord, state: dict[str, Any]) -> RunWriter:
        writer = RunWriter(
            self.committer, run.id, self.owner, max(run.step_count, 1), run.event_count + 1,
            state, live, notify=self._notify, stopping=self._is_closing, parks=self._parks,
            draining=self._is_draining,
            conversation_id=run.conversation_id, agent_id=run.agent_id, created_at=run.created_at,
        )  # fmt: skip
        live.journal = writer
        live.loaded.set()
        return writer

    async def _execute(
        self,
        live: Live,
        run: store.RunRecord,
        context: dict[str, Any],
        conversation: dict[str, Any] | None,
    ) -> RunResult | None:
        logs.run_id.set(run.id)  # this task's log lines name the run
        if run.lease_owner != self.owner and not await self._claim(run.id):
            return None
        graph = await self._graphs(run.agent_id, run.agent_version, run.user_id)
        return await self._first_steps(live, run, graph, context, conversation)

    async def _first_steps(
        self,
        live: Live,
        run: store.RunRecord,
        graph: CompiledGraph,
        context: dict[str, Any],
        conversation: dict[str, Any] | None,
        resumed: bool = False,
    ) -> RunResult | None:
        writer = self._journal(live, run, start_state(context, conversation))
        context = dict(context)  # its sys.trace gets this execution's span (when tracing)
        traced = traces.run_trace(graph, context, resumed)
        try:
            return await traces.traced(traced, run_workflow(
                graph, run.inputs, functions=self._functions(_owner(run)),
                model=traces.model_port(self._model, traced),
                clock=self._clock, human=live.people, knowledge=self._knowledge_of(run),
                context=context, observer=traces.observer(traced),
                conversation=conversation, journal=writer, live=writer.show,
            ))  # fmt: skip
        finally:
            await self._release(run.id, writer)

    async def _load(self, run_id: str) -> _Loaded | None:
        if not await self._claim(run_id):
            return None
        async with self.db.read(snapshot=True) as conn:
            run = await store.get_run(conn, run_id)
            saved = await store.load_state(conn, run_id)
            rows = await store.pending_commands(conn, run_id)
            letters = await inbox.letters(conn, run_id)
        if run is None:
            return None
        graph = await self._graphs(run.agent_id, run.agent_version, run.user_id)
        commands = [journal.command_from(r.kind, r.payload, saved) for r in rows]
        return _Loaded(run, graph, saved, commands, letters)

    async def _resume(self, live: Live, run_id: str) -> RunResult | None:
        logs.run_id.set(run_id)  # this task's log lines name the run
        loaded = await self._load(run_id)
        if loaded is None:
            return None
        run = loaded.run
        if "status" not in loaded.state:  # saved before its first step: start it now
            start = loaded.state.get("start", {})
            context = start.get("sys") or {"run_id": run.id, "agent_id": run.agent_id,
                                           "user_id": run.user_id}  # fmt: skip
            return await self._first_steps(
                live, run, loaded.graph, context, start.get("conversation"), resumed=True
            )
        state = RunState.from_dict(loaded.state)
        outstanding = [c for c in loaded.commands if getattr(c, "command_id", "") in state.pending]
        letters = await self._drop_moot(run_id, outstanding, loaded.letters)
        if _nothing_to_do(outstanding, letters):
            await self._release(run_id, None, untried=True)  # woken for nothing: parked
            return None
        writer = self._journal(live, run, loaded.state)
        writer.issued = {c.command_id: c for c in loaded.commands}  # type: ignore[union-attr]
        self._offer(live, letters)
        traced = traces.run_trace(loaded.graph, state.sys, resumed=True)  # saved with a step
        try:
            return await traces.traced(traced, resume_workflow(
                loaded.graph, state, outstanding, functions=self._functions(_owner(run)),
                model=traces.model_port(self._model, traced), clock=self._clock,
                human=live.people, knowledge=self._knowledge_of(run), journal=writer,
                live=writer.show, observer=traces.observer(traced),
            ))  # fmt: skip
        finally:
            await self._release(run_id, writer)

    def _knowledge_of(self, run: store.RunRecord) -> KnowledgePort | None:
        return None if self._knowledge is None else self._knowledge(run.user_id, run.id)

    async def _release(
        self, run_id: str, writer: RunWriter | None, *, untried: bool = False
    ) -> None:
        if writer is not None and writer.released:
            return  # its last step gave the lease up (it ended, or it is parked)
        with contextlib.suppress(Exception):  # a lapsed lease is taken over anyway
            async with self.db.write() as conn:
                await store.release(conn, run_id, self.owner, untried=untried)

    def _parks(self, issued: dict[str, Command]) -> bool:
        """A waiting run leaves memory unless a timer of its own is due soon."""
        timers = [c.at for c in issued.values() if isinstance(c, SleepUntil)]
        return not timers or min(timers) - self._clock.now() > self.park_after

    # -- chores: leases, timers -------------------------------------------------------------

    def _start_chores(self) -> None:
        if not self._chores and not self._closing:
            self._chores = [
                asyncio.ensure_future(self._renew_leases()),
                asyncio.ensure_future(self._poll_timers()),
            ]

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            if self._live:
                with contextlib.suppress(Exception):
                    async with self.db.write() as conn:
                        await store.renew_all(conn, self.owner, now_ms(), self.lease_seconds)

    async def _poll_timers(self) -> None:
        """Wake parked runs whose timers are due (in distributed mode their scheduled jobs
        do); once a lease length, also take over runs whose worker stopped without the
        server stopping (another server died, or a run's task failed on a database error),
        as a restart would."""
        swept = time.monotonic()
        while True:
            await asyncio.sleep(self.timer_poll)
            with contextlib.suppress(Exception):
                if self.handoff is None:
                    await self._wake_due()
                    await self._sweep_inbox()
                if time.monotonic() - swept >= self.lease_seconds:
                    swept = time.monotonic()
                    await self._resume_lapsed()

    async def _wake_due(self) -> None:
        async with self.db.read() as conn:
            due = await store.parked_timers(conn, self._clock.now(), now_ms())
        for run_id, _ in due:
            if run_id not in self._live:
                self._wake(run_id)

    async def _sweep_inbox(self) -> None:
        """Letters waiting for unfinished runs (embedded mode): runs live here read them
        (a run another server held when its answer came), runs nobody holds are woken (one
        parked when the server that saved its answer died, or whose holder died)."""
        async with self.db.read() as conn:
            addressed = await inbox.addressed(conn)
        now = now_ms()
        for run_id, lease_expires_at in addressed:
            if run_id in self._live:
                await self.mail(run_id)
            elif lease_expires_at is None or lease_expires_at <= now:
                self._wake(run_id)

    # -- people, cancellation ---------------------------------------------------------------

    async def answer(self, run_id: str, command_id: str, answer: Answer) -> bool:
        """Save a person's answer for the run, then tell the run (``hand``); False when the
        run does not wait for it (any more), or has an answer to that task already."""
        return await self.hand(run_id, command_id, answer) == "saved"

    async def decide(self, run_id: str, command_id: str, decision: Decision) -> bool:
        return await self.hand(run_id, command_id, decision) == "saved"

    async def hand(self, run_id: str, command_id: str, value: Answer | Decision) -> Outcome:
        """The answer or decision is saved in the run's inbox (its own transaction) before
        this returns "saved"; the run gets it from there, whatever happens next."""
        async with self.db.write() as conn:
            outcome = await leave(conn, letter_of(run_id, command_id, value), now_ms())
        if outcome == "saved":
            try:
                await self.mail(run_id)
            except Exception as exc:  # saved all the same: the inbox sweep brings it
                log.warning("run %s: its answer is saved, not handed over yet: %r", run_id, exc)
        return outcome

    async def cancel(self, run_id: str) -> bool:
        """Cancel a live run: its task saves a cancelled step, then ends."""
        live = self._live.get(run_id)
        if live is None:
            return False
        if live.queued is not None:  # waiting its turn: a cancellation does not wait
            self.admission.hurry(live.queued)
        await live.loaded.wait()  # cancelled while loading, it would save nothing
        if live.parking or live.task.done():
            return False
        live.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await live.task
        return True

    async def wait(self, run_id: str) -> RunResult | None:
        """The result of a live run once it ends (tests, `stream` requests); None if it is
        not live here or leaves memory (parked, stopped)."""
        live = self._live.get(run_id)
        if live is None:
            return None
        with contextlib.suppress(Parked, Stopped):
            return await asyncio.shield(live.task)
        return None

    def _is_closing(self) -> bool:
        return self._closing

    def _is_draining(self) -> bool:
        return self._draining

    def drain(self) -> None:
        """Begin a graceful stop: each run stops at its next saved step (see ``close``)."""
        self._draining = True

    async def close(self, grace: float = 0.0) -> None:
        """Stop executing: tasks end without marking their runs cancelled (their leases are
        released and the next start resumes them; in distributed mode they go back to the
        queue at once, for another worker). ``grace``: first let each run finish the calls
        under way and save their results, for up to that many seconds, so that nothing in
        flight is performed again elsewhere; what is still running then is cut off."""
        if grace > 0 and self._live:
            self.drain()
            await asyncio.wait([live.task for live in self._live.values()], timeout=grace)
        self._closing = True
        for chore in self._chores:
            chore.cancel()
        stopping = list(self._live.items())
        for _, live in stopping:
            live.task.cancel()
        await asyncio.gather(*(live.task for _, live in stopping), return_exceptions=True)
        handed = sorted({*self._stopped, *(run_id for run_id, _ in stopping)})
        if self.handoff is not None and handed:
            with contextlib.suppress(Exception):
                await self.handoff.requeue(handed)


@dataclass(frozen=True)
class Handoff:
    """What differs for a worker of distributed mode: ``after_write`` runs in each step
    commit (tell API processes, settle the inbox, schedule a parked run's timer as a job),
    ``requeue`` queues jobs for runs this process will not execute (the ones it hands back
    as it stops; and lapsed ones it found, unless ``sweep`` does)."""

    after_write: AfterWrite
    requeue: Callable[[list[str]], Awaitable[None]]
    # For the lapsed runs a sweep found (``requeue`` if None): checked again as they are queued.
    sweep: Callable[[list[str]], Awaitable[None]] | None = None


def _owner(run: store.RunRecord) -> str:
    """Whom the run's functions run for: the sandbox keeps a warm interpreter to one owner, so
    it names the run's user too (an interpreter that served one user never serves another)."""
    return f"{run.agent_id}@{run.agent_version}~{run.user_id}"


def _describe(problem: Exception) -> str:
    """An execution's failure as the run's error will quote it."""
    text = f"{type(problem).__name__}: {problem}" if str(problem) else type(problem).__name__
    return text[:2000]


def _nothing_to_do(outstanding: list[Command], letters: list[inbox.Letter]) -> bool:
    """A run woken while it waits for people only, none of whom answered (a stale job, a
    letter consumed meanwhile): it has nothing to do, and stays parked."""
    answered = {letter.command_id for letter in letters}
    if inbox.CANCEL in answered:
        return False  # a worker's job cancels it once it is loaded
    return bool(outstanding) and all(
        isinstance(c, AwaitInput | AwaitConfirmation) and c.command_id not in answered
        for c in outstanding
    )
