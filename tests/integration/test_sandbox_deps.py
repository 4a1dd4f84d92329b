"""Functions with dependencies: a real package from the index, installed once per requirement set
into an environment of its own, reused, and never into the server's environment."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import stat
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from dhub.sandbox.envs import READY
from dhub.sandbox.runner import FunctionCall, SandboxRunner, SandboxSettings
from dhub.sandbox.worker import FunctionResult
from tests.conftest import sandbox_settings

pytestmark = pytest.mark.asyncio

DATEUTIL = "python-dateutil==2.9.0.post0"  # pure Python, small
PARSE = (
    "import os, sys\nfrom dateutil import parser\n\n"
    "def main(text):\n"
    "    try:\n        import fastapi  # the server's, never the function's\n"
    "        server = 'visible'\n"
    "    except ImportError:\n        server = 'hidden'\n"
    "    return {'parsed': parser.parse(text).isoformat(), 'prefix': sys.prefix,\n"
    "            'inode': os.stat(sys.prefix).st_ino, 'server': server}\n"
)

INSIDE = "/sandbox/env"  # where the sandbox sees its dependency environment


async def call(
    runner: SandboxRunner, source: str, dependencies: tuple[str, ...], owner: str = "deps",
    **inputs: Any,
) -> FunctionResult:  # fmt: skip
    return await runner.call(
        FunctionCall(source, inputs, 60, dependencies=dependencies, owner=owner)
    )


def _env_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _site_packages() -> list[str]:
    return sorted(os.listdir(sysconfig.get_paths()["purelib"]))


async def test_a_dependency_installs_once_and_is_reused() -> None:
    had_dateutil = importlib.util.find_spec("dateutil") is not None
    server_site = _site_packages()
    settings = sandbox_settings()  # the shared test envs: a rerun reuses what this built
    runner = SandboxRunner(settings)
    try:
        first = await call(runner, PARSE, (DATEUTIL,), owner="a", text="5 March 2024 10:20")
        assert first.ok, first
        assert first.value["parsed"] == "2024-03-05T10:20:00"
        assert first.value["server"] == "hidden"
        env = await runner.environments.ensure([DATEUTIL])
        assert env is not None and env.parent == settings.envs_dir
        # it ran in that environment (bound at a fixed place inside the sandbox)
        assert (first.value["prefix"], first.value["inode"]) == (INSIDE, env.stat().st_ino)
        built = (env.stat().st_ino, (env / READY).stat().st_mtime_ns)

        # Another owner (a new worker) with the same requirement, spelled differently.
        second = await call(runner, PARSE, (f" {DATEUTIL}", DATEUTIL), owner="b", text="2024-12-31")
        assert second.ok and second.value["inode"] == env.stat().st_ino, second
        assert await runner.environments.ensure((DATEUTIL,)) == env
        assert (env.stat().st_ino, (env / READY).stat().st_mtime_ns) == built  # not rebuilt
        assert not [p for p in settings.envs_dir.iterdir() if ".draft-" in p.name]
    finally:
        await runner.close()
    # The server's own environment is untouched.
    assert (importlib.util.find_spec("dateutil") is not None) == had_dateutil
    assert _site_packages() == server_site


async def test_concurrent_first_uses_build_once(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    # Two runners stand in for two server processes on one data directory; each gets three
    # calls at once, all before the environment exists.
    runners = [SandboxRunner(SandboxSettings(envs_dir=envs)) for _ in range(2)]
    try:
        results = await asyncio.gather(
            *(
                call(runner, PARSE, (DATEUTIL,), owner=f"agent.{i}.{j}@1", text="2024-03-05")
                for i, runner in enumerate(runners)
                for j in range(3)
            )
        )
        assert all(r.ok for r in results), results
        [env] = _env_dirs(envs)  # one environment, no draft left behind
        place = envs / env
        # Every call ran in that very directory: none in an earlier build replaced since.
        assert {(r.value["prefix"], r.value["inode"]) for r in results} == {
            (INSIDE, place.stat().st_ino)
        }
        assert (place / READY).read_text().split() == [DATEUTIL]
        # The server's directory, its lock files its own (the sandbox sees only its bind).
        assert stat.S_IMODE(envs.stat().st_mode) == 0o700
        locks = list(envs.glob("*.lock"))
        assert locks and {stat.S_IMODE(lock.stat().st_mode) for lock in locks} == {0o600}
    finally:
        for runner in runners:
            await runner.close()


async def test_an_unknown_package_is_a_dependency_error(tmp_path: Path) -> None:
    runner = SandboxRunner(SandboxSettings(envs_dir=tmp_path / "envs"))
    missing = "dhub-no-such-package-xyz==1.0"
    try:
        result = await call(runner, PARSE, (missing,), text="2024-03-05")
        assert result.kind == "dependency", result
        assert f"'{missing}'" in result.message and "not found" in result.message, result
        assert _env_dirs(tmp_path / "envs") == []  # no half-built environment
        # The runner still serves functions without dependencies.
        plain = await call(runner, "def main(x):\n    return x + 1\n", (), x=1)
        assert plain.value == 2, plain
    finally:
        await runner.close()


async def test_an_invalid_requirement_is_a_dependency_error(tmp_path: Path) -> None:
    runner = SandboxRunner(SandboxSettings(envs_dir=tmp_path / "envs"))
    try:
        for requirements in (("not a requirement!!",), (DATEUTIL, "not a requirement!!")):
            result = await call(runner, PARSE, requirements, text="2024-03-05")
            assert result.kind == "dependency", result
            assert "'not a requirement!!' is not a valid requirement" in result.message
        assert not (tmp_path / "envs").exists()  # refused before anything was built
    finally:
        await runner.close()


async def test_without_dependencies_nothing_of_the_servers_environment_is_importable() -> None:
    runner = SandboxRunner(sandbox_settings())
    probe = (
        "import importlib.util\n\ndef main(names):\n"
        "    return [n for n in names if importlib.util.find_spec(n) is not None]\n"
    )
    # All installed in the server's environment; "json" (the standard library) is the control.
    names = ["fastapi", "sqlalchemy", "pydantic", "uv", "json"]
    assert all(importlib.util.find_spec(n) is not None for n in names)
    try:
        result = await call(runner, probe, (), names=names)
    finally:
        await runner.close()
    assert result.value == ["json"], result
