"""Tools with ``require_browser``: a headless Chromium in the real sandbox (bubblewrap, the
warm pool, Debian's chromium, Playwright's driver). The page title tool of examples/ reads a
page served by this test on the host, through the outbound network ``network: true`` gives; a
browser tool without network reaches no page of the host at all; the browser tools' limits
hold, and a tool without require_browser keeps the strict ones (docs/sandbox.md "Browser
tools").

One runner serves the whole module: a browser worker's cold start (sandbox, driver) takes
seconds, its warm calls about one.
"""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from dhub.sandbox.browser import CHROMIUM
from dhub.sandbox.runner import FunctionCall, SandboxRunner
from dhub.sandbox.worker import FunctionResult
from tests.conftest import ROOT, sandbox_settings
from tests.integration.test_sandbox_hostile import OUTCOME, _outside_address, gone

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium (make browser-tools)"),
]

EXAMPLE = yaml.safe_load((ROOT / "examples" / "page_title.yaml").read_text())
TITLE_TOOL = next(n for n in EXAMPLE["nodes"] if n["id"] == "title")["config"]["tool"]
PAGE_TITLE = TITLE_TOOL["function"]["source"]
SECONDS = 60  # a cold start on a busy machine, with room


@dataclass
class Site:
    """A page served by this test on the host: its title, and the paths asked for."""

    server: http.server.ThreadingHTTPServer
    title: str
    asked: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def serve(host: str) -> Site:
    title = f"Served by the test {uuid.uuid4().hex[:6]}"

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.asked.append(self.path)
            body = f"<!doctype html><title>{title}</title><p>hello".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    site = Site(http.server.ThreadingHTTPServer((host, 0), Page), title)
    threading.Thread(target=site.server.serve_forever, daemon=True).start()
    return site


@pytest.fixture(scope="module")
def outer() -> Iterator[Site]:
    """A page on every address of the host, its outside one among them."""
    site = serve("0.0.0.0")
    yield site
    site.server.shutdown()
    site.server.server_close()


@pytest.fixture(scope="module")
def inner() -> Iterator[Site]:
    """A page on the host's loopback only, as a local service (a database) listens."""
    site = serve("127.0.0.1")
    yield site
    site.server.shutdown()
    site.server.server_close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runner() -> AsyncIterator[SandboxRunner]:
    runner = SandboxRunner(sandbox_settings(idle_per_key=1))
    yield runner
    await runner.close()


async def call(
    runner: SandboxRunner, source: str, *, browser: bool = True, network: bool = False,
    owner: str = "browser", **inputs: Any,
) -> FunctionResult:  # fmt: skip
    return await runner.call(
        FunctionCall(source, inputs, SECONDS, network=network, owner=owner, browser=browser)
    )


# What a browser makes of each address: the page's title, or Chromium's error.
VISIT = """
import re
from dhub_browser import browser


def visit(urls: list) -> list:
    seen = []
    with browser() as launched:
        for url in urls:
            page = launched.new_page()
            try:
                page.goto(url, timeout=10_000)
                seen.append(page.title())
            except Exception as exc:
                seen.append((re.findall(r"net::\\w+", str(exc)) or [str(exc)])[0])
    return seen
"""


async def test_the_title_tool_reads_a_page_on_the_host_over_its_network(
    runner: SandboxRunner, outer: Site
) -> None:
    """The example's tool, as its options have it (``network: true``): it reaches the host by
    its outside address, as it would reach any other host."""
    assert TITLE_TOOL["require_browser"] is True and TITLE_TOOL["options"] == {"network": True}
    url = f"http://{_outside_address()}:{outer.port}/title"
    result = await call(runner, PAGE_TITLE, network=True, url=url)
    if not result.ok and "ERR_NETWORK_CHANGED" in str(result.message):
        # Chromium saw the sandbox's interface come up while it navigated (seen once in
        # many runs on a loaded machine): the environment's transient, not the tool's; a
        # second call on a settled network must succeed.
        result = await call(runner, PAGE_TITLE, network=True, url=url)
    assert result.ok, result
    assert result.value == {"title": outer.title, "url": url}
    assert "/title" in outer.asked


