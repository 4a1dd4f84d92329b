"""How a sandboxed interpreter is started: the bubblewrap command line, and the explicit unsafe
alternative (DESIGN.md 5).

Under bubblewrap the function sees a new root made of read-only binds (``/usr``, a few files of
``/etc``, the Python installation, its dependency environment and the child program), a private
``/tmp``, ``/dev/shm`` and working directory ``/work`` (empty tmpfs, each of a fixed size carved
out of the memory limit), its own ``/proc`` and ``/dev``, and new PID, IPC, UTS and network
namespaces (no network unless the function's options ask for it); the root and ``/dev`` are
read-only, and the seccomp filter of seccomp.py refuses the system calls that would widen any of
it. None of the server's files, environment variables or secrets exist there. A tool with
``require_browser`` also sees Playwright and its helper under ``/sandbox/browser``, and runs
under the browser variant of the filter (browser.py). The child program is the namespace's PID 1
(``--as-pid-1``): a supervisor that drops to an unprivileged user of its own and runs the
function in a process of its own (child.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dhub.sandbox.browser import Browser
from dhub.sandbox.envs import base_python
from dhub.sandbox.errors import SandboxUnavailable
from dhub.sandbox.network import Launched, launch_with_outbound_network
from dhub.sandbox.seccomp import program

__all__ = [
    "ENV_INSIDE", "SCRATCH", "Bubblewrap", "Isolation", "Launched", "Program",
    "SandboxUnavailable", "Unsafe",
]  # fmt: skip

CHILD = Path(__file__).with_name("child.py")
CHILD_INSIDE = "/sandbox/child.py"
# The launcher of programs that are no function (a stdio MCP server): it sets the limits,
# drops to the sandbox's user and becomes the program (child_exec.py).
EXEC = CHILD.with_name("child_exec.py")
EXEC_INSIDE = "/sandbox/child_exec.py"
# Loaded by the child program from beside it: the function's process, the supervisor's
# knowledge relay, and the function's knowledge helper (docs/sandbox.md "Knowledge from code").
SIBLINGS = ("child_function.py", "child_host.py", "child_procs.py", "dhub_knowledge.py")
ENV_INSIDE = "/sandbox/env"
# What a Python program may need of /etc: the loader cache, time zone, TLS roots, name lookup.
ETC = (
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
)
# The writable places, each a tmpfs of its own: its share of the memory limit's scratch part.
SCRATCH = {"/tmp": 2, "/work": 1, "/dev/shm": 1}
PAGE = 4096


def scratch_sizes(total: int) -> dict[str, int]:
    """Each writable place's size in bytes, together at most ``total`` (at least a page
    each: bubblewrap reads a size of 0 as no limit at all)."""
    shares = sum(SCRATCH.values())
    return {place: max(PAGE, total * share // shares // PAGE * PAGE)
            for place, share in SCRATCH.items()}  # fmt: skip


class Isolation(Protocol):
    @property
    def name(self) -> str: ...

    def command(
        self, python: str, env: str | None, network: bool, scratch: int = 0,
        seccomp: int | None = None, browser: Browser | None = None,
        program: Program | None = None,
    ) -> list[str]:  # fmt: skip
        """The argv starting the child program with the interpreter ``python``, in the
        dependency environment ``env`` (a virtual environment made from it), or with no
        site-packages at all when there is none: a function without dependencies sees the
        standard library only (and, with ``browser``, what a browser tool needs). With
        ``program``, the exec launcher (child_exec.py) that becomes that program instead."""
        ...

    @property
    def own_pid_namespace(self) -> bool:
        """Whether the child sees only its own processes."""
        ...

    async def launch(
        self, python: str, venv: str | None, network: bool, scratch: int,
        browser: Browser | None = None, program: Program | None = None, **options: Any,
    ) -> Launched:  # fmt: skip
        """Start the child program (or ``program``) in the dependency environment ``venv``,
        with ``scratch`` bytes for its writable places (``options`` go to the subprocess:
        pipes, limits, its environment variables)."""
        ...

    async def check(self) -> None:
        """Raise SandboxUnavailable when this isolation cannot start here."""
        ...


@dataclass(frozen=True)
class Program:
    """A program to run in the sandbox instead of a function's child program. Its setup (argv,
    environment, limits, user) is read by the launcher from ``setup_fd``, a pipe: secrets in
    its environment never appear on a command line another process could read. ``files``:
    ``(host path, path inside)`` read-only binds (bubblewrap; the unsafe mode uses the host's
    paths, so setups name ``inside`` paths only under bubblewrap)."""

    setup_fd: int
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Bubblewrap:
    bwrap: str = "bwrap"
    name: str = "bubblewrap"

    @property
    def own_pid_namespace(self) -> bool:
        return True

    async def launch(
        self, python: str, venv: str | None, network: bool, scratch: int,
        browser: Browser | None = None, program: Program | None = None, **options: Any,
    ) -> Launched:  # fmt: skip
        # Its own descriptor: bubblewrap reads it from the current offset.
        seccomp = _filter(browser is not None)
        try:
            argv = self.command(python, venv, network, scratch, seccomp, browser, program)
            options["pass_fds"] = (*options.get("pass_fds", ()), seccomp)
            if network:  # a namespace of its own still, connected to the outside only
                return await launch_with_outbound_network(argv, **options)
            return Launched(await asyncio.create_subprocess_exec(*argv, **options))
        finally:
            os.close(seccomp)

    def command(
        self, python: str, env: str | None, network: bool, scratch: int = 0,
        seccomp: int | None = None, browser: Browser | None = None,
        program: Program | None = None,
    ) -> list[str]:  # fmt: skip
        args = [self.bwrap, "--die-with-parent", "--new-session", "--as-pid-1"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if os.geteuid() != 0:
            # Unprivileged bubblewrap works in a user namespace; no further one inside it.
            args += ["--unshare-user", "--disable-userns"]
        args.append("--unshare-net")
        if seccomp is not None:
            args += ["--seccomp", str(seccomp)]
        # The private, writable places first: binds made after them stay visible even when
        # their host path lies under /tmp or /work. Each is sized: tmpfs memory is no
        # process's address space, so it comes out of the memory limit (runner.py).
        args += ["--proc", "/proc", "--dev", "/dev"]
        for place, size in scratch_sizes(scratch).items():
            args += ["--perms", "1777", "--size", str(size), "--tmpfs", place]
        args += ["--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if Path(f"/{link}").is_symlink():
                args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        args += ["--perms", "0755", "--dir", "/etc"]
        for path in ETC:
            if Path(path).exists() and not (network and path == "/etc/resolv.conf"):
                args += ["--ro-bind", path, path]
        prefix = _prefix(python)
        args += _parents(prefix, {"/", "/usr", "/etc", "/tmp", "/work"})
        args += ["--ro-bind", prefix, prefix, "--perms", "0755", "--dir", "/sandbox"]
        args += ["--ro-bind", str(CHILD), CHILD_INSIDE]
        for name in SIBLINGS:
            args += ["--ro-bind", str(CHILD.with_name(name)), f"/sandbox/{name}"]
        if env is not None:  # always at the same place inside: no host path to depend on
            args += ["--ro-bind", env, ENV_INSIDE]
        if browser is not None:
            args += browser.binds()
        if program is not None:
            args += ["--ro-bind", str(EXEC), EXEC_INSIDE]
            for host, inside in program.files:
                args += ["--ro-bind", host, inside]
        # Nothing else is writable: the new root and /dev are tmpfs, unsized, and made
        # read-only once everything is in place (device nodes stay usable).
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        args += ["--chdir", "/work", "--clearenv"]
        for key, value in ENVIRONMENT.items():
            args += ["--setenv", key, value]
        if program is not None:  # the launcher needs the standard library only
            return [*args, python, "-I", "-S", EXEC_INSIDE, str(program.setup_fd)]
        interpreter = f"{ENV_INSIDE}/bin/python" if env else python
        return [*args, interpreter, *_python_flags(env is not None), CHILD_INSIDE]

    async def check(self) -> None:
        if shutil.which(self.bwrap) is None:
            raise SandboxUnavailable(
                "bubblewrap is not installed: install the Debian package 'bubblewrap' "
                "(make install does), or set DHUB_SANDBOX=unsafe to run user code without "
                "isolation (never on a shared server)"
            )
        python = base_python()
        seccomp = _filter()
        try:
            probe = self.command(python, None, False, 1 << 20, seccomp)
            cut = probe.index(python)
            proc = await asyncio.create_subprocess_exec(
                *probe[:cut], "/usr/bin/env", "true", pass_fds=(seccomp,),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await proc.communicate()
        finally:
            os.close(seccomp)
        if proc.returncode != 0:
            reason = err.decode(errors="replace").strip() or f"exit code {proc.returncode}"
            raise SandboxUnavailable(
                f"bubblewrap cannot start here ({reason}); it needs version 0.8 or later "
                "(Debian 12's), and user namespaces or root. Enable them, or set "
                "DHUB_SANDBOX=unsafe to run user code without isolation (never on a shared "
                "server)"
            )


@dataclass(frozen=True)
class Unsafe:
    """No isolation: the operator chose it explicitly (DHUB_SANDBOX=unsafe). The child still
    runs in its own process with its limits, but sees the machine as the server does."""

    name: str = "unsafe"

    @property
    def own_pid_namespace(self) -> bool:
        return False

    async def launch(
        self, python: str, venv: str | None, network: bool, scratch: int,
        browser: Browser | None = None, program: Program | None = None, **options: Any,
    ) -> Launched:  # fmt: skip
        argv = self.command(python, venv, network, scratch, program=program)
        return Launched(await asyncio.create_subprocess_exec(*argv, **options))

    def command(
        self, python: str, env: str | None, network: bool, scratch: int = 0,
        seccomp: int | None = None, browser: Browser | None = None,
        program: Program | None = None,
    ) -> list[str]:  # fmt: skip
        if program is not None:
            return [python, "-I", "-S", str(EXEC), str(program.setup_fd)]
        interpreter = f"{env}/bin/python" if env else python
        return [interpreter, *_python_flags(env is not None), str(CHILD)]

    async def check(self) -> None:
        return None


ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


def _filter(browser: bool = False) -> int:
    """A descriptor holding the compiled seccomp filter (the browser tools' variant with
    ``browser``), read from its start."""
    fd = os.memfd_create("dhub-seccomp")
    os.write(fd, _PROGRAMS[browser])
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_PROGRAMS = {False: program(), True: program(browser=True)}


def _python_flags(site: bool) -> list[str]:
    # -I: no user site, no PYTHON* variables, no script directory on sys.path; -S: no
    # site-packages either, for functions that declared no dependencies.
    return ["-I"] if site else ["-I", "-S"]


def _prefix(python: str) -> str:
    """The installation a Python executable belongs to (``.../bin/python3`` -> ``...``)."""
    return str(Path(os.path.realpath(python)).parent.parent)


def _parents(path: str, made: set[str]) -> list[str]:
    """Directories leading to ``path`` in the new root, traversable by the sandbox's user
    (bubblewrap would otherwise create them private to root)."""
    args: list[str] = []
    for parent in reversed(Path(path).parents):
        text = str(parent)
        if text not in made:
            made.add(text)
            args += ["--perms", "0755", "--dir", text]
    return args
