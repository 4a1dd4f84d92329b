"""The layering holds (issue 24, DESIGN.md section 8): the import-linter contracts of
pyproject.toml, and modules small enough to read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600


def test_the_import_contracts_hold() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT / "src", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_every_module_stands_under_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in (ROOT / "src" / "dhub").rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules (at most {MAX_LINES} lines each): {long}"
