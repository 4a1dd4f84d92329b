"""``dhub usage``: tokens and cost summed over runs (GET /api/v1/usage)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dhub.cli._common import JsonOption, client_from, echo_json, echo_table, reporting_errors

_COUNTS = ("calls", "input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")


def usage(
    ctx: typer.Context,
    agent: Annotated[
        str | None, typer.Option(help="Only this agent's runs (its id or name).")
    ] = None,
    user: Annotated[str | None, typer.Option(help="Only the runs this user started.")] = None,
    since: Annotated[
        str | None,
        typer.Option("--from", help="Runs created at or after this ISO 8601 time (UTC if bare)."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help="Runs created before this ISO 8601 time.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show what runs used and cost: in total and by model (your runs, an agent's with --agent;
    admins: everyone's)."""
    with reporting_errors():
        found = client_from(ctx).usage(agent, user_id=user, since=since, until=until)
    if as_json:
        echo_json(found)
        return
    typer.echo(f"{found.get('runs', 0)} runs, {found.get('calls', 0)} model calls, "
               f"{found.get('total_tokens', 0)} tokens, cost {_cost(found)}")  # fmt: skip
    models: dict[str, dict[str, Any]] = found.get("by_model") or {}
    if models:
        rows = [[name, *(str(m.get(k, 0)) for k in _COUNTS), _cost(m)]
                for name, m in sorted(models.items())]  # fmt: skip
        echo_table(["MODEL", "CALLS", "INPUT", "OUTPUT", "REASONING", "CACHED", "COST"], rows)


def _cost(totals: dict[str, Any]) -> str:
    """US dollars, or why there is no figure (a model without a price)."""
    cost = totals.get("cost_usd")
    if cost is None:
        return "unknown" + (f" ({totals['cost_note']})" if totals.get("cost_note") else "")
    return f"${cost:.6f}".rstrip("0").rstrip(".") if cost else "$0"
