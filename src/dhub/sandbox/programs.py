"""Long-lived programs in the sandbox that are no function: a stdio MCP server (issue 20).

Such a program gets what a function gets (DESIGN.md 5): the same root (read-only binds, sized
scratch places, its own PID, IPC, UTS and network namespaces, no network unless it asks, the
seccomp filter), its ``dependencies`` in an environment built as a function's are, and the
same limits (address space, processes, file sizes, descriptors, CPU), set by the launcher
(child_exec.py) that drops to the sandbox's user and becomes the program. Its stdin and stdout
are the caller's channel; stderr is kept (its last lines) to say why it stopped. A ``source``
is written once to a content-addressed file and bound at ``/sandbox/server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from dhub.sandbox.envs import base_python
from dhub.sandbox.errors import SandboxUnavailable
from dhub.sandbox.isolation import ENV_INSIDE, ENVIRONMENT, Launched, Program
from dhub.sandbox.network import close_pipes, reaped
from dhub.sandbox.runner import SandboxRunner

SOURCE_INSIDE = "/sandbox/server.py"
STDERR_KEPT = 4096  # bytes of a program's stderr kept to explain its end
# A message (one line of JSON-RPC) may be this long: a tool's result up to the sandbox's
# output limit, with room for its encoding.
LINE_FACTOR = 4
# The launcher's own environment: none of the server's variables (its secrets) reach it.
_LAUNCHER_ENVIRONMENT = {"PATH": ENVIRONMENT["PATH"], "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class ProgramSpec:
    """What to start: ``command`` ('python', a name on the sandbox's PATH or a console script
    of the dependencies, or an absolute path), or None to run ``source`` with Python."""

    command: str | None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None
    dependencies: tuple[str, ...] = ()
    network: bool = False


class ProgramError(Exception):
    """The program cannot be started; the message says why and what to do."""


@dataclass
class Started:
    """A running program: its process (stdin/stdout pipes) and what its stderr said last."""

    launched: Launched
    stderr: bytearray = field(default_factory=bytearray)
    _reader: asyncio.Task[None] | None = None

    @property
    def proc(self) -> asyncio.subprocess.Process:
        return self.launched.proc

    def last_words(self) -> str:
        return self.stderr.decode(errors="replace").strip()[-1000:]

    async def stop(self, grace: float = 2.0) -> None:
        proc = self.proc
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        if await reaped(proc, grace) is None:
            _kill(proc)
            await reaped(proc, grace)
        if self._reader is not None:
            self._reader.cancel()
        close_pipes(proc)  # what of the sandbox outlived bubblewrap ends with its input
        await self.launched.end()


async def start_program(runner: SandboxRunner, spec: ProgramSpec, owner: str) -> Started:
    """Start ``spec`` in ``runner``'s sandbox for ``owner`` (the user it runs for)."""
    unavailable = await runner.unavailable()
    if unavailable:
        raise ProgramError(unavailable)
    try:
        env_dir = await runner.environments.ensure(spec.dependencies)
    except Exception as exc:  # DependencyError and the environment's own failures
        raise ProgramError(str(exc)) from exc
    sandboxed = runner.isolation.name == "bubblewrap"
    files: list[tuple[str, str]] = []
    python = base_python()
    if env_dir is not None:
        python = f"{ENV_INSIDE}/bin/python" if sandboxed else str(env_dir / "bin" / "python")
    argv = [_command(spec, env_dir, sandboxed, python), *spec.args]
    if spec.source is not None:
        path = _source_file(runner.settings.envs_dir.resolve().parent / "programs", spec.source)
        files.append((str(path), SOURCE_INSIDE))
        if spec.command is None:
            argv = [python, "-I", SOURCE_INSIDE if sandboxed else str(path), *spec.args]
    bin_dir = f"{ENV_INSIDE}/bin" if sandboxed else str(env_dir / "bin") if env_dir else None
    path_var = ENVIRONMENT["PATH"] if bin_dir is None else f"{bin_dir}:{ENVIRONMENT['PATH']}"
    home = ENVIRONMENT["HOME"] if sandboxed else str(runner.settings.envs_dir.resolve().parent)
    env = {**ENVIRONMENT, "PATH": path_var, "HOME": home, **spec.env}
    limits = runner.settings.limits
    setup = {"argv": argv, "env": env, "uid": runner.uid(), "limits": limits.for_child()}
    read_end, write_end = os.pipe()
    try:
        launched = await runner.isolation.launch(
            base_python(), str(env_dir) if env_dir else None, spec.network, limits.scratch,
            None, Program(read_end, tuple(files)), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            pass_fds=(read_end,), start_new_session=True, env=_LAUNCHER_ENVIRONMENT,
            limit=max(limits.output_bytes * LINE_FACTOR, 1 << 20),
        )  # fmt: skip
    except SandboxUnavailable as exc:
        os.close(write_end)
        raise ProgramError(str(exc)) from exc
    finally:
        os.close(read_end)
    await asyncio.to_thread(_write_all, write_end, orjson.dumps(setup))
    started = Started(launched)
    started._reader = asyncio.ensure_future(_keep_stderr(launched.proc, started.stderr))
    return started


def _command(spec: ProgramSpec, env_dir: Path | None, sandboxed: bool, python: str) -> str:
    """The program's path as the sandbox sees it."""
    command = spec.command or "python"
    if command in ("python", "python3"):
        return python
    if os.path.isabs(command):
        return command
    if env_dir is not None and (env_dir / "bin" / command).is_file():
        return f"{ENV_INSIDE}/bin/{command}" if sandboxed else str(env_dir / "bin" / command)
    found = shutil.which(command, path=ENVIRONMENT["PATH"])
    if found is None:
        raise ProgramError(
            f"No program '{command}' in the sandbox: name 'python' (with the package in "
            "'dependencies'), a console script of a dependency, or a program under /usr."
        )
    return found


def _source_file(folder: Path, source: str) -> Path:
    """The source in a file named by its digest (readable by the sandbox's user)."""
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(source.encode()).hexdigest()}.py"
    if not path.exists():
        draft = path.with_suffix(f".{os.getpid()}.draft")
        draft.write_text(source)
        draft.chmod(0o644)
        draft.replace(path)
    return path


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the program ended before reading its setup: its stderr says why
    finally:
        os.close(fd)


async def _keep_stderr(proc: asyncio.subprocess.Process, kept: bytearray) -> None:
    if proc.stderr is None:
        return
    while chunk := await proc.stderr.read(4096):
        kept += chunk
        del kept[:-STDERR_KEPT]


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
