"""The program that runs inside the sandbox: one function, one or many calls (DESIGN.md 5).

It is started as a file (``python -I child.py``) inside bubblewrap, never imported by the
server, and uses the standard library only. Protocol, one JSON document per line:

- stdin line 1, the setup: ``{"source", "entry", "uid", "limits"}``. The process drops to
  ``uid`` (when it starts as root), sets its resource limits, runs the source once and resolves
  the entry point, then answers ``{"kind": "ready"}`` or an error.
- every further stdin line, a call: ``{"seq", "inputs", "cpu"}``; the answer is ``{"seq",
  "kind": "ok", "value", "clean"}`` or ``{"seq", "kind": "exception" | "memory" |
  "invalid_output", "message", ..., "clean"}``. ``seq`` lets the server drop an answer the
  function forged itself (it can write to any descriptor it has); ``clean`` is false when the
  call left a thread or a process running, and then the worker is not reused.

Answers go to the original stdout; the user's ``print`` goes to stderr, so nothing a function
prints can forge an answer.
"""

from __future__ import annotations

import json
import linecache
import os
import resource
import sys
import threading
import traceback
import types
from typing import Any, TextIO

SOURCE_NAME = "<function>"
ALONE = False  # in a PID namespace of its own: every other process there was started by a call


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the user's prints (and any C library writes to fd 1) go to stderr
    sys.stdout = sys.stderr
    setup = json.loads(sys.stdin.readline())
    global ALONE
    ALONE = bool(setup.get("own_pid_namespace"))
    if not ALONE:
        _die_with_parent()
    _drop_privileges(setup.get("uid"))
    _limit(setup.get("limits") or {})
    entry, problem = _load(setup["source"], setup.get("entry"))
    _answer(answers, {**(problem or {"kind": "ready"}), "seq": 0})
    if entry is None:
        return
    for line in sys.stdin:
        request = json.loads(line)
        _cpu_budget(float(request.get("cpu") or 0))
        answer = _call(entry, request.get("inputs") or {})
        _answer(answers, {**answer, "seq": request.get("seq"), "clean": _clean()})


def _die_with_parent() -> None:
    """Without bubblewrap (which does this itself), end with the server rather than run on
    as an orphan when it dies."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _drop_privileges(uid: int | None) -> None:
    """Started as root (a root server): become an unprivileged user of our own, so process
    limits count this sandbox alone and no capability is left."""
    if uid is None or os.getuid() != 0:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _limit(limits: dict[str, Any]) -> None:
    pairs = {
        "memory": resource.RLIMIT_AS,
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
    """Each call gets ``seconds`` of CPU from now, within the worker's lifetime budget (the
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


def _clean() -> bool:
    """Nothing of the call still runs: no thread besides this one, no process besides this
    one and the sandbox's first process (its PID namespace shows only its own)."""
    if threading.active_count() > 1:
        return False
    if not ALONE:
        return True
    mine = {1, os.getpid()}
    try:
        return all(int(p) in mine for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        return False


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
    except (TypeError, ValueError) as exc:
        return {"kind": "invalid_output", "message": f"the result is not JSON: {exc}"}


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MemoryError):
        return {"kind": "memory", "message": "the function ran out of memory (MemoryError)"}
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # Only the user's frames: ours (this file) say nothing about their code.
    user = [ln for ln in lines if f'File "{SOURCE_NAME}"' in ln or not ln.startswith("  File")]
    return {
        "kind": "exception",
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(user),
    }


def _answer(out: TextIO, answer: dict[str, Any]) -> None:
    out.write(json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
