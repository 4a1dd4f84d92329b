"""dhub as an MCP client (issue 20): live connections to MCP servers, their tool lists, calls.

``McpClients`` is one process's pool. A connection is opened on first use and kept while it
is used (closed after ``idle_seconds`` without a call): a tool call then costs one request on
an open session, not a process start or a handshake. Connections are keyed by the server's
id and version, the user the calls are for (a stdio server is a process of that user's, as a
warm function interpreter is: nothing one user's calls leave in it reaches another's) and a
digest of the revealed secrets (a rotated secret opens a new connection).

Tool lists are cached per server version for ``list_seconds`` and refreshed after; a list
that cannot be refreshed is served stale rather than not at all. Every failure (the server
unreachable, crashed, slow, answering an error) is a ``McpFailure`` whose message the model
reads as the tool's error: nothing here raises past the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types
import orjson
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from dhub.domain.resources import McpServerSpec
from dhub.sandbox.network import reaped
from dhub.sandbox.programs import ProgramError, ProgramSpec, Started, start_program
from dhub.sandbox.runner import SandboxRunner

log = logging.getLogger("dhub.mcp")

OPEN_SECONDS = 60.0  # to start a server (its environment may be built first) and shake hands
STOP_SECONDS = 5.0
Transport = AbstractAsyncContextManager[Any]


class McpFailure(Exception):
    """An MCP server could not answer; the message says which and why, for the model too."""


@dataclass(frozen=True)
class Target:
    """One MCP server as a user's calls reach it: its document with secrets revealed."""

    server_id: str
    version: int
    name: str
    spec: McpServerSpec
    user_id: str
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int, str, str]:
        secrets = orjson.dumps([sorted(self.headers.items()), sorted(self.env.items())])
        return self.server_id, self.version, self.user_id, hashlib.sha256(secrets).hexdigest()


