"""``dhub agents share|unshare|grants|owners|mark|unmark``: who may use an agent.

Registered on the ``dhub agents`` app by ``register``."""

from __future__ import annotations

from typing import Annotated

import typer

from dhub.cli._common import client_from, echo_json, echo_table, reporting_errors
from dhub.client import Agent, ShareScope

AgentArgument = Annotated[str, typer.Argument(metavar="AGENT", help="The agent id (agent.…).")]
PrincipalArgument = Annotated[
    str,
    typer.Argument(metavar="PRINCIPAL", help="A user or group id, or public.all."),
]
MarkingArgument = Annotated[
    str, typer.Argument(metavar="MARKING", help="The marking id (marking.…).")
]


def share(
    ctx: typer.Context,
    agent_id: AgentArgument,
    principal: PrincipalArgument,
    scope: Annotated[
        ShareScope,
        typer.Option(help="viewer: see it; runner: also run it; editor: also change it."),
    ] = "viewer",
) -> None:
    """Share an agent with a user, group or public.all (replaces an earlier scope)."""
    with reporting_errors():
        granted = client_from(ctx).grant(agent_id, principal, scope)
    typer.echo(f"shared {agent_id} with {granted['principal_id']} as {granted['scope']}")


def unshare(ctx: typer.Context, agent_id: AgentArgument, principal: PrincipalArgument) -> None:
    """Stop sharing an agent with a user, group or public.all."""
    with reporting_errors():
        client_from(ctx).revoke_grant(agent_id, principal)
    typer.echo(f"unshared {agent_id} from {principal}")


def grants(
    ctx: typer.Context,
    agent_id: AgentArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the grants as JSON.")] = False,
) -> None:
    """List who an agent is shared with, and how."""
    with reporting_errors():
        found = client_from(ctx).list_grants(agent_id)
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo(f"{agent_id} is not shared with anyone.")
    else:
        rows = [
            [
                str(g.get("principal_id") or ""),
                str(g.get("type") or ""),
                str(g.get("display_name") or ""),
                str(g.get("scope") or ""),
            ]
            for g in found
        ]
        echo_table(["PRINCIPAL", "TYPE", "NAME", "SCOPE"], rows)


def owners(
    ctx: typer.Context,
    agent_id: AgentArgument,
    principals: Annotated[
        list[str],
        typer.Argument(
            metavar="PRINCIPAL...", help="Every owner: user and group ids, or public.all."
        ),
    ],
) -> None:
    """Make exactly these users and groups the agent's owners."""
    with reporting_errors():
        agent = client_from(ctx).set_owners(agent_id, principals)
    shown = [str(o["id"]) if isinstance(o, dict) else str(o) for o in agent.get("owners") or []]
    typer.echo(f"owners of {agent_id}: {', '.join(shown or principals)}")


def mark(ctx: typer.Context, agent_id: AgentArgument, marking_id: MarkingArgument) -> None:
    """Add a marking to an agent: only holders of all its markings may see it."""
    with reporting_errors():
        agent = client_from(ctx).mark_agent(agent_id, marking_id)
    typer.echo(f"marked {agent_id}: {_markings(agent)}")


def unmark(ctx: typer.Context, agent_id: AgentArgument, marking_id: MarkingArgument) -> None:
    """Remove a marking from an agent."""
    with reporting_errors():
        agent = client_from(ctx).unmark_agent(agent_id, marking_id)
    typer.echo(f"unmarked {agent_id}: {_markings(agent)}")


def _markings(agent: Agent) -> str:
    return f"markings {', '.join(agent.get('markings') or []) or '(none)'}"


def register(app: typer.Typer) -> None:
    for command in (share, unshare, grants, owners, mark, unmark):
        app.command()(command)
