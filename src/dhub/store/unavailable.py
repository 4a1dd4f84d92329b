"""Which failures mean "the database is not taking connections right now" (refused, at its
``max_connections``, starting up or shutting down, or every connection of this process's pool
busy), as opposed to a failing statement. The API answers those with 503 and Retry-After
instead of a 500 with a traceback: the condition passes, and the request may be sent again."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import psycopg_pool
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

# SQLSTATEs of a connection that could not be made or was cut: connection_exception (08...),
# too_many_connections, admin_shutdown, crash_shutdown, cannot_connect_now
_CONNECTION_STATES = frozenset(
    {"08000", "08001", "08003", "08004", "08006", "53300", "57P01", "57P02", "57P03"}
)


# What a database failure is raised as: the API handles these by class (Starlette re-raises
# what reaches its catch-all handler after answering, and the server logs a traceback again).
DATABASE_ERRORS: tuple[type[Exception], ...] = (
    DBAPIError, PoolTimeout, psycopg.Error, psycopg_pool.PoolTimeout,
)  # fmt: skip


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from (``raise ... from``, SQLAlchemy's ``orig``); not
    the errors it was merely raised while handling, which may be unrelated."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        orig = e.orig if isinstance(e, DBAPIError) else None
        todo += [e.__cause__, orig if isinstance(orig, BaseException) else None]


def unavailable(exc: BaseException) -> str | None:
    """Why the database could not be used, in one line, when ``exc`` (or what caused it) is
    such a failure; None for any other error."""
    for e in _causes(exc):
        if isinstance(e, PoolTimeout | psycopg_pool.PoolTimeout):
            return "every connection of this process's database pool is busy"
        if isinstance(e, psycopg.OperationalError):
            state = e.sqlstate
            if state in _CONNECTION_STATES or (state is None and "connection" in str(e)):
                return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None
