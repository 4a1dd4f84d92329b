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
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

from playwright.sync_api import Browser, Page, Playwright, sync_playwright

__all__ = ["browser", "browser_page"]

EXECUTABLE = "/usr/lib/chromium/chromium"  # the sandbox says which (start)
_state: dict[str, Any] = {"depth": 0}
T = TypeVar("T")


def start(executable: str | None = None) -> None:
    """Start the driver; the sandbox does, before the tool's source loads."""
    global EXECUTABLE
    if executable:
        EXECUTABLE = executable
    _pause()  # a driver that died leaves its loop marked running
    manager = sync_playwright()
    _state["playwright"] = manager.start()
    _state["manager"] = manager
    _state["loop"] = asyncio.events._get_running_loop()
    _pause()


def browser(**launch: Any) -> _Opened[Browser]:
    """A headless Chromium for the ``with`` block; ``launch`` goes to Playwright's
    ``chromium.launch()`` (``args``, ``timeout``, ``slow_mo``, ...), its executable is the
    system's."""
    return _Opened(launch, lambda launched: launched)


def browser_page(**context: Any) -> _Opened[Page]:
    """A page in a fresh browser context, in a Chromium of its own, for the ``with`` block;
    ``context`` goes to Playwright's ``browser.new_context()`` (``viewport``, ``user_agent``,
    ``locale``, ...)."""
    return _Opened({}, lambda launched: launched.new_context(**context).new_page())


class _Opened(Generic[T]):
    """The browser for a ``with`` block. A class, not a generator: one the tool drops without
    leaving the block does nothing when it is collected (closing it then, from inside another
    Playwright call, would hang); what it left running ends with the call."""

    def __init__(self, launch: dict[str, Any], give: Callable[[Browser], T]) -> None:
        self._launch = launch
        self._give = give
        self._browser: Browser | None = None

    def __enter__(self) -> T:
        _state["depth"] += 1
        try:
            try:
                self._browser = self._start()
            except Exception:
                if not _driver_gone():
                    raise
                # The driver died since the last call: a new one for this call (the worker
                # is replaced after it: the supervisor keeps only the driver it saw start).
                start()
                self._browser = self._start()
            return self._give(self._browser)
        except BaseException:
            self._leave()
            raise

    def _start(self) -> Browser:
        return _playwright().chromium.launch(executable_path=EXECUTABLE, **self._launch)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:  # fmt: skip
        self._leave()

    def _leave(self) -> None:
        try:
            if self._browser is not None:
                self._browser.close()
        finally:
            self._browser = None
            _state["depth"] -= 1
            if not _state["depth"]:
                _pause()


def _playwright() -> Playwright:
    """The driver, its event loop marked running for the sync API's calls."""
    if _driver_gone():
        start()
    asyncio.events._set_running_loop(_state["loop"])
    playwright: Playwright = _state["playwright"]
    return playwright


def _driver_gone() -> bool:
    # No public way to ask whether the driver is still connected: its client's close promise
    # settles when the connection ends (seen once a call ran into it).
    manager = _state.get("manager")
    client = getattr(manager, "_client", None)
    return client is None or bool(client._close_promise.done())


def _pause() -> None:
    """Playwright's loop is suspended between its calls, not running: say so, so the tool's
    own asyncio code works outside the blocks."""
    asyncio.events._set_running_loop(None)
