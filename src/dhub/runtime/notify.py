"""PostgreSQL LISTEN for one process (distributed mode): one connection, every channel.

API processes listen for saved steps (their event streams wake at once, for runs executing
in workers); workers listen for letters in runs' inboxes (an answer for a run they hold
live). A notification is a hint, never the data: the database is read after it. If the
connection drops, the listener reconnects and tells every handler ``None`` (look at
everything: notifications may have been missed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

import psycopg
from psycopg import sql

from dhub.runtime.queue import conninfo

log = logging.getLogger(__name__)

Handler = Callable[[str | None], None]  # a run id, or None: anything may have changed


class Listener:
    def __init__(self, database_url: str, handlers: Mapping[str, Handler]) -> None:
        self._conninfo = conninfo(database_url)
        self._handlers = dict(handlers)
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()  # listening (tests wait for it)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        first = True
        while True:
            try:
                await self._listen(missed=not first)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped connection, a restarting database
                log.warning("LISTEN connection lost (%r); reconnecting", exc)
            first = False
            self.ready.clear()
            await asyncio.sleep(1.0)

    async def _listen(self, missed: bool) -> None:
        conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        async with conn:
            for channel in self._handlers:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.ready.set()
            if missed:
                for handler in self._handlers.values():
                    handler(None)
            async for note in conn.notifies():
                found = self._handlers.get(note.channel)
                if found is not None:
                    found(note.payload or None)
