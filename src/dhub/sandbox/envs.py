"""Dependency environments: one cached virtual environment per distinct requirement set
(DESIGN.md 5).

A function's ``dependencies`` (pip requirement strings) are normalised and hashed with the
interpreter's version; the environment for that hash is built with uv on first use, in a
temporary directory renamed into place when complete, and reused by every later call. Two
first uses at once build it once: within a process they share one build, across processes a
file lock serialises them. The server's own environment is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement

READY = ".dhub-ready"


class DependencyError(Exception):
    """A requirement set could not be installed; the message names the requirement."""


def normalise(requirements: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Sorted, de-duplicated, each checked as a PEP 508 requirement."""
    seen = set()
    for text in requirements:
        try:
            seen.add(str(Requirement(text.strip())))
        except InvalidRequirement as exc:
            raise DependencyError(f"'{text}' is not a valid requirement: {exc}") from exc
    return tuple(sorted(seen))


def base_python() -> str:
    """The interpreter environments are made from: the real one behind the server's venv."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def uv_binary() -> str:
    try:
        from uv import find_uv_bin  # the uv wheel, a dependency of dhub

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise DependencyError(
                "uv is not installed: reinstall dhub (it depends on uv)"
            ) from None
        return found


class Environments:
    def __init__(self, root: Path, python: str | None = None, install_seconds: float = 600) -> None:
        self.root = root
        self.python = python or base_python()
        self._install_seconds = install_seconds
        self._builds: dict[str, asyncio.Task[Path]] = {}

    def key(self, requirements: tuple[str, ...]) -> str:
        text = f"{self.python}\n{sys.version}\n" + "\n".join(requirements)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    async def ensure(self, requirements: tuple[str, ...] | list[str]) -> Path | None:
        """The environment's directory (its interpreter is ``bin/python``); None when there is
        nothing to install (the function runs on the bare interpreter)."""
        wanted = normalise(requirements)
        if not wanted:
            return None
        key = self.key(wanted)
        place = self.root / key
        if (place / READY).exists():
            return place
        build = self._builds.get(key)
        if build is None:
            build = asyncio.ensure_future(self._build(key, wanted))
            self._builds[key] = build
            build.add_done_callback(lambda _: self._builds.pop(key, None))
        return await asyncio.shield(build)

    async def _build(self, key: str, requirements: tuple[str, ...]) -> Path:
        # The server's own (0700): a sandbox reaches an environment only through its
        # read-only bind at /sandbox/env, never through this directory.
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.chmod(0o700)
        place = self.root / key
        lock = await asyncio.to_thread(_lock, self.root / f"{key}.lock")
        try:
            if (place / READY).exists():  # another process built it meanwhile
                return place
            draft = self.root / f"{key}.draft-{os.getpid()}"
            shutil.rmtree(draft, ignore_errors=True)
            try:
                await self._run(
                    ["venv", "--quiet", "--python", self.python, str(draft)], requirements
                )
                python = str(draft / "bin" / "python")
                # Wheels only: building a source distribution would run the package's own
                # code on the server, outside any sandbox.
                install = ["pip", "install", "--quiet", "--no-build", "--python", python]
                install += requirements
                await self._run(install, requirements)
                (draft / READY).write_text("\n".join(requirements) + "\n")
                shutil.rmtree(place, ignore_errors=True)
                draft.rename(place)
            finally:
                shutil.rmtree(draft, ignore_errors=True)
            return place
        finally:
            lock.close()

    async def _run(self, args: list[str], requirements: tuple[str, ...]) -> None:
        proc = await asyncio.create_subprocess_exec(
            uv_binary(), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=_installer_environment(self.root), cwd=self.root,
        )  # fmt: skip
        try:
            _, err = await asyncio.wait_for(proc.communicate(), self._install_seconds)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise DependencyError(
                f"installing {', '.join(requirements)} took over {self._install_seconds:g} s"
            ) from None
        if proc.returncode != 0:
            raise DependencyError(_explain(err.decode(errors="replace"), requirements))


# What an installer needs of the server's environment (where packages come from, which
# certificates and proxies to trust), and nothing else: no DHUB_* secret reaches it.
_PASSED = {"PATH", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "NO_PROXY", "no_proxy"}
_PASSED_PREFIXES = ("UV_", "SSL_CERT_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                    "https_proxy", "all_proxy")  # fmt: skip


def _installer_environment(root: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key in _PASSED or key.startswith(_PASSED_PREFIXES)
    }
    env.setdefault("HOME", str(root))
    env.setdefault("PATH", "/usr/bin:/bin")
    return env


def _lock(path: Path) -> IO[str]:
    handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


# The box-drawing marks uv puts before its reasons.
_DECORATION = " \u00d7\u2570\u2500\u25b6\u2502"


def _explain(stderr: str, requirements: tuple[str, ...]) -> str:
    """uv's reason, led by the requirement it names (or all of them when it names none)."""
    lines = [line.strip(_DECORATION) for line in stderr.strip().splitlines() if line.strip()]
    reason = " ".join(line for line in lines if line)[-1500:]
    named = [r for r in requirements if Requirement(r).name.lower() in stderr.lower()]
    which = ", ".join(f"'{r}'" for r in (named or requirements))
    return f"could not install {which}: {reason or 'uv failed'}"