class McpClients:
    def __init__(
        self,
        sandbox: SandboxRunner | None,
        idle_seconds: float = 300.0,
        list_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self.sandbox = sandbox
        self.allowed_hosts = tuple(allowed_hosts)
        self.idle_seconds = idle_seconds
        self.list_seconds = list_seconds
        self.clock = clock
        self._open: dict[tuple[str, int, str, str], _Connection] = {}
        self._opening: dict[tuple[str, int, str, str], asyncio.Lock] = {}
        self._lists: dict[tuple[str, int], tuple[float, list[mcp_types.Tool]]] = {}
        self._reaper: asyncio.Task[None] | None = None

    # -- tools ------------------------------------------------------------------------------

    async def tools(self, target: Target, refresh: bool = False) -> list[mcp_types.Tool]:
        """The tools the server lists (every page), from the cache while it is fresh."""
        cached = self._lists.get((target.server_id, target.version))
        if cached is not None and not refresh and cached[0] > self.clock():
            return cached[1]
        try:
            found = await self._list(target)
        except McpFailure:
            if cached is not None and not refresh:
                return cached[1]  # stale beats nothing: calls say what is wrong, if anything
            raise
        self._lists[(target.server_id, target.version)] = (self.clock() + self.list_seconds, found)
        return found

    async def _list(self, target: Target) -> list[mcp_types.Tool]:
        async def page(client: Client) -> list[mcp_types.Tool]:
            tools: list[mcp_types.Tool] = []
            cursor: str | None = None
            for _ in range(100):  # a server that pages forever gets a hundred pages
                result = await client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += result.tools
                cursor = result.next_cursor
                if not cursor:
                    break
            return tools

        tools: list[mcp_types.Tool] = await self._use(target, page, "list its tools")
        return tools

    async def call(
        self, target: Target, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        timeout = float(target.spec.timeout)

        async def call(client: Client) -> mcp_types.CallToolResult:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)

        result: mcp_types.CallToolResult = await self._use(
            target, call, f"call '{tool}'", timeout, again=False
        )
        return result

    # -- connections ------------------------------------------------------------------------

    async def _use(
        self,
        target: Target,
        use: Callable[[Client], Any],
        doing: str,
        seconds: float = 60.0,
        again: bool = True,
    ) -> Any:
        """``use`` on an open connection (opened as needed). ``again``: once more on a new
        connection when the one used breaks (safe for lists; a call may have had effects)."""
        for attempt in (0, 1) if again else (1,):
            connection = await self._connection(target)
            client = connection.client
            if client is None:
                raise McpFailure(_named(target, f"could not be reached: {connection.why}"))
            connection.last_used = self.clock()
            connection.sent += 1
            try:
                async with asyncio.timeout(seconds + 5):
                    return await use(client)
            except MCPError as exc:
                if exc.code != mcp_types.CONNECTION_CLOSED:
                    raise McpFailure(_named(target, f"answered: {exc.message}")) from exc
                await self._drop(target.key, connection)
                if attempt == 1 or not connection.broken_before(exc):
                    raise McpFailure(_named(target, f"stopped ({connection.why})")) from exc
            except TimeoutError as exc:
                raise McpFailure(_named(target, f"did not {doing} within {seconds:g} s")) from exc
            except Exception as exc:
                await self._drop(target.key, connection)
                if attempt == 1:
                    why = connection.why if connection.ended else _reason(exc)
                    raise McpFailure(_named(target, f"could not {doing}: {why}")) from exc
        raise AssertionError("unreachable")

    async def _connection(self, target: Target) -> _Connection:
        key = target.key
        found = self._open.get(key)
        if found is not None and found.alive:
            return found
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._open.get(key)
            if found is not None and found.alive:
                return found
            if found is not None:
                await self._drop(key, found)
            connection = _Connection(lambda c: self._transport(target, c), self.clock())
            await connection.open()
            if connection.alive:
                self._open[key] = connection
                self._reap_later()
            return connection

    def _transport(self, target: Target, connection: _Connection) -> Transport:
        spec = target.spec
        if spec.transport == "streamable_http":
            url, headers = spec.url or "", dict(target.headers)
            return _http(url, headers, float(spec.timeout), self.allowed_hosts)
        if self.sandbox is None:
            raise McpFailure("stdio MCP servers need the sandbox, which this process has not")
        program = ProgramSpec(
            spec.command, tuple(spec.args), dict(target.env), spec.source,
            tuple(spec.dependencies), spec.network,
        )  # fmt: skip
        return _stdio(self.sandbox, program, target.user_id, connection.ended_with)

    async def _drop(self, key: tuple[str, int, str, str], connection: _Connection) -> None:
        if self._open.get(key) is connection:
            del self._open[key]
        await connection.close()

    def _reap_later(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())

    async def _reap(self) -> None:
        """Close connections left unused for ``idle_seconds``, until none is open."""
        while self._open:
            await asyncio.sleep(min(self.idle_seconds, 30.0))
            now = self.clock()
            for key, connection in list(self._open.items()):
                if not connection.alive or now - connection.last_used >= self.idle_seconds:
                    await self._drop(key, connection)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for key, connection in list(self._open.items()):
            await self._drop(key, connection)


class _Connection:
    """One MCP session, owned by a task of its own: the SDK's transports are context managers
    that must be left by the task that entered them, while any task may send requests."""

    def __init__(self, transport: Callable[[_Connection], Transport], now: float) -> None:
        self._transport = transport
        self._broken_at = 0  # how many requests had been sent when the server went away
        self.sent = 0
        self.client: Client | None = None
        self.why = "the connection closed"
        self.ended = False
        self.last_used = now
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return (
            self.client is not None
            and not self._broken_at
            and self._task is not None
            and not self._task.done()
        )

    def ended_with(self, why: str) -> None:
        """The transport saw the server go away (a stdio program ended)."""
        self.why = why
        self._broken_at = self._broken_at or self.sent + 1

    def broken_before(self, exc: BaseException) -> bool:
        """Whether the server was gone before the request that failed was sent (then
        nothing of it reached the server, and it may be sent again elsewhere)."""
        return 0 < self._broken_at <= self.sent

    async def open(self) -> None:
        self._task = asyncio.ensure_future(self._own())
        try:
            async with asyncio.timeout(OPEN_SECONDS):
                await self._ready.wait()
        except TimeoutError:
            self.why = f"it did not start and answer within {OPEN_SECONDS:g} s"
            await self.close()

    async def _own(self) -> None:
        try:
            async with Client(self._transport(self), cache=None) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except McpFailure as exc:
            self.why = str(exc)
        except ProgramError as exc:
            self.why = str(exc)
        except Exception as exc:  # the transport's and the handshake's failures, all of them
            self.why = _reason(exc)
            log.info("MCP connection ended: %s", self.why)
        finally:
            self.client = None
            self.ended = True
            self._ready.set()

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is None:
            return
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await asyncio.shield(task)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def refused_address(url: str, allowed: Sequence[str]) -> str | None:
    """Why dhub will not connect to ``url``, if it will not: a user's MCP server must not
    make this server reach its own networks (its database, a cloud's metadata service, the
    admin API on loopback) unless the operator allows that host (DHUB_MCP_ALLOWED_HOSTS).
    Checked as each connection opens; a name that resolves elsewhere later (DNS rebinding)
    is checked again at the next connection, not between the two."""
    host = (urlsplit(url).hostname or "").lower()
    if "*" in allowed or host in {a.lower() for a in allowed}:
        return None
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None)
        except OSError as exc:
            return f"its host '{host}' could not be resolved ({exc})"
        addresses = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
    networks = [_network(a) for a in allowed]
    for address in addresses:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.is_global or any(n is not None and address in n for n in networks):
            continue
        return (
            f"its url's host '{host}' is {address}, an address of this server's own networks: "
            "dhub connects there only if its operator allows that host (DHUB_MCP_ALLOWED_HOSTS)"
        )
    return None


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None  # a host name: matched by name above


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an exception (group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.HTTPError | OSError):
        return f"{type(exc).__name__}: {exc}"
    return str(exc) or type(exc).__name__


