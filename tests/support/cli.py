"""The ``dhub`` command tree, for tests that must cover every command."""

from __future__ import annotations

from typing import Any

import typer

from dhub.cli.main import app


def commands() -> list[tuple[str, Any]]:
    """Every leaf command of the ``dhub`` app with its path (``agents share``), sorted."""
    return _walk(typer.main.get_command(app), "")


def _walk(group: Any, prefix: str) -> list[tuple[str, Any]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}".strip()
        # typer vendors its own click: a group is whatever has subcommands.
        found += _walk(command, path) if hasattr(command, "commands") else [(path, command)]
    return found
