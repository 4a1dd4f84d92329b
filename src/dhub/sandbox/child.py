"""The program that runs inside the sandbox: a supervisor, and the function's process it starts
(DESIGN.md 5, docs/sandbox.md "Threat model").

It is started as a file (``python -I child.py``) inside bubblewrap, never imported by the
server, and uses the standard library only. Two processes, one program (the function's half
is child_function.py, beside this file and loaded from there, as are the others it names):

- the **supervisor** (the sandbox's PID 1) talks to the server and never runs user code. It
  reads the setup, drops to the sandbox's user, makes itself non-dumpable (its memory and
  descriptors, the server's pipes among them, are then out of reach of the same user's
  processes), forks the function's process and relays each call to it;
- the **function's process** closes every descriptor but stdout/stderr (both go to the
  server's captured, bounded stderr), sets its limits, loads the source once and serves calls.
  It receives calls on a socket it cannot send on. Each call comes with its own result pipe;
  it writes one result there and closes it.

For each call the supervisor reads that call's pipe until it closes. It kills every other
process in the sandbox as soon as the first result arrives (nothing a call started outlives
it), answers ``invalid_output`` when the pipe carried more than one result (the function
wrote a result of its own), and checks what it can see itself: that the function's process is
alive, runs no more threads than after loading, and that no other process was left; then it
empties ``/tmp``, ``/work`` and ``/dev/shm``. Only then does it answer the server, with
``reusable`` from those checks, never from anything the function says.

A tool with ``require_browser`` has one more process: Playwright's driver, which the function's
process starts before it loads the source (browser.py). The supervisor waits for that moment,
before any of the tool's code has run, and keeps the processes it then sees between calls (and
the worker only while they all live); everything started later is ended after each call.

A function may call its agent's knowledge during a call (dhub_knowledge.py): each call also
gets an answer pipe, and the requests it writes on its result pipe before its result are
checked and relayed by the supervisor (child_host.py), the only one that talks to the server.

Protocol with the server, one JSON document per line: stdin line 1, the setup ``{"source",
"entry", "uid", "limits", "own_pid_namespace", "scratch", "browser"}``, answered by ``{"seq": 0,
"kind": "ready"}`` or the loading error; every further stdin line a call ``{"seq", "inputs",
"cpu"}``, answered by ``{"seq", "kind", "value" | "type", "message", "traceback", "reusable"}``.
During a call, knowledge requests ``{"seq", "kind": "host", "id", "name", "arguments"}`` on
stdout, each answered on stdin by ``{"seq", "kind": "host", "id", "ok", "value" | "message"}``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dhub.sandbox.child_host import HostRelay

KINDS = ("ok", "exception", "memory", "invalid_output")
ALONE = False  # in a PID namespace of its own: every other process there is the sandbox's
# Results are stored in the run and shown in its events: as deep as input may be (the API
# accepts documents nested 64 levels, domain/bounds.py), so everything stored renders.
MAX_DEPTH = 64
_GRACE_MS = 20  # a result is in: how long its pipe may stay open before the rest is ended
_HOLD_MS = 1000  # ... and then, how long before the function's own process is taken to hold it
# Files beside this one, loaded by main: the function's process (child_function.py), the
# knowledge relay (child_host.py), the function's helper (dhub_knowledge.py), and what the
# supervisor reads of its processes and files (child_procs.py).
_FUNCTION: Any = None
_PROCS: Any = None
_HOST: Any = None
_KNOWLEDGE: Any = None


# -- the supervisor ------------------------------------------------------------------------


def main() -> None:
    global _FUNCTION, _HOST, _KNOWLEDGE, _PROCS
    _FUNCTION, _HOST = _sibling("child_function"), _sibling("child_host")
    _KNOWLEDGE = _sibling("dhub_knowledge")  # for the function: `from dhub_knowledge import call`
    _PROCS = _sibling("child_procs")
    _FUNCTION.preload()  # before the setup: a spare waits with it loaded
    server = _Lines(0)
    setup = json.loads(server.readline())
    global ALONE
    ALONE = bool(setup.get("own_pid_namespace"))
    # The namespace's init ignores signals it has no handler for (bubblewrap's SIGKILL when
    # the server goes among them), so the supervisor ends when its stdin does: the server
    # closes it to stop the worker, and the kernel closes it when the server dies. Every
    # other process of the namespace ends with it.
    if not ALONE:
        _FUNCTION.die_with_parent()
        # What the call's processes leave behind as orphans comes back to this process, to be
        # found among its descendants and ended (in a PID namespace, its init is this process).
        _FUNCTION.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    _drop_privileges(setup.get("uid"))
    _FUNCTION.prctl(4, 0)  # PR_SET_DUMPABLE 0: the same user cannot read our memory or descriptors
    limits = setup.get("limits") or {}
    scratch = [str(path) for path in setup.get("scratch") or ()] if ALONE else []
    function = Function(setup, limits, scratch, server)
    ready = function.start()
    _answer({**ready, "seq": 0})
    if ready.get("kind") != "ready":
        return
    while True:
        request = json.loads(server.readline())
        if request.get("kind") == "host":  # the answer to a call that ended without it
            continue
        seq = request.get("seq")
        answer = function.call(seq, request.get("inputs") or {}, float(request.get("cpu") or 0))
        _answer({**answer, "seq": seq})


class Function:
    """The function's process, as the supervisor sees and checks it."""

    def __init__(
        self, setup: dict[str, Any], limits: dict[str, Any], scratch: list[str], server: _Lines
    ) -> None:
        self.setup = setup
        self.server = server
        self.limits = limits
        self.limit = int(limits.get("output") or 1 << 20)
        self.scratch = scratch
        self.pid = 0
        self.threads = 1
        self.status: int | None = None  # its wait status once it ended
        self.control: socket.socket | None = None
        self.watch: int | None = None  # a descriptor readable once it ended
        self.spoiled = False  # it did what no call of an honest function does
        # Processes started before the source loaded (a browser tool's driver), kept between
        # calls: pid -> its start time, so a pid used again later is not taken for one.
        self.kept: dict[int, bytes] = {}

    def start(self) -> dict[str, Any]:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs.shutdown(socket.SHUT_WR)  # calls reach it; nothing goes back this way
        result_r, result_w = os.pipe()
        # Closed by the function's process once what it starts before the source is running.
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the function's process
            try:
                mine.close()
                os.close(result_r)
                os.close(ready_r)
                _FUNCTION.run(self.setup, theirs.detach(), result_w, ready_w, ALONE, _KNOWLEDGE)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(70)
        theirs.close()
        os.close(result_w)
        os.close(ready_w)
        mine.setblocking(False)  # a function that stops reading calls fails, not this process
        self.pid, self.control = pid, mine
        self.watch = _pidfd(pid)
        while os.read(ready_r, 1):  # to its end: closed, or the function's process died
            pass
        os.close(ready_r)
        if self.setup.get("browser"):
            self.kept = {p: _PROCS.started(p) for p in _PROCS.processes({os.getpid(), pid}, ALONE)}
        answer = self._collect(result_r, None, {"ready", *KINDS} - {"ok"})
        # What loading started stays: a library's thread pool, a helper process (which the
        # first call's clean-up ends, and with it this worker's reuse).
        self.threads = _PROCS.threads(pid) or 1
        _PROCS.wipe(self.scratch)
        return answer

    def call(self, seq: Any, inputs: dict[str, Any], cpu: float) -> dict[str, Any]:
        assert self.control is not None
        if self.status is not None:
            return {"kind": "sandbox", "message": "the function's process has ended"}
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        answer_r, answer_w = os.pipe()  # knowledge answers (child_host.py)
        try:
            socket.send_fds(self.control, [b"call"], [request_r, result_w, answer_r])
        except OSError:
            for fd in (request_r, request_w, result_r, result_w, answer_r, answer_w):
                os.close(fd)
            return self._ended()
        for fd in (request_r, result_w, answer_r):
            os.close(fd)
        os.set_blocking(answer_w, False)
        payload = json.dumps({"inputs": inputs, "cpu": cpu}).encode()
        relay = _HOST.HostRelay(seq, answer_w, self.limits)
        try:
            answer = self._collect(result_r, (request_w, payload), set(KINDS), relay)
        finally:
            os.close(answer_w)
        return {**answer, "reusable": self._clean_up() and answer["kind"] != "memory"}

    def _collect(
        self, result_r: int, request: tuple[int, bytes] | None, kinds: set[str],
        relay: HostRelay | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Send the request, then read the call's result pipe until every writer closed it:
        one result, or why there is none (knowledge requests on the way relayed)."""
        data, over, ended, held = _Exchange(self, result_r, request, relay).run()
        if relay is not None and relay.broken:
            self.spoiled = True
            message = (
                "the function sent a knowledge request before reading the answer to its last "
                "one: use dhub_knowledge.call, from the function's own process"
            )
            return {"kind": "invalid_output", "message": message}
        if over:
            return {"kind": "invalid_output", "message": f"the result is over {self.limit} bytes"}
        if held:  # it reopened or copied the pipe: no telling which result is whose
            self.spoiled = True
            message = "the function kept its result channel open after a result"
            return {"kind": "invalid_output", "message": message}
        lines = [line for line in data.split(b"\n") if line.strip()]
        if len(lines) > 1:
            return {
                "kind": "invalid_output",
                "message": f"{len(lines)} results for one call: the function wrote results "
                "of its own on its result channel",
            }
        if not lines and (ended or self._ends_soon()):
            return self._ended()
        if not lines:  # it closed the pipe itself, and may well run on
            self.spoiled = True
            message = "the function's process closed its result channel without a result"
            return {"kind": "invalid_output", "message": message}
        return _checked(lines[0], kinds, self.limit)

    def _ends_soon(self) -> bool:
        """Whether the function's process is ending: its result pipe closes as it exits, a
        moment before it can be waited for."""
        for _ in range(100):
            if self._reap_function():
                return True
            time.sleep(0.005)
        return False

    def _reap_function(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is not None

    def _ended(self) -> dict[str, Any]:
        """The function's process died (or closed its channel, and is ended now): say how."""
        if not self._reap_function():
            os.kill(self.pid, signal.SIGKILL)
            _, self.status = os.waitpid(self.pid, 0)
        assert self.status is not None
        if os.WIFSIGNALED(self.status):
            number = os.WTERMSIG(self.status)
            if number == signal.SIGXCPU:
                return {"kind": "timeout", "message": "the CPU time limit was reached"}
            how = f"was killed by {signal.Signals(number).name if number < 32 else number}"
        else:
            how = f"exited with code {os.WEXITSTATUS(self.status)}"
        message = f"the function's process {how}"
        return {"kind": "exception", "type": "ProcessDied", "message": message}

    def _clean_up(self) -> bool:
        """End whatever else runs, empty the writable places; whether the function's process
        can serve another call, judged only from what this process sees."""
        left = _end_others(self)
        alive = not self._reap_function()
        threads = _PROCS.threads(self.pid) if alive else 0
        wiped = _PROCS.wipe(self.scratch)
        kept = len(self.living_kept()) == len(self.kept)
        return (
            alive and wiped and kept and not left and not self.spoiled
            and 0 < threads <= self.threads
        )  # fmt: skip

    def living_kept(self) -> set[int]:
        """The kept processes still there (the same processes, not their pids used again)."""
        return {pid for pid, started in self.kept.items() if _PROCS.started(pid) == started}


class _Exchange:
    """One call's traffic: the request written (without blocking on a large one), the result
    read up to the size limit, knowledge requests before it relayed; the other processes are
    ended when the function's process dies, or when a result is in but something still holds
    the pipe open."""

    def __init__(
        self, function: Function, result_r: int, request: tuple[int, bytes] | None,
        relay: HostRelay | None = None,
    ) -> None:  # fmt: skip
        self.function = function
        self.result_r = result_r
        self.request = request
        self.relay = relay
        self.poll = select.poll()
        self.roles: dict[int, str] = {}
        self.data = b""  # the result's lines
        self.pending = b""  # a line not ended yet
        self.over = False
        self.ended = False
        self.others_ended = False
        self.held = False  # the function's process kept the pipe open after a result
        self.sent = 0

    def run(self) -> tuple[bytes, bool, bool, bool]:
        poll = self.poll
        roles = self.roles
        roles.update({self.result_r: "result", self.function.server.fd: "server"})
        if self.request is not None:
            os.set_blocking(self.request[0], False)
            roles[self.request[0]] = "request"
        if self.function.watch is not None:
            roles[self.function.watch] = "exit"
        for fd, role in roles.items():
            poll.register(fd, select.POLLOUT if role == "request" else select.POLLIN)
        try:
            self._loop(poll, roles)
        finally:
            if self.request is not None:  # not all written: the function went meanwhile
                os.close(self.request[0])
            os.close(self.result_r)
        return self.data + self.pending, self.over, self.ended, self.held

    def _loop(self, poll: select.poll, roles: dict[int, str]) -> None:
        while True:
            result_in = b"\n" in self.data
            events = poll.poll(_HOLD_MS if self.others_ended else _GRACE_MS if result_in else None)
            if not events and self.others_ended:  # the function's process itself holds it
                self.held = True
                return
            if not events:  # a result is in and something else still holds the pipe open
                self._end_others()
            for fd, _ in events:
                role = roles[fd]
                if role == "server":
                    self.function.server.fill()  # ends this process when the server went
                    self._from_server()
                elif role == "answer":
                    assert self.relay is not None
                    if self.relay.write():
                        poll.unregister(fd)
                elif role == "request":
                    self._write(poll, fd)
                elif role == "exit":  # it died: nothing it started may hold the pipe
                    poll.unregister(fd)
                    self.ended = True
                    self._end_others()
                elif not self._read():
                    return

    def _end_others(self) -> None:
        self.others_ended = True
        _end_others(self.function)

    def _write(self, poll: select.poll, fd: int) -> None:
        assert self.request is not None
        payload = self.request[1]
        try:
            self.sent += os.write(fd, payload[self.sent : self.sent + 65536])
        except BlockingIOError:
            return
        except OSError:  # it closed its end: the result (or its absence) says why
            self.sent = len(payload)
        if self.sent >= len(payload):
            poll.unregister(fd)
            os.close(fd)
            self.request = None

    def _read(self) -> bool:
        """Read what came; False at the end (every writer closed, too much came, or the
        function broke the knowledge protocol)."""
        chunk = os.read(self.result_r, 65536)
        if not chunk:
            return False
        start, self.pending = max(0, len(self.pending) - 1), self.pending + chunk
        while (cut := self.pending.find(b"\n", start)) >= 0:
            line, self.pending, start = self.pending[:cut], self.pending[cut + 1 :], 0
            relay = self.relay
            if relay is not None and not self.data and line.startswith(_HOST.PREFIX):
                relay.request(line, _answer)
                if relay.broken:
                    return False
                self._answering()
            else:
                self.data += line + b"\n"
        if len(self.data) + len(self.pending) > self.function.limit + 4096:
            self.over = True
            self._end_others()
            return False
        return True

    def _answering(self) -> None:
        """Write the relay's answer on the answer pipe as the function reads it."""
        relay = self.relay
        if relay is not None and relay.out and relay.answer_w not in self.roles:
            self.roles[relay.answer_w] = "answer"
        if relay is not None and relay.out:
            self.poll.register(relay.answer_w, select.POLLOUT)

    def _from_server(self) -> None:
        """Knowledge answers the server sent: to the relay."""
        server = self.function.server
        while (cut := server.buffer.find(b"\n")) >= 0:
            try:
                reply = json.loads(server.buffer[:cut])
            except (ValueError, RecursionError):
                reply = None
            if not isinstance(reply, dict) or reply.get("kind") != "host":
                return  # not the server's answer to a request (none comes during a call)
            server.buffer = server.buffer[cut + 1 :]
            if self.relay is not None:
                self.relay.answer(reply)
                self._answering()


def _checked(line: bytes, kinds: set[str], limit: int) -> dict[str, Any]:
    """The function's result, keeping only what a result may say."""
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        reply = None
    if not isinstance(reply, dict) or reply.get("kind") not in kinds:
        return {"kind": "invalid_output", "message": "the function sent a malformed result"}
    kind = reply["kind"]
    if kind == "ready":
        return {"kind": "ready"}
    if kind == "ok":
        if _deeper_than(reply.get("value"), MAX_DEPTH):
            message = f"the result is nested deeper than {MAX_DEPTH} levels"
            return {"kind": "invalid_output", "message": message}
        if len(json.dumps(reply.get("value"))) > limit:
            return {"kind": "invalid_output", "message": f"the result is over {limit} bytes"}
        return {"kind": "ok", "value": reply.get("value")}
    out = {"kind": kind}
    for field in ("type", "message", "traceback"):
        if isinstance(reply.get(field), str):
            out[field] = reply[field][:20_000]
    return out


def _end_others(function: Function) -> bool:
    """Kill every process but this one and the function's, until none is left; whether there
    were any. Under bubblewrap that is the whole PID namespace; without it, this process
    group."""
    keep = {os.getpid(), function.pid, *function.living_kept()}
    found = False
    for _ in range(200):
        _reap(function)
        others = _PROCS.processes(keep, ALONE)
        if not others:
            break
        found = True
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)
    return found


def _reap(function: Function) -> None:
    """Collect ended children: orphans come to the supervisor as the namespace's init."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        if pid == function.pid:
            function.status = status


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _answer(answer: dict[str, Any]) -> None:
    data = (json.dumps(answer) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


class _Lines:
    """Lines from a descriptor, read with our own buffer (nothing of it reaches a fork)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def readline(self) -> bytes:
        while b"\n" not in self.buffer:
            self.fill()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line + b"\n"

    def fill(self) -> None:
        """Read what is there; at the end of the input the server is gone: so is this."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            os._exit(0)
        self.buffer += chunk


def _sibling(name: str) -> Any:
    """A module of the file ``name``.py beside this one (in the sandbox, /sandbox), loaded
    without putting this directory on ``sys.path`` (unsafe mode: the server's package)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _drop_privileges(uid: int | None) -> None:
    """Started as root (a root server): become an unprivileged user of our own, so process
    limits count this sandbox alone and no capability is left."""
    if uid is None or os.getuid() != 0:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` lists and objects (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


if __name__ == "__main__":
    main()
