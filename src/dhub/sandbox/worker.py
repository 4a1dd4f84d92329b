"""One sandboxed interpreter serving one function: start it, call it, end it.

A worker is started with its function's source (child.py loads it once) and then serves calls,
one at a time, over its stdin/stdout. Those pipes lead to the sandbox's supervisor, never to
the function's own process, so every answer read here is the supervisor's. The server side
enforces what the sandbox cannot: the wall time of each call, the size of each answer, and the
end of the whole process group when a call times out, is cancelled, or the supervisor found
the worker in a state nobody should reuse.

During a call the function may call its agent's knowledge (docs/sandbox.md "Knowledge from
code"): the supervisor sends each request as a line of the call's ``seq``, and the call's
``host`` performs it while the call's wall time runs on; its answer (within the size limit)
goes back on the supervisor's stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from dhub.sandbox import browser
from dhub.sandbox.errors import HostRefused, SandboxUnavailable
from dhub.sandbox.network import Launched, close_pipes, reaped

Launch = Callable[..., Awaitable[Launched]]  # subprocess options -> a started sandbox
# Performs a function's knowledge call (name, arguments) for the call's run and answers it
# (JSON); raises HostRefused with the message the function is to get.
Host = Callable[[str, dict[str, Any]], Awaitable[Any]]
log = logging.getLogger(__name__)
ResultKind = Literal[
    "ok",
    "timeout",
    "memory",
    "exception",
    "invalid_input",
    "invalid_output",
    "dependency",
    "sandbox",
]
# After these the worker is ended instead of serving another call.
_SPENT = frozenset({"timeout", "memory", "sandbox"})
_STDERR_KEPT = 10_000
_STOP_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class FunctionResult:
    kind: ResultKind
    value: Any = None
    error_type: str | None = None
    message: str = ""
    traceback: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


@dataclass(frozen=True)
class Limits:
    """Per-call and per-worker limits. ``memory_bytes`` is split in two: ``scratch`` for the
    files of /tmp, /work and /dev/shm (tmpfs, which is memory no address space counts; a
    quarter unless ``scratch_bytes`` says otherwise), the rest the function's address space
    (RLIMIT_AS, which counts what a process maps, not only what it touches: give numeric
    libraries room). A browser tool's processes get that same memory as RLIMIT_DATA instead,
    under a far higher address-space cap, and ``browser_processes`` (browser.py)."""

    memory_bytes: int = 2 << 30
    scratch_bytes: int | None = None
    processes: int = 64
    browser_processes: int = browser.PROCESSES
    output_bytes: int = 1 << 20
    file_size_bytes: int = 64 << 20
    open_files: int = 256
    worker_cpu_seconds: int = 3600  # a warm worker's whole life; each call gets its timeout
    start_seconds: float = 30.0  # interpreter start and the source's own imports
    host_calls: int = 100  # knowledge calls per call of the function
    host_request_bytes: int = 64 << 10  # one knowledge request (its answer: output_bytes)

    @property
    def scratch(self) -> int:
        return self.memory_bytes // 4 if self.scratch_bytes is None else self.scratch_bytes

    @property
    def address_space(self) -> int:
        return max(self.memory_bytes - self.scratch, 1 << 20)

    def for_child(self, with_browser: bool = False) -> dict[str, int]:
        limits = {
            "memory": self.address_space,
            "output": self.output_bytes,
            "processes": self.processes,
            "file_size": self.file_size_bytes,
            "open_files": self.open_files,
            "cpu": self.worker_cpu_seconds,
            "host_calls": self.host_calls,
            "host_request": self.host_request_bytes,
        }
        if with_browser:
            limits["data"] = self.address_space
            limits["memory"] = max(browser.ADDRESS_SPACE, self.address_space)
            limits["processes"] = self.browser_processes
            limits["open_files"] = max(self.open_files, browser.OPEN_FILES)
        return limits


class Worker:
    def __init__(self, launched: Launched, limits: Limits) -> None:
        self._launched = launched
        self._proc = launched.proc
        self._limits = limits
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._drain = asyncio.create_task(self._read_stderr())
        self._usable = True
        self._reusable = True
        self._seq = 0

    @property
    def usable(self) -> bool:
        """Fit for another call: nothing went wrong and the process is still there."""
        return self._usable and self._proc.returncode is None

    def memory(self) -> int:
        """The memory this worker holds, in bytes, measured now: see ``resident``."""
        return resident(self._proc.pid)

    @classmethod
    async def start(
        cls, launch: Launch, setup: dict[str, Any], limits: Limits
    ) -> tuple[Worker | None, FunctionResult]:
        """A ready worker, or None and why it could not start (``sandbox`` when the sandbox
        itself failed, the source's own error otherwise)."""
        worker, failure = await cls.launch(launch, limits)
        if worker is None:
            return None, failure
        return await worker.begin(setup)

    @classmethod
    async def launch(cls, launch: Launch, limits: Limits) -> tuple[Worker | None, FunctionResult]:
        """A sandbox whose supervisor waits for its setup (``begin``): a spare (pool.py), or
        the first half of ``start``."""
        try:
            launched = await launch(
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
                limit=limits.output_bytes + 4096, env=_START_ENVIRONMENT,
            )  # fmt: skip
        except (OSError, SandboxUnavailable) as exc:
            return None, FunctionResult("sandbox", message=f"cannot start the sandbox: {exc}")
        return cls(launched, limits), FunctionResult("ok")

    async def begin(self, setup: dict[str, Any]) -> tuple[Worker | None, FunctionResult]:
        """Give the waiting supervisor its function: this worker, ready, or None and why not
        (the worker is stopped then)."""
        limits = self._limits
        try:
            answer = await self._exchange(
                {**setup, "limits": limits.for_child(bool(setup.get("browser")))},
                limits.start_seconds,
            )
        except BaseException:  # cancelled while starting (a shutdown): leave nothing open
            await asyncio.shield(self.stop())
            raise
        if answer.kind == "ok" and answer.value == "ready":
            return self, answer
        await self.stop()
        if (
            answer.kind == "exception"
            and answer.error_type == "ProcessDied"
            and not answer.traceback
        ):
            stderr = answer.stderr.strip()
            message = f"the sandbox did not start: {stderr or answer.message}"
            return None, FunctionResult("sandbox", message=message, stderr=answer.stderr)
        return None, answer

    async def call(
        self, inputs: dict[str, Any], seconds: float, host: Host | None = None
    ) -> FunctionResult:
        """One call, within ``seconds`` of wall time and as many of CPU time; ``host``
        performs its knowledge calls (none without)."""
        self._seq += 1
        request = {"seq": self._seq, "inputs": inputs, "cpu": seconds}
        try:
            result = await self._exchange(request, seconds, _Host(host, self._limits))
        except asyncio.CancelledError:
            await self.stop()  # an abandoned call must not run on, unowned
            raise
        if result.kind in _SPENT or result.error_type == "ProcessDied" or not self._reusable:
            await self.stop()
        return result

    async def _exchange(
        self, message: dict[str, Any], seconds: float, host: _Host | None = None
    ) -> FunctionResult:
        mark = self._stderr_size
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(self._answer(message.get("seq", 0), host), seconds)
        except TimeoutError:
            await self.stop()
            return FunctionResult(
                "timeout", message=f"no result within {seconds:g} s", stderr=self._err(mark)
            )
        except (ValueError, asyncio.LimitOverrunError):  # an answer over the size limit
            await self.stop()
            size = self._limits.output_bytes
            return FunctionResult(
                "invalid_output", message=f"the result is over {size} bytes", stderr=self._err(mark)
            )
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            return await self._died(mark)
        reply = json.loads(line)
        # The supervisor's judgement (child.py), from what it checked itself after the call.
        self._reusable = reply.get("reusable", message.get("seq") == 0) is True
        return _parse(reply, self._err(mark))

    async def _answer(self, seq: int, host: _Host | None) -> bytes:
        """The supervisor's answer to request ``seq`` (only it writes to this pipe; a line of
        another number would be a stale one), its knowledge requests on the way performed.
        b"" when the process ended."""
        proc = self._proc
        assert proc.stdout is not None and proc.stdin is not None
        while line := await proc.stdout.readline():
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if not isinstance(reply, dict) or reply.get("seq") != seq:
                continue
            if reply.get("kind") != "host":
                return line
            answer = await (host or _Host(None, self._limits)).perform(reply)
            proc.stdin.write(json.dumps({"kind": "host", "seq": seq, "id": reply.get("id"),
                                         **answer}).encode() + b"\n")  # fmt: skip
            await proc.stdin.drain()
        return b""

    async def _died(self, mark: int) -> FunctionResult:
        """The sandbox ended without answering (its supervisor died, or never started): say
        how."""
        # Bounded: something of the sandbox that outlived bubblewrap may hold its pipes.
        code = await reaped(self._proc, _STOP_SECONDS)
        await asyncio.wait({self._drain}, timeout=1)
        if code is None:
            await self.stop()
            code = self._proc.returncode if self._proc.returncode is not None else -9
        self._usable = False
        stderr = self._err(mark)
        died_of = _signal_of(code)
        if died_of == signal.SIGXCPU:
            return FunctionResult(
                "timeout", message="the CPU time limit was reached", stderr=stderr
            )
        how = f"was killed by {died_of.name}" if died_of else f"exited with code {code}"
        return FunctionResult(
            "exception", error_type="ProcessDied", message=f"the function's process {how}",
            stderr=stderr,
        )  # fmt: skip

    async def stop(self) -> None:
        """End the worker and everything it started: bubblewrap's process group, and the
        sandbox's supervisor, which ends when its input closes (the PID namespace of the
        sandbox goes with it). Every pipe to it is closed when this returns, however it ends:
        one left open outlives the event loop and breaks the next loop that closes."""
        self._usable = False
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # the sandbox's supervisor ends with its input
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            # Read what is left of the answers and of stderr: a process with unread output (an
            # answer over the limit) would otherwise never be reported finished.
            ending = asyncio.gather(
                self._proc.wait(), _discard(self._proc.stdout), asyncio.shield(self._drain),
                return_exceptions=True,
            )  # fmt: skip
            # Should something of the sandbox outlive bubblewrap, stop waiting for it.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ending, _STOP_SECONDS)
        finally:
            self._drain.cancel()
            close_pipes(self._proc)
            await self._launched.end()

    async def _read_stderr(self) -> None:
        """Keep the last bytes the function wrote to stderr, and never let the pipe fill."""
        stream = self._proc.stderr
        assert stream is not None
        while chunk := await stream.read(65536):
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while sum(map(len, self._stderr)) > _STDERR_KEPT * 2 and len(self._stderr) > 1:
                self._stderr.popleft()

    def _err(self, mark: int) -> str:
        """What was written to stderr since ``mark`` (at most the last 10 kB)."""
        new = self._stderr_size - mark
        data = b"".join(self._stderr)[-min(new, _STDERR_KEPT) :] if new > 0 else b""
        return data.decode(errors="replace")


class _Host:
    """One call's knowledge requests: counted, performed by ``host``, answers bounded."""

    def __init__(self, host: Host | None, limits: Limits) -> None:
        self.host = host
        self.limits = limits
        self.count = 0

    async def perform(self, request: dict[str, Any]) -> dict[str, Any]:
        """``{"ok": True, "value"}``, or ``{"ok": False, "message"}`` saying why not."""
        self.count += 1
        name, arguments = request.get("name"), request.get("arguments")
        if self.host is None:
            return _refused("this call of the function cannot call knowledge")
        if self.count > self.limits.host_calls:  # the supervisor refuses these already
            return _refused(f"more than {self.limits.host_calls} knowledge calls in one call")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return _refused("a malformed knowledge request")
        try:
            value = await self.host(name, arguments)
            size = len(json.dumps(value))
        except HostRefused as exc:
            return _refused(str(exc))
        except (TypeError, ValueError) as exc:
            log.exception("knowledge call %r of a function answered no JSON", name)
            return _refused(f"the answer of '{name}' is not JSON ({exc})")
        except Exception:
            log.exception("knowledge call %r of a function failed", name)
            return _refused(f"the call of '{name}' failed on the server (the error is logged)")
        if size > self.limits.output_bytes:
            return _refused(
                f"the answer of '{name}' is {size} bytes, over the limit of "
                f"{self.limits.output_bytes}: ask for less at once (a filter, fewer columns, "
                "a page of rows)"
            )
        return {"ok": True, "value": value}


def resident(root: int) -> int:
    """Anonymous resident memory (RssAnon: ``statm``'s resident less its shared pages) of
    process ``root`` and all its descendants, in bytes. Under bubblewrap the tree is bubblewrap,
    the sandbox's supervisor and the function's process; their pids in the sandbox's PID
    namespace do not matter, the server reads them as its own children's children. File pages
    (the interpreter, its libraries) are left out: every interpreter maps the same ones from the
    page cache, so one more interpreter does not add them. Pages a fork still shares with its
    parent count twice: the figure errs high, never low."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                fields = f.read().split()
            total += (int(fields[1]) - int(fields[2])) * _PAGE
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                    todo += [int(child) for child in f.read().split()]
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            continue
    return total


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _refused(message: str) -> dict[str, Any]:
    return {"ok": False, "message": message}


# The sandbox's own environment is set inside it (--clearenv); this is what bubblewrap itself
# runs with, so no secret of the server's reaches even the launcher.
_START_ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is None:
        return
    with contextlib.suppress(Exception):
        while await stream.read(1 << 16):
            pass


def _signal_of(code: int) -> signal.Signals | None:
    """The signal a process died of: a negative code when we started it directly, 128 + N
    when bubblewrap reports it."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def _parse(reply: dict[str, Any], stderr: str) -> FunctionResult:
    kind = reply.get("kind")
    if kind in ("ready", "ok"):
        return FunctionResult("ok", value=reply.get("value", "ready"), stderr=stderr)
    return FunctionResult(
        kind if kind in ("exception", "memory", "invalid_output", "timeout") else "sandbox",
        error_type=reply.get("type"),
        message=str(reply.get("message", "")),
        traceback=str(reply.get("traceback", "")),
        stderr=stderr,
    )