async def test_with_network_the_browser_still_cannot_reach_the_hosts_loopback(
    runner: SandboxRunner, inner: Site
) -> None:
    """A local service of the host stays out of reach of the browser too: its 127.0.0.1 is
    the sandbox's own, and slirp4netns' way to the host's (10.0.2.2) is cut off."""
    urls = [f"http://127.0.0.1:{inner.port}/", f"http://10.0.2.2:{inner.port}/"]
    result = await call(runner, VISIT, network=True, urls=urls)
    assert result.ok, result
    if "net::ERR_NETWORK_CHANGED" in result.value:
        # Chromium saw the sandbox's interface come up while it navigated (as in the test
        # above; CI met it once here): the host was not reached either way, and a call on a
        # settled network must meet the wall itself.
        assert inner.asked == []
        result = await call(runner, VISIT, network=True, urls=urls)
        assert result.ok, result
    assert result.value == ["net::ERR_CONNECTION_REFUSED", "net::ERR_ADDRESS_UNREACHABLE"]
    assert inner.asked == []


async def test_without_network_the_browser_reaches_no_page_of_the_host(
    runner: SandboxRunner, outer: Site, inner: Site
) -> None:
    outside = f"http://{_outside_address()}:{outer.port}/no-network"
    urls = [outside, f"http://127.0.0.1:{inner.port}/no-network", "data:text/html,<title>own"]
    result = await call(runner, VISIT, urls=urls)
    assert result.ok, result
    # No network at all (Chromium sees none); its loopback is its own; a page that needs no
    # network still opens.
    assert result.value == ["net::ERR_INTERNET_DISCONNECTED", "net::ERR_CONNECTION_REFUSED", "own"]
    assert "/no-network" not in outer.asked + inner.asked


COUNTED = """
import os
from dhub_browser import browser, browser_page

WORKER = os.urandom(8).hex()  # this interpreter's
CALLS = []


def main(leave_open: bool = False, end_driver: bool = False) -> dict:
    CALLS.append(1)
    if leave_open:  # a browser nobody closes
        browser().__enter__().new_page().goto("data:text/html,<title>left")
    if end_driver:  # the driver kept between calls, ended by the tool itself
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) not in (1, os.getpid()):
                os.kill(int(pid), 9)
    with browser_page() as page:
        page.set_content("<title>counted</title>")
        title = page.title()
    return {"calls": len(CALLS), "title": title, "worker": WORKER, "uid": os.getuid()}
"""


async def test_a_warm_worker_serves_later_calls_with_its_driver() -> None:
    """After a browser call the worker is fit for the next (its driver kept, the browser
    ended): with room for two idle workers (the one that served, and the pool's spare), no
    worker is ended, so three calls in turn need two interpreters at most and one of them
    serves two calls or more. Were each one ended after its call, every call would need a new
    one. (With room for one, whether the served worker or the spare is kept depends on which
    is ready first, and three may be needed.)"""
    runner = SandboxRunner(sandbox_settings(idle_per_key=2))
    try:
        results = []
        for _ in range(3):
            results.append(await call(runner, COUNTED, owner="counted"))
            await runner.pool.settle()
    finally:
        await runner.close()
    assert all(r.ok and r.value["title"] == "counted" for r in results), results
    assert len({r.value["worker"] for r in results}) <= 2, results
    assert max(r.value["calls"] for r in results) >= 2, results


