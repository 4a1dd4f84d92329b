"""The function port's plain implementation: user Python run in a child interpreter.

Each call starts ``python -I`` (isolated: no user site, no PYTHON* variables, not the server's
working directory) in its own process group, sends the source and inputs as JSON on stdin, and
reads one JSON result back. What the user's code prints goes to the child's stderr, not into the
result. A timeout kills the whole group; output past a size limit is cut and reported. Errors
come back as results (``exception`` with the user's traceback, ``timeout``, ``invalid_output``,
``output_too_large``, ``crashed``), never as exceptions in the server.

This is the engine's function port until the sandbox (bubblewrap, dependencies, warm pools)
replaces it; it isolates crashes and hangs, not hostile code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Literal

ResultKind = Literal["ok", "exception", "timeout", "invalid_output", "output_too_large", "crashed"]

# Runs in the child. Entry point: the named function, else the only top-level function, else
# ``main`` (DESIGN.md 5). The result is written to the original stdout only at the end.
_CHILD = r"""
import json, sys, traceback, types
payload = json.loads(sys.stdin.read())
out = sys.stdout
sys.stdout = sys.stderr

def entry_point(namespace, wanted):
    named = namespace.get(wanted) if wanted else None
    if isinstance(named, types.FunctionType):
        return named
    own = [v for v in namespace.values()
           if isinstance(v, types.FunctionType) and v.__module__ == "__dhub_function__"]
    if len(own) == 1:
        return own[0]
    main = namespace.get("main")
    return main if isinstance(main, types.FunctionType) else None

def run():
    namespace = {"__name__": "__dhub_function__"}
    try:
        exec(compile(payload["source"], "<function>", "exec"), namespace)
        entry = entry_point(namespace, payload.get("entry"))
        if entry is None:
            return {"kind": "exception", "type": "LookupError",
                    "message": "no entry point: define main(...), or one top-level function"}
        value = entry(**payload["inputs"])
    except BaseException as exc:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        user = [l for l in lines if 'File "<function>"' in l or not l.startswith("  File")]
        return {"kind": "exception", "type": type(exc).__name__, "message": str(exc),
                "traceback": "".join(user)}
    try:
        return {"kind": "ok", "value": json.loads(json.dumps(value))}
    except (TypeError, ValueError) as exc:
        return {"kind": "invalid_output", "message": f"the result is not JSON: {exc}"}

out.write(json.dumps(run()))
out.flush()
"""


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


class SubprocessFunctionRunner:
    def __init__(self, max_output: int = 1_000_000, python: str = sys.executable) -> None:
        self._max_output = max_output
        self._python = python

    async def call(
        self,
        source: str,
        inputs: dict[str, Any],
        limit_seconds: float,
        entry: str | None = None,
    ) -> FunctionResult:
        """Run the entry point with ``inputs`` as keyword arguments; the call (start-up
        included) gets ``limit_seconds`` of wall time, the node's timeout."""
        payload = json.dumps({"source": source, "inputs": inputs, "entry": entry}).encode()
        with tempfile.TemporaryDirectory(prefix="dhub-fn-") as workdir:
            proc = await asyncio.create_subprocess_exec(
                self._python, "-I", "-c", _CHILD,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=workdir, start_new_session=True,
                env={"PATH": os.environ.get("PATH", ""), "HOME": workdir},
            )  # fmt: skip
            try:
                exchange = self._exchange(proc, payload)
                out, err, cut = await asyncio.wait_for(exchange, limit_seconds)
            except TimeoutError:
                _kill_group(proc)
                await proc.communicate()  # reap it and close its pipes
                return FunctionResult("timeout", message=f"no result within {limit_seconds:g} s")
            except asyncio.CancelledError:
                # The run abandoned the call (a lost branch, a timeout, Ctrl-C): the child and
                # everything it started go with it, instead of running on unowned.
                _kill_group(proc)
                await proc.communicate()
                raise
        return self._result(out, err, cut, proc.returncode)

    async def _exchange(
        self, proc: asyncio.subprocess.Process, payload: bytes
    ) -> tuple[bytes, bytes, bool]:
        assert proc.stdin and proc.stdout and proc.stderr
        proc.stdin.write(payload)
        await proc.stdin.drain()
        proc.stdin.close()
        (out, cut_out), (err, _) = await asyncio.gather(
            self._read(proc.stdout), self._read(proc.stderr)
        )
        await proc.wait()
        return out, err, cut_out

    async def _read(self, stream: asyncio.StreamReader) -> tuple[bytes, bool]:
        """Everything up to the limit; the rest is read and dropped so the child never blocks."""
        kept, cut = bytearray(), False
        while chunk := await stream.read(65536):
            room = self._max_output - len(kept)
            kept += chunk[: max(room, 0)]
            cut = cut or len(chunk) > room
        return bytes(kept), cut

    def _result(self, out: bytes, err: bytes, cut: bool, code: int | None) -> FunctionResult:
        stderr = err.decode(errors="replace")[-10_000:]
        if cut:
            return FunctionResult(
                "output_too_large", message=f"the result is over {self._max_output} bytes",
                stderr=stderr,
            )  # fmt: skip
        try:
            reply = json.loads(out)
        except ValueError:
            return FunctionResult(
                "crashed", message=f"the function's process ended with code {code}", stderr=stderr
            )
        if reply["kind"] == "ok":
            return FunctionResult("ok", value=reply["value"], stderr=stderr)
        return FunctionResult(
            reply["kind"],
            error_type=reply.get("type"),
            message=reply.get("message", ""),
            traceback=reply.get("traceback", ""),
            stderr=stderr,
        )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
        os.killpg(proc.pid, signal.SIGKILL)
