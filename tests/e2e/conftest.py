"""Fixtures of the console's browser tests (test_console*.py): one headless Chromium per
module, a fresh context per test that fails the test on any uncaught error in the page, and a
directory for the screenshots (`pytest -s` prints where)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, LAPTOP, WAIT, Page


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("console-screenshots")
    print(f"\nconsole screenshots: {where}")
    return where


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    import playwright.sync_api as playwright_api  # only the browser tests need it

    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    context = browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(WAIT)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"
