"""Which errors count as "the database takes no connections" (503) and which do not (a
failing statement stays a 500, or whatever its own handler makes of it)."""

from __future__ import annotations

import socket

import psycopg
import psycopg.errors
import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from dhub.store.unavailable import unavailable


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_a_refused_connection_is_unavailable_also_wrapped_by_sqlalchemy() -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"postgresql://x@127.0.0.1:{closed_port()}/db", connect_timeout=2)
    why = unavailable(refused.value)
    assert why is not None and "connection" in why and "\n" not in why
    wrapped = OperationalError("SELECT 1", {}, refused.value)
    assert unavailable(wrapped) == why
    outer = RuntimeError("the request failed")  # raised while handling it: its cause
    outer.__cause__ = refused.value
    assert unavailable(outer) == why


def test_an_error_merely_raised_while_handling_one_is_not() -> None:
    """Only explicit causes count: a bug hit while recovering from a refused connection is
    still a bug (500), not a passing condition."""
    refused = psycopg.OperationalError("connection failed: Connection refused")
    bug = KeyError("run")
    bug.__context__ = refused
    assert unavailable(refused) is not None
    assert unavailable(bug) is None


def test_a_busy_pool_is_unavailable() -> None:
    assert unavailable(PoolTimeout("QueuePool limit of size 10 overflow 20 reached")) == (
        "every connection of this process's database pool is busy"
    )


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("connection"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.UniqueViolation("duplicate key"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        OperationalError("SELECT 1", {}, psycopg.errors.DeadlockDetected("deadlock")),
    ],
)
def test_a_failing_statement_is_not(exc: BaseException) -> None:
    assert unavailable(exc) is None


def test_too_many_connections_is_unavailable() -> None:
    exc = psycopg.errors.TooManyConnections("sorry, too many clients already")
    assert unavailable(exc) == "sorry, too many clients already"
