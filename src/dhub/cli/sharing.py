"""``dhub agents share|unshare|grants|owners|mark|unmark``: who may use an agent.

Registered on the ``dhub agents`` app by ``register``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dhub.cli._common import (
    AgentArgument,
    JsonOption,
    ShareScope,
    client_from,
    done,
    echo_json,
    echo_table,
    labelled,
    reporting_errors,
    resolve_agent,
)

if TYPE_CHECKING:
    from dhub.client import Agent
PrincipalArgument = Annotated[
    str,
    typer.Argument(metavar="PRINCIPAL", help="A user or group id, or public.all."),
]
MarkingArgument = Annotated[
    str, typer.Argument(metavar="MARKING", help="The marking id (marking.…).")
]


def share(
    ctx: typer.Context,
    agent: AgentArgument,
    principal: PrincipalArgument,
    scope: Annotated[
        ShareScope,
        typer.Option(help="viewer: see it; runner: also run it; editor: also change it."),
    ] = "viewer",
    as_json: JsonOption = False,
) -> None:
    """Share an agent with a user, group or public.all (replaces an earlier scope)."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        granted = api.grant(found["id"], principal, scope)
    message = f"shared {labelled(found)} with {granted['principal_id']} as {granted['scope']}"
    done(as_json, message, granted)


def unshare(
    ctx: typer.Context,
    agent: AgentArgument,
    principal: PrincipalArgument,
    as_json: JsonOption = False,
) -> None:
    """Stop sharing an agent with a user, group or public.all."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        api.revoke_grant(found["id"], principal)
    result = {"agent_id": found["id"], "principal_id": principal, "unshared": True}
    done(as_json, f"unshared {labelled(found)} from {principal}", result)


def grants(ctx: typer.Context, agent: AgentArgument, as_json: JsonOption = False) -> None:
    """List who an agent is shared with, and how."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        granted = api.list_grants(found["id"])
    if as_json:
        echo_json(granted)
    elif not granted:
        typer.echo(f"{labelled(found)} is not shared with anyone.")
    else:
        rows = [
            [
                str(g.get("principal_id") or ""),
                str(g.get("type") or ""),
                str(g.get("display_name") or ""),
                str(g.get("scope") or ""),
            ]
            for g in granted
        ]
        echo_table(["PRINCIPAL", "TYPE", "NAME", "SCOPE"], rows)


def owners(
    ctx: typer.Context,
    agent: AgentArgument,
    principals: Annotated[
        list[str],
        typer.Argument(
            metavar="PRINCIPAL...", help="Every owner: user and group ids, or public.all."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Make exactly these users and groups the agent's owners."""
    with reporting_errors():
        api = client_from(ctx)
        changed = api.set_owners(resolve_agent(api, agent)["id"], principals)
    shown = [str(o["id"]) if isinstance(o, dict) else str(o) for o in changed.get("owners") or []]
    done(as_json, f"owners of {labelled(changed)}: {', '.join(shown or principals)}", changed)


def mark(
    ctx: typer.Context,
    agent: AgentArgument,
    marking_id: MarkingArgument,
    as_json: JsonOption = False,
) -> None:
    """Add a marking to an agent: only holders of all its markings may see it."""
    with reporting_errors():
        api = client_from(ctx)
        changed = api.mark_agent(resolve_agent(api, agent)["id"], marking_id)
    done(as_json, f"marked {labelled(changed)}: {_markings(changed)}", changed)


def unmark(
    ctx: typer.Context,
    agent: AgentArgument,
    marking_id: MarkingArgument,
    as_json: JsonOption = False,
) -> None:
    """Remove a marking from an agent."""
    with reporting_errors():
        api = client_from(ctx)
        changed = api.unmark_agent(resolve_agent(api, agent)["id"], marking_id)
    done(as_json, f"unmarked {labelled(changed)}: {_markings(changed)}", changed)


def _markings(agent: Agent) -> str:
    return f"markings {', '.join(agent.get('markings') or []) or '(none)'}"


def register(app: typer.Typer) -> None:
    for command in (share, unshare, grants, owners, mark, unmark):
        app.command()(command)
