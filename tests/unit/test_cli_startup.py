"""`dhub --help` stays fast: it imports typer and rich, not the SDK's httpx, YAML, pydantic
or the server's packages (each command imports what it needs when it runs). In a fresh
interpreter, since this one has imported everything already.

Below the top level, pydantic is imported whatever dhub does: typer (0.29) checks every
parameter value it parses (the root's --url and --token included) with a pydantic
TypeAdapter, so the other --help pages are allowed that one."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from dhub.cli._common import RunStatus, ShareScope
from dhub.client import RunStatus as SdkRunStatus
from dhub.client import ShareScope as SdkShareScope

HEAVY = ("httpx", "yaml", "pydantic", "sqlalchemy", "fastapi", "jinja2", "jsonschema")
SERVER = ("dhub.client", "dhub.api", "dhub.store", "dhub.services", "dhub.engine", "dhub.runtime",
          "dhub.domain", "dhub.sandbox", "dhub.providers", "dhub.cli._live")  # fmt: skip


def imported_by(*argv: str) -> list[str]:
    probe = (
        "import sys\nfrom dhub.cli.main import app\n"
        f"try:\n    app({list(argv)!r})\nexcept SystemExit:\n    pass\n"
        "print('\\n'.join(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return [m for m in done.stdout.splitlines() if m.split(".")[0] in HEAVY or m.startswith(SERVER)]


def test_help_imports_nothing_heavy() -> None:
    assert imported_by("--help") == []


@pytest.mark.parametrize(
    "argv", [["agents", "--help"], ["runs", "start", "--help"], ["run", "--help"]]
)
def test_a_commands_help_imports_only_what_typer_does(argv: list[str]) -> None:
    assert [m for m in imported_by(*argv) if m.split(".")[0] != "pydantic"] == []


def test_the_cli_literals_are_the_sdks() -> None:
    # Spelled out in the CLI so that typer can read signatures without importing the SDK.
    assert get_args(RunStatus) == get_args(SdkRunStatus)
    assert get_args(ShareScope) == get_args(SdkShareScope)