def _named(target: Target, what: str) -> str:
    return f"The MCP server '{target.name}' ({target.server_id}) {what}"


@asynccontextmanager
async def _http(
    url: str, headers: dict[str, str], seconds: float, allowed: Sequence[str]
) -> AsyncIterator[Any]:
    refused = await refused_address(url, allowed)
    if refused is not None:
        raise McpFailure(refused)
    limits = httpx2.Timeout(seconds, connect=10.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=limits, follow_redirects=False) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@asynccontextmanager
async def _stdio(
    runner: SandboxRunner, program: ProgramSpec, owner: str, ended: Callable[[str], None]
) -> AsyncIterator[Any]:
    """The SDK's stdio transport, over a program started in the sandbox; ``ended`` hears why
    the program went away."""
    started = await start_program(runner, program, owner)
    reader_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_from_program, started, reader_in, ended)
            tasks.start_soon(_to_program, started, writer_out)
            try:
                yield read_stream, write_stream
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await started.stop()
            for stream in (read_stream, write_stream, reader_in, writer_out):
                await stream.aclose()


async def _from_program(started: Started, out: Any, ended: Callable[[str], None]) -> None:
    stdout = started.proc.stdout
    assert stdout is not None
    async with out:
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line over the limit: the server's answer is too large
                ended("its answer was larger than the sandbox's output limit")
                return
            if not line:
                await reaped(started.proc, 1.0)
                words = started.last_words()
                code = started.proc.returncode
                ended(f"its process ended with code {code}{': ' + words if words else ''}")
                return
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError as exc:
                await out.send(exc)
                continue
            await out.send(SessionMessage(message))


async def _to_program(started: Started, incoming: Any) -> None:
    stdin = started.proc.stdin
    assert stdin is not None
    async with incoming:
        async for message in incoming:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            stdin.write(data.encode() + b"\n")
            try:
                await stdin.drain()
            except (ConnectionError, BrokenPipeError):
                return
