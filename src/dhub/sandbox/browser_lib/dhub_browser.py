"""A headless Chromium for tools with ``require_browser: true`` (docs/sandbox.md "Browser tools").

Inside such a tool's sandbox::

    from dhub_browser import browser_page

    def page_title(url: str) -> str:
        with browser_page() as page:
            page.goto(url)
            return page.title()

``browser_page()`` gives a Playwright ``Page`` in a fresh browser context; ``browser()`` gives
the ``Browser`` itself, for several contexts or pages. Both start a Chromium of their own for
the block and close it when the block ends: nothing of one call's browsing (cookies, storage,
cache) reaches the next. The browser runs under the tool's network policy: without
``network: true`` it reaches no host at all.

Playwright's driver (a Node.js process) is started before the tool's source loads and kept for
the worker's later calls, so a call pays for Chromium's start only. The sync API marks its
event loop as running while it is in use; outside the blocks it is not, so the tool's own
``asyncio.run()`` works there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from playwright.sync_api import Browser, Page, Playwright, sync_playwright

__all__ = ["browser", "browser_page"]

EXECUTABLE = "/usr/lib/chromium/chromium"  # the sandbox says which (start)
_state: dict[str, Any] = {"depth": 0}


def start(executable: str | None = None) -> None:
    """Start the driver; the sandbox does, before the tool's source loads."""
    global EXECUTABLE
    if executable:
        EXECUTABLE = executable
    manager = sync_playwright()
    _state["playwright"] = manager.start()
    _state["manager"] = manager
    _state["loop"] = asyncio.events._get_running_loop()
    _pause()


@contextmanager
def browser(**launch: Any) -> Iterator[Browser]:
    """A headless Chromium for the block; ``launch`` goes to Playwright's
    ``chromium.launch()`` (``args``, ``timeout``, ``slow_mo``, ...), its executable is the
    system's."""
    _state["depth"] += 1
    try:
        launched = _playwright().chromium.launch(executable_path=EXECUTABLE, **launch)
        try:
            yield launched
        finally:
            launched.close()
    finally:
        _state["depth"] -= 1
        if not _state["depth"]:
            _pause()


@contextmanager
def browser_page(**context: Any) -> Iterator[Page]:
    """A page in a fresh browser context for the block; ``context`` goes to Playwright's
    ``browser.new_context()`` (``viewport``, ``user_agent``, ``locale``, ...)."""
    with browser() as launched:
        yield launched.new_context(**context).new_page()


def _playwright() -> Playwright:
    """The running driver, started again when it is gone (the worker is replaced after such
    a call: the supervisor keeps only the driver it saw start)."""
    manager = _state.get("manager")
    # No public way to ask whether the driver is still connected: the fiber that runs
    # Playwright's event loop ends when the connection does.
    if manager is None or manager._dispatcher_fiber.dead:
        start()
    asyncio.events._set_running_loop(_state["loop"])
    playwright: Playwright = _state["playwright"]
    return playwright


def _pause() -> None:
    """Playwright's loop is suspended between its calls, not running: say so, so the tool's
    own asyncio code works outside the blocks."""
    asyncio.events._set_running_loop(None)
