"""What the console's browser tests share: Debian's Chromium, run headless by the `playwright`
package (its own browser downloads are not used), and the two widths every page is checked at.
The fixtures (`browser`, `page`, `shots`) are in conftest.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
WAIT = 30_000  # ms: runs start a sandboxed process, the first one takes a moment

Page = Any  # playwright.sync_api.Page (typed loosely: the package is optional here)
