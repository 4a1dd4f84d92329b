"""The sandbox runner: every call of user Python goes through here (DESIGN.md 5).

A call names its function (source, entry point, dependencies, network option, whether it
requires a browser) and its owner (the agent version and node it belongs to). The runner makes
sure the dependency environment exists, then runs the call on a warm worker of that exact
function and owner, or on a fresh one. If the configured isolation cannot start on this machine,
every call fails with a ``sandbox`` error saying why: user code never runs unisolated unless the
operator chose ``DHUB_SANDBOX=unsafe``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dhub.domain.call_schemas import CallInputError, CallOutputError, check_inputs, check_outputs
from dhub.sandbox.browser import CHROMIUM, PROCESSES, find_browser
from dhub.sandbox.decorators import Clock, Decorators, Policy
from dhub.sandbox.envs import DependencyError, Environments, base_python
from dhub.sandbox.isolation import SCRATCH, Bubblewrap, Isolation, SandboxUnavailable, Unsafe
from dhub.sandbox.pool import WarmPool
from dhub.sandbox.worker import FunctionResult, Host, Limits, Worker

# Tries to start a sandbox with network: slirp4netns attaching to the namespace while
# bubblewrap sets up its loopback fails now and then (bwrap: "loopback: Failed RTM_NEWADDR", or
# a broken pipe: a few in a hundred starts, six at a time on two cores), and a new start works,
# after a pause: back to back, the same race under the same load failed three times running.
_NETWORK_STARTS = 5
_NETWORK_PAUSE = 0.05  # seconds before the second try, doubling
# Each sandbox of a root server runs as its own unprivileged user, picked from this range, so
# a process limit counts that sandbox alone and sandboxes cannot signal each other.
_UIDS = range(200_000, 265_000)


@dataclass(frozen=True)
class FunctionCall:
    source: str
    inputs: dict[str, Any]
    timeout: float
    entry: str | None = None
    dependencies: tuple[str, ...] = ()
    network: bool = False
    # Whom the call runs for and where the function comes from (the run's user, the agent
    # version and node): a warm worker serves one owner's function only, so nothing a call
    # leaves in an interpreter reaches another user.
    owner: str = ""
    parameters: dict[str, Any] | None = None  # JSON schema the inputs must fit
    outputs: dict[str, Any] | None = None  # name -> JSON schema the result must hold
    decorators: tuple[dict[str, Any], ...] = ()
    browser: bool = False  # a tool with require_browser: headless Chromium (browser.py)
    # Performs the function's knowledge calls for the call's run (worker.py); None: it has none.
    host: Host | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SandboxSettings:
    isolation: str = "bubblewrap"  # or "unsafe", only when the operator says so
    envs_dir: Path = Path(".dhub/envs")  # made absolute by the runner
    limits: Limits = field(default_factory=Limits)
    warm: bool = True
    # Caps on the warm pool, which otherwise sizes itself to the calls in flight (pool.py):
    # workers kept per function, busy and idle, and idle workers in all; None: no cap.
    idle_per_key: int | None = None
    idle_total: int | None = None
    # Memory all the pool's interpreters may hold together (busy and idle), in bytes.
    pool_bytes: int = field(default_factory=lambda: default_pool_bytes())
    idle_seconds: float = 300.0  # an idle worker is ended after this long unused
    demand_seconds: float = 60.0  # how long a function's peak of calls in flight is remembered
    # Calls running at once in this process; more wait their turn. Without a bound, a
    # thousand runs reaching a code node together start a thousand interpreters and the
    # machine does nothing else (bench/scale.py measured it): none finished in 30 s.
    concurrency: int = field(default_factory=lambda: default_concurrency())
    chromium: str = CHROMIUM  # the browser of tools with require_browser

    @classmethod
    def from_env(cls, data_dir: Path) -> SandboxSettings:
        env = os.environ
        mode = env.get("DHUB_SANDBOX", "bubblewrap")
        if mode not in ("bubblewrap", "unsafe"):
            raise ValueError(f"DHUB_SANDBOX must be 'bubblewrap' or 'unsafe', not {mode!r}")
        memory = int(env.get("DHUB_SANDBOX_MEMORY_MB", 2048)) << 20
        scratch = env.get("DHUB_SANDBOX_SCRATCH_MB")
        if scratch is not None and not 0 <= int(scratch) << 20 < memory:
            raise ValueError(
                "DHUB_SANDBOX_SCRATCH_MB must be at least 0 and less than "
                f"DHUB_SANDBOX_MEMORY_MB ({memory >> 20}), not {scratch}"
            )
        limits = Limits(
            memory_bytes=memory,
            scratch_bytes=None if scratch is None else int(scratch) << 20,
            processes=int(env.get("DHUB_SANDBOX_PROCESSES", 64)),
            browser_processes=int(env.get("DHUB_SANDBOX_BROWSER_PROCESSES") or PROCESSES),
            output_bytes=int(env.get("DHUB_SANDBOX_OUTPUT_BYTES", 1 << 20)),
        )
        return cls(
            isolation=mode,
            envs_dir=data_dir / "envs",
            limits=limits,
            warm=env.get("DHUB_SANDBOX_WARM", "1") != "0",
            # Caps only: the pool keeps as many interpreters per function as it recently had
            # calls in flight, within the memory budget (pool.py).
            idle_per_key=_optional_int(env.get("DHUB_SANDBOX_WARM_PER_FUNCTION")),
            idle_total=_optional_int(env.get("DHUB_SANDBOX_WARM_TOTAL")),
            pool_bytes=_pool_bytes(env.get("DHUB_SANDBOX_POOL_MB")),
            concurrency=int(env.get("DHUB_SANDBOX_CONCURRENCY") or default_concurrency()),
            chromium=env.get("DHUB_SANDBOX_CHROMIUM") or CHROMIUM,
        )


def default_pool_bytes(meminfo: str = "/proc/meminfo") -> int:
    """A quarter of the machine's memory, at most 8 GB (about 500 waiting interpreters): the
    rest is the server's, the database's, and the functions' own while they run. 1 GB when
    the machine's memory cannot be read."""
    try:
        with open(meminfo) as f:
            total = next(int(line.split()[1]) << 10 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 1 << 30
    return min(total // 4, 8 << 30)


def _pool_bytes(value: str | None) -> int:
    if not value:
        return default_pool_bytes()
    if int(value) < 1:
        raise ValueError(f"DHUB_SANDBOX_POOL_MB must be at least 1, not {value}")
    return int(value) << 20


def _optional_int(value: str | None) -> int | None:
    return int(value) if value else None


def default_concurrency() -> int:
    """32 calls per core, at least 64: functions often wait (on an API, a sleep), but each
    holds an interpreter (tens of MB) while it does."""
    return max(64, 32 * (os.cpu_count() or 1))


class SandboxRunner:
    def __init__(self, settings: SandboxSettings | None = None, clock: Clock | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.decorators = Decorators(clock)
        self.isolation: Isolation = (
            Unsafe() if self.settings.isolation == "unsafe" else Bubblewrap()
        )
        self.environments = Environments(self.settings.envs_dir.resolve())
        self.pool = WarmPool(
            self.settings.idle_per_key, self.settings.idle_total,
            self.settings.idle_seconds, self.settings.pool_bytes, self.settings.demand_seconds,
        )  # fmt: skip
        self._slots = asyncio.Semaphore(max(1, self.settings.concurrency))
        self._checked: asyncio.Task[str | None] | None = None
        # Each worker its own uid, in turn from a random start (two runners rarely overlap).
        start = random.randrange(len(_UIDS))
        self._uids: Iterator[int] = itertools.cycle([*_UIDS[start:], *_UIDS[:start]])

    async def call(self, call: FunctionCall) -> FunctionResult:
        """Check the arguments, run the call as its decorators say, check the result."""
        if call.parameters:
            try:
                check_inputs(call.parameters, call.inputs)
            except CallInputError as exc:
                return FunctionResult("invalid_input", message=str(exc))
        key = (
            call.owner, _digest(call.source), call.entry, call.dependencies, call.network,
            call.browser,
        )  # fmt: skip
        policy = Policy.of(call.decorators)

        async def invoke(seconds: float) -> FunctionResult:
            return await self._run(call, key, seconds)

        result = await self.decorators.run(key, policy, call.inputs, call.timeout, invoke)
        if result.ok and call.outputs:
            try:
                check_outputs(call.outputs, result.value)
            except CallOutputError as exc:
                return FunctionResult("invalid_output", message=str(exc), stderr=result.stderr)
        return result

    async def _run(self, call: FunctionCall, key: Any, seconds: float) -> FunctionResult:
        unavailable = await self.unavailable()
        if unavailable:
            return FunctionResult("sandbox", message=unavailable)
        browser = find_browser(self.settings.chromium) if call.browser else None
        if isinstance(browser, str):
            return FunctionResult("sandbox", message=browser)
        try:
            env = await self.environments.ensure(call.dependencies)
        except DependencyError as exc:
            return FunctionResult("dependency", message=str(exc))
        limits = self.settings.limits
        launch = functools.partial(
            self.isolation.launch, base_python(), str(env) if env else None, call.network,
            limits.scratch, browser,
        )  # fmt: skip
        setup = {
            "source": call.source,
            "entry": call.entry,
            "own_pid_namespace": self.isolation.own_pid_namespace,
            "scratch": list(SCRATCH),  # emptied after every call
            "browser": browser.setup(self.isolation.name == "bubblewrap") if browser else None,
        }

        # Spares (pool.py) of the command lines most functions share: no network, no browser.
        shape = None if call.network or browser or not self.settings.warm else str(env or "")

        async def start() -> tuple[Worker | None, FunctionResult]:
            if shape is not None:
                spare = self.pool.take_spare(shape)
                self.pool.spare_soon(shape, functools.partial(Worker.launch, launch, limits))
                if spare is not None:
                    worker, result = await spare.begin({**setup, "uid": self.uid()})
                    if worker is not None or result.kind != "sandbox":
                        return worker, result
                    # the spare died waiting (killed from outside): start one of our own
            for attempt in range(_NETWORK_STARTS if call.network else 1):
                if attempt:
                    await asyncio.sleep(_NETWORK_PAUSE * 2 ** (attempt - 1))
                worker, result = await Worker.start(launch, {**setup, "uid": self.uid()}, limits)
                if worker is not None or result.kind != "sandbox":
                    break
            return worker, result

        async with self._slots:  # the call's time starts when it runs, not while it queues
            return await self.pool.call(
                key, start, call.inputs, seconds, self.settings.warm, call.host
            )

    async def unavailable(self) -> str | None:
        """Why user code cannot run here, checked once per runner."""
        if self._checked is None:
            self._checked = asyncio.ensure_future(self._check())
        return await asyncio.shield(self._checked)

    async def _check(self) -> str | None:
        try:
            await self.isolation.check()
        except SandboxUnavailable as exc:
            return str(exc)
        return None

    def uid(self) -> int | None:
        if self.isolation.name != "bubblewrap" or os.geteuid() != 0:
            return None
        return next(self._uids)

    async def close(self) -> None:
        await self.pool.close()


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()
