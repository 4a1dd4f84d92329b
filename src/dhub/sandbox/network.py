"""Outbound-only network for functions whose options ask for it (``{"network": true}``).

Sharing the host's network namespace would let a function reach every service listening on the
host's loopback (a database, a cache). Instead the sandbox keeps a network namespace of its own
and slirp4netns connects it to the outside through a user-mode network stack on the host side,
with ``--disable-host-loopback``: the internet and other hosts are reachable, the host's
loopback is not, and the function's own ``127.0.0.1`` is its own.

Sequence: bubblewrap starts with ``--info-fd`` (it reports the sandbox's first process) and
``--block-fd`` (the sandbox waits before running anything); slirp4netns attaches to that
process's namespace and says when the interface is up; then the sandbox is released. slirp4netns
ends with the worker, or with the server (``--exit-fd``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from dataclasses import dataclass, field
from typing import Any

from dhub.sandbox.errors import SandboxUnavailable

# slirp4netns' built-in DNS forwarder; the host's resolv.conf may name a loopback resolver.
RESOLV_CONF = b"nameserver 10.0.2.3\n"
SETUP_SECONDS = 10.0


@dataclass
class Launched:
    """A started sandbox and what lives and dies with it."""

    proc: asyncio.subprocess.Process
    helpers: list[asyncio.subprocess.Process] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # descriptors to close at the end

    async def end(self) -> None:
        for helper in self.helpers:
            with contextlib.suppress(ProcessLookupError):
                helper.kill()
            await helper.wait()
        for fd in self.held:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.held.clear()


async def launch_with_outbound_network(argv: list[str], **options: Any) -> Launched:
    """Start bubblewrap (``argv``, which unshares the network) with the outside reachable."""
    slirp = shutil.which("slirp4netns")
    if slirp is None:
        raise SandboxUnavailable(
            "this function asks for network access, which needs slirp4netns: install the "
            "Debian package 'slirp4netns' (make install does)"
        )
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    dns_r, dns_w = os.pipe()
    os.write(dns_w, RESOLV_CONF)
    os.close(dns_w)
    extra = ["--info-fd", str(info_w), "--block-fd", str(block_r)]
    # /etc first, as isolation.py makes it (traversable by the sandbox's user): made by this
    # first bind instead, it would be root's alone, and on a root server the function could
    # read neither its name servers nor the TLS roots of /etc/ssl.
    extra += ["--perms", "0755", "--dir", "/etc"]
    extra += ["--perms", "0444", "--ro-bind-data", str(dns_r), "/etc/resolv.conf"]
    try:
        proc = await asyncio.create_subprocess_exec(
            argv[0], *extra, *argv[1:],
            pass_fds=(info_w, block_r, dns_r, *options.pop("pass_fds", ())), **options,
        )  # fmt: skip
    finally:
        for fd in (info_w, block_r, dns_r):
            os.close(fd)
    try:
        helper, exit_w = await _attach(slirp, info_r)
        os.write(block_w, b"1")
    except BaseException:  # cancelled (a shutdown), or the network could not be set up
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        # Not proc.wait(): it also waits for the pipes to close, and the sandbox's first
        # process can outlive bubblewrap (killed before it set the child's death signal):
        # holding the pipes, it would keep the wait, and the shutdown, from ever ending.
        # Closing our ends ends it: its supervisor stops when its input closes.
        await reaped(proc, SETUP_SECONDS)
        close_pipes(proc)
        raise
    finally:
        os.close(info_r)
        os.close(block_w)
    return Launched(proc, [helper], [exit_w])


async def _attach(slirp: str, info_r: int) -> tuple[asyncio.subprocess.Process, int]:
    info = await asyncio.wait_for(asyncio.to_thread(_read_all_json, info_r), SETUP_SECONDS)
    if info is None:
        raise SandboxUnavailable("the sandbox ended before its network could be set up")
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    try:
        helper = await asyncio.create_subprocess_exec(
            slirp, "--configure", "--mtu=65520", "--disable-host-loopback",
            "--ready-fd", str(ready_w), "--exit-fd", str(exit_r), str(info["child-pid"]), "tap0",
            pass_fds=(ready_w, exit_r), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        os.close(ready_w)
        os.close(exit_r)
    try:
        ready = await asyncio.wait_for(asyncio.to_thread(os.read, ready_r, 1), SETUP_SECONDS)
    finally:
        os.close(ready_r)
    if ready != b"1":
        with contextlib.suppress(ProcessLookupError):
            helper.kill()
        await helper.wait()
        os.close(exit_w)
        raise SandboxUnavailable("slirp4netns could not set up the sandbox's network")
    return helper, exit_w


async def reaped(proc: asyncio.subprocess.Process, seconds: float) -> int | None:
    """The process's exit code once it has ended, or None after ``seconds``: unlike
    ``proc.wait()``, whatever still holds its pipes."""
    deadline = asyncio.get_running_loop().time() + seconds
    # Polled: asyncio offers no wait for the exit alone (the SDK's stdio client does the same).
    while proc.returncode is None and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return proc.returncode


def close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close the process's transport, and with it its pipes (asyncio keeps a pipe open until
    its reader sees the end of it, which a stray holder of the other end can put off)."""
    transport = getattr(proc, "_transport", None)  # no public handle on it
    if transport is not None:
        transport.close()


def _read_all_json(fd: int) -> dict[str, Any] | None:
    """bubblewrap's info document (it writes it once and keeps the pipe open)."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
        try:
            parsed = json.loads(data)
        except ValueError:
            continue
        return parsed if isinstance(parsed, dict) else None
    return None