async def test_a_browser_left_open_or_a_driver_ended_costs_the_worker_only(
    runner: SandboxRunner,
) -> None:
    """What a call leaves running is ended after it, and the worker with it (every process of
    its user gone). A tool that ends the driver kept for it gets a new one for the call; the
    worker is not reused either. The next call runs."""
    for how in ("leave_open", "end_driver"):
        owner = f"spoiler-{how}"
        spoiled = await call(runner, COUNTED, owner=owner, **{how: True})
        assert spoiled.ok and spoiled.value["title"] == "counted", spoiled
        assert await gone(spoiled.value["uid"], seconds=10), f"{how}: the worker was kept"
        after = await call(runner, COUNTED, owner=owner)
        assert after.ok and after.value["worker"] != spoiled.value["worker"], after


LIMITS = (
    OUTCOME
    + """
import ctypes, mmap, os, resource, sys


def main() -> dict:
    def allocate(size):
        try:
            bytearray(size)
            return "ok"
        except MemoryError:
            return "MemoryError"

    libc = ctypes.CDLL(None, use_errno=True)

    def unshare():
        if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
            raise OSError(ctypes.get_errno(), "unshare")

    def limit(which):
        soft = resource.getrlimit(which)[0]
        return None if soft == resource.RLIM_INFINITY else soft >> 20

    return {
        "address_space_mb": limit(resource.RLIMIT_AS),
        "data_mb": limit(resource.RLIMIT_DATA),
        "processes": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "open_files": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "browser_packages": os.path.isdir("/sandbox/browser"),
        "shared_anonymous": outcome(lambda: mmap.mmap(-1, 1 << 20)),
        "dev_zero": outcome(lambda: open("/dev/zero", "rb").close()),
        "memfd": outcome(lambda: os.close(os.memfd_create("x"))),
        "unshare": outcome(unshare),
        "two_gib": allocate(2 << 30),
    }
"""
)


async def test_a_browser_tool_is_bounded_by_its_writable_memory(runner: SandboxRunner) -> None:
    """V8 needs more address space than RLIMIT_AS could bound, so a browser tool's memory limit
    is RLIMIT_DATA (its share of the memory limit, per process), with no shared memory outside
    its sized files to escape it; namespaces stay refused."""
    result = await call(runner, LIMITS, owner="limits")
    assert result.ok, result
    assert result.value == {
        "address_space_mb": 256 << 10,
        "data_mb": 1536,
        "processes": 256,
        "open_files": 1024,
        "browser_packages": True,
        "shared_anonymous": "EPERM",  # the browser variant of the seccomp filter
        "dev_zero": "EACCES",
        "memfd": "EPERM",
        "unshare": "EPERM",
        "two_gib": "MemoryError",  # past RLIMIT_DATA, well within the address space
    }


async def test_a_tool_without_require_browser_keeps_the_strict_limits(
    runner: SandboxRunner,
) -> None:
    """The same source, without require_browser, on the same runner: the address-space limit,
    the usual process limit and filter, and no browser packages to import."""
    result = await call(runner, LIMITS, owner="limits", browser=False)
    assert result.ok, result
    assert result.value == {
        "address_space_mb": 1536,
        "data_mb": None,
        "processes": 64,
        "open_files": 256,
        "browser_packages": False,
        "shared_anonymous": "ok",
        "dev_zero": "ok",
        "memfd": "EPERM",
        "unshare": "EPERM",
        "two_gib": "MemoryError",
    }
    plain = await call(runner, "import dhub_browser\n\ndef main():\n    pass\n", browser=False)
    assert (plain.kind, plain.error_type) == ("exception", "ModuleNotFoundError"), plain


async def test_without_chromium_a_browser_tool_says_what_to_install() -> None:
    runner = SandboxRunner(sandbox_settings(chromium="/nowhere/chromium"))
    try:
        result = await call(runner, PAGE_TITLE, url="data:text/html,<title>x")
        plain = await call(runner, "def main():\n    return 1\n", browser=False)
    finally:
        await runner.close()
    assert result.kind == "sandbox", result
    assert "requires a browser (require_browser)" in result.message
    assert "no /nowhere/chromium" in result.message and "apt-get install chromium" in result.message
    assert (plain.kind, plain.value) == ("ok", 1)  # other tools are not affected
