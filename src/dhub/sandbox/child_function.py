"""The function's process: the half of the sandbox's child program that runs user code
(child.py is the other, the supervisor, which loads this file from beside it and forks the
process that runs ``run``). Standard library only; the server never imports it.

The process keeps only stdin (``/dev/null``), stdout/stderr (both the server's captured,
bounded stderr), its receive-only call socket and the load's result pipe; sets its limits;
starts a browser tool's driver; loads the source once; then serves calls: each comes with a
pipe to read it from, one to write its one result on, and one to read knowledge answers from
(dhub_knowledge.py, which the user's code imports).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import linecache
import os
import resource
import signal
import socket
import sys
import traceback
import types
from typing import Any

SOURCE_NAME = "<function>"


def run(
    setup: dict[str, Any], control: int, result_w: int, ready_w: int, alone: bool, knowledge: Any
) -> None:
    """Keep only stdout/stderr, the control socket and the load's result pipe; set the limits;
    start a browser tool's driver; load the source; then serve calls until the supervisor
    goes."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # the user's prints (and any C library writes to fd 1) go to stderr
    _close_all_but({0, 1, 2, control, result_w, ready_w})
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - an empty stdin, not the supervisor's
    sys.stdout = sys.stderr
    prctl(4, 1)  # its own /proc entries readable again by itself (and only its user)
    if not alone:
        die_with_parent()
    limits = setup.get("limits") or {}
    _limit(limits)
    problem = _start_browser(setup.get("browser"))
    os.close(ready_w)  # none of the source has run: what runs now is ours (Function.start)
    entry, problem = (None, problem) if problem else _load(setup["source"], setup.get("entry"))
    _send(result_w, problem or {"kind": "ready"})
    if entry is None:
        os._exit(0)
    channel = socket.socket(fileno=control)
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(channel, 16, 3, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            os._exit(0)
        if len(fds) != 3:  # the supervisor went
            os._exit(0)
        request_r, result_w, answer_r = fds
        with open(request_r, "rb") as request_file:
            request = json.loads(request_file.read())
        _cpu_budget(float(request.get("cpu") or 0))
        knowledge.begin(result_w, answer_r, int(limits.get("host_request") or 64 << 10))
        result = _call(entry, request.get("inputs") or {})
        knowledge.end()
        _send(result_w, result)
        os.close(answer_r)


def _close_all_but(keep: set[int]) -> None:
    low = 0
    for high in [*sorted(keep), max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1024)]:
        if low < high:  # an empty range would close everything from low (CPython 3.11)
            os.closerange(low, high)
        low = high + 1


def _send(fd: int, answer: dict[str, Any]) -> None:
    data = (json.dumps(answer) + "\n").encode()
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the supervisor stopped reading (a result over the limit)
    with contextlib.suppress(OSError):
        os.close(fd)


_LIBC: Any = None


def preload() -> None:
    """Load what ``prctl`` needs (ctypes and the C library: a few milliseconds) before the
    setup comes, so a sandbox started ahead of need (a spare, pool.py) waits with it loaded.
    The function's process inherits it."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        with contextlib.suppress(OSError):
            _LIBC = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    preload()
    with contextlib.suppress(OSError, AttributeError):
        _LIBC.prctl(option, value, 0, 0, 0)


def die_with_parent() -> None:
    """Without bubblewrap (which does this itself), end with the parent rather than run on
    as an orphan when it dies."""
    prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def _limit(limits: dict[str, Any]) -> None:
    pairs = {
        "memory": resource.RLIMIT_AS,
        "data": resource.RLIMIT_DATA,  # browser tools: their memory limit (browser.py)
        "processes": resource.RLIMIT_NPROC,
        "file_size": resource.RLIMIT_FSIZE,
        "open_files": resource.RLIMIT_NOFILE,
        "cpu": resource.RLIMIT_CPU,
    }
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, which in pairs.items():
        value = limits.get(name)
        if value:
            # CPU: the hard limit a second above, so reaching the budget sends SIGXCPU (which
            # the server reports as a timeout) rather than SIGKILL.
            resource.setrlimit(which, (int(value), int(value) + (name == "cpu")))


def _cpu_budget(seconds: float) -> None:
    """Each call gets ``seconds`` of CPU from now, within the process's lifetime budget (the
    hard limit): past it the kernel ends the process with SIGXCPU."""
    if seconds <= 0:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        # Below the hard limit, so the kernel sends SIGXCPU (a timeout), not SIGKILL.
        soft = max(1, min(soft, hard - 1))
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _start_browser(browser: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool with require_browser: put its packages first on the path and start Playwright's
    driver (browser_lib/dhub_browser.py); None when it runs, else why not."""
    if not browser:
        return None
    sys.path[:0] = [str(place) for place in browser.get("path") or ()]
    try:
        helper = importlib.import_module("dhub_browser")
        helper.start(browser.get("executable"))
    except BaseException as exc:
        message = f"the browser could not start (Playwright's driver): {exc}"
        return {"kind": "exception", "type": "BrowserUnavailable", "message": message}
    return None


def _load(source: str, wanted: str | None) -> tuple[Any, dict[str, Any] | None]:
    namespace: dict[str, Any] = {"__name__": "__dhub_function__"}
    # Tracebacks then quote the user's lines, not just their numbers.
    linecache.cache[SOURCE_NAME] = (len(source), None, source.splitlines(True), SOURCE_NAME)
    try:
        exec(compile(source, SOURCE_NAME, "exec"), namespace)
    except BaseException as exc:  # the source itself failed: same shape as a call's failure
        return None, _failure(exc)
    entry = _entry_point(namespace, wanted)
    if entry is None:
        message = "no entry point: define main(...), or exactly one top-level function"
        return None, {"kind": "exception", "type": "LookupError", "message": message}
    return entry, None


def _entry_point(namespace: dict[str, Any], wanted: str | None) -> Any:
    """The function named like the tool, else the only top-level function, else ``main``."""
    named = namespace.get(wanted) if wanted else None
    if isinstance(named, types.FunctionType):
        return named
    own = [
        value
        for value in namespace.values()
        if isinstance(value, types.FunctionType) and value.__module__ == "__dhub_function__"
    ]
    if len(own) == 1:
        return own[0]
    main = namespace.get("main")
    return main if isinstance(main, types.FunctionType) else None


def _call(entry: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    try:
        value = entry(**inputs)
    except BaseException as exc:
        return _failure(exc)
    try:
        return {"kind": "ok", "value": json.loads(json.dumps(value))}
    except (TypeError, ValueError, RecursionError) as exc:
        return {"kind": "invalid_output", "message": f"the result is not JSON: {exc}"}


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MemoryError):
        return {"kind": "memory", "message": "the function ran out of memory (MemoryError)"}
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" ({exc.filename})" if exc.filename else ""
        message = f"the function ran out of memory: its temporary files filled their space{where}"
        return {"kind": "memory", "message": message}
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # Only the user's frames: ours (this file) say nothing about their code.
    user = [ln for ln in lines if f'File "{SOURCE_NAME}"' in ln or not ln.startswith("  File")]
    return {
        "kind": "exception",
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(user),
    }
