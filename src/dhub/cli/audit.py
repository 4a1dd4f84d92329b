"""``dhub audit``: who did what, newest first (admins)."""

from __future__ import annotations

import json
from itertools import islice
from typing import Annotated, Any

import typer

from dhub.cli._common import JsonOption, client_from, echo_json, echo_table, reporting_errors, when

MAX_PAGE = 200  # the server's largest page


def audit(
    ctx: typer.Context,
    actor: Annotated[str | None, typer.Option(help="Only what this user did.")] = None,
    target: Annotated[str | None, typer.Option(help="Only what was done to this id.")] = None,
    action: Annotated[
        str | None, typer.Option(help="Only this action (e.g. user.create, token.revoke).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many entries.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Show the audit log, newest first (admins only)."""
    with reporting_errors():
        found = client_from(ctx).iter_audit(
            actor_id=actor, target_id=target, action=action, page_size=min(limit, MAX_PAGE)
        )
        entries = list(islice(found, limit))
    if as_json:
        echo_json(entries)
    elif not entries:
        typer.echo("No audit entries found.")
    else:
        rows = [
            [
                when(e.get("at")),
                str(e.get("actor_id") or ""),
                str(e.get("action") or ""),
                str(e.get("target_id") or ""),
                _change(e),
            ]
            for e in entries
        ]
        echo_table(["WHEN", "ACTOR", "ACTION", "TARGET", "DETAIL"], rows)


def _change(entry: dict[str, Any]) -> str:
    """A short hint of what changed: a member id as is, anything else as compact JSON."""
    value = entry.get("after")
    if value is None:
        value = entry.get("before")
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."
