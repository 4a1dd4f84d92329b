"""Admission: how many runs execute at once in a process, and who goes next (issue 23).

A process that starts every run it is given at once (a burst of a thousand) shares its CPU
among all of them, and finishes none for a long time. Here at most ``limit`` runs execute at
once; the others wait their turn: in the order they came within one user, and in turns
between users (round robin), so one user's burst does not hold the others' runs back. A run
leaves its place when it ends, parks (waits for a person or a distant timer, out of memory)
or stops. Pure asyncio, no I/O.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque

from dhub.observability import metrics

Ticket = asyncio.Future[None]  # a place in the queue: done when the run may go


class Admission:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the admission limit must be at least 1, not {limit}")
        self.limit = limit
        self.active = 0  # runs admitted and not yet done
        self._queues: dict[str, deque[Ticket]] = {}  # per user, in arrival order
        self._turns: deque[str] = deque()  # users with runs waiting, whose turn is next

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def ticket(self, who: str) -> Ticket | None:
        """Admit a run of ``who`` now (None), or give it its place in the queue."""
        if self.active < self.limit and not self._turns:
            self.active += 1
            return None
        ticket: Ticket = asyncio.get_running_loop().create_future()
        queue = self._queues.get(who)
        if queue is None:
            queue = self._queues[who] = deque()
            self._turns.append(who)
        queue.append(ticket)
        metrics.runs_admission(self.active, self.waiting)
        return ticket

    async def wait(self, ticket: Ticket | None) -> None:
        """Until the run may go. Cancelled while it waits, it gives its place up (and, if it
        was let in meanwhile, lets the next one in)."""
        if ticket is None:
            return
        try:
            await ticket
        except asyncio.CancelledError:
            if ticket.done() and not ticket.cancelled():
                self.release()  # let in as it was cancelled: its place goes to the next
            else:
                self._drop(ticket)
            raise

    def hurry(self, ticket: Ticket) -> None:
        """Let a waiting run in now, over the limit: one being cancelled (its cancellation is
        one cheap step, and must not wait behind a burst)."""
        if ticket.done():
            return
        self._drop(ticket)
        self.active += 1
        ticket.set_result(None)

    def _drop(self, ticket: Ticket) -> None:
        for who, queue in self._queues.items():
            if ticket in queue:
                queue.remove(ticket)
                if not queue:
                    del self._queues[who]
                    self._turns.remove(who)
                break
        metrics.runs_admission(self.active, self.waiting)

    def release(self) -> None:
        """A run admitted is done (ended, parked or stopped): the next in turn goes."""
        self.active -= 1
        self._grant()

    def _grant(self) -> None:
        while self._turns and self.active < self.limit:
            who = self._turns.popleft()
            queue = self._queues[who]
            ticket = queue.popleft()
            if queue:
                self._turns.append(who)  # the back of the line: one run per user per turn
            else:
                del self._queues[who]
            if ticket.cancelled():
                continue
            self.active += 1
            ticket.set_result(None)
        metrics.runs_admission(self.active, self.waiting)


def default_limit(cores: int | None = None, memory_bytes: int | None = None) -> int:
    """Runs at once when ``DHUB_MAX_ACTIVE_RUNS`` is not set: 32 per core (most of a run's
    time is spent waiting for models, tools and people), at most one per 16 MiB of memory
    (a run in memory, with its state and transcript, is well under that), at least 8."""
    cores = cores or os.cpu_count() or 1
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            memory_bytes = 4 << 30
    return max(8, min(32 * cores, memory_bytes // (16 << 20)))
