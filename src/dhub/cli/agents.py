"""``dhub agents ...``: manage agents through the API (every command goes via dhub.client)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Annotated, Literal

import typer

from dhub.cli import sharing
from dhub.cli._common import (
    client_from,
    echo_json,
    echo_table,
    error_line,
    load_document,
    reporting_errors,
    resolve_agent,
)
from dhub.client import Agent
from dhub.domain.yaml_docs import dump

app = typer.Typer(help="Create, inspect, share and delete agents.", no_args_is_help=True)

MAX_PAGE = 200  # the server's largest page; bigger --limit values just fetch more pages

FileOption = Annotated[
    Path,
    typer.Option(
        "--file", "-f", help="Agent document, JSON or YAML ('-' reads stdin).", dir_okay=False
    ),
]


@app.command()
def apply(ctx: typer.Context, file: FileOption) -> None:
    """Create the agent, or update the one with the same name and folder to match the file."""
    with reporting_errors():
        result = client_from(ctx).apply_agent(load_document(file))
    agent = result.agent
    typer.echo(f"{result.action} {agent['name']} ({agent['id']}, version {agent['version']})")


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only agents with this tag (repeatable).")
    ] = None,
    mode: Annotated[Literal["react", "workflow"] | None, typer.Option()] = None,
    input_mode: Annotated[Literal["chat", "event"] | None, typer.Option()] = None,
    type_: Annotated[str | None, typer.Option("--type", help="The agent's type.")] = None,
    folder_id: Annotated[str | None, typer.Option()] = None,
    collection_id: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Show at most this many (default: all).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the agents as a JSON array.")
    ] = False,
) -> None:
    """List the agents you can see, oldest first."""
    with reporting_errors():
        found = client_from(ctx).iter_agents(
            q=q,
            tags=tag,
            mode=mode,
            input_mode=input_mode,
            type=type_,
            folder_id=folder_id,
            collection_id=collection_id,
            page_size=min(limit, MAX_PAGE) if limit else None,
        )
        agents = list(islice(found, limit))
    if as_json:
        echo_json(agents)
    elif not agents:
        typer.echo("No agents found.")
    else:
        echo_table(["ID", "NAME", "MODE", "INPUT", "VERSION", "TAGS"], [_row(a) for a in agents])


def _row(agent: Agent) -> list[str]:
    return [
        str(agent["id"]),
        str(agent.get("name") or ""),
        str(agent.get("mode") or ""),
        str(agent.get("input_mode") or ""),
        str(agent.get("version") or ""),
        ",".join(agent.get("tags") or []),
    ]


@app.command()
def get(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent id (agent.…).")],
    version: Annotated[
        int | None, typer.Option(min=1, help="Show this earlier version instead.")
    ] = None,
) -> None:
    """Print an agent as JSON."""
    with reporting_errors():
        api = client_from(ctx)
        agent = api.get_agent(agent_id) if version is None else api.agent_version(agent_id, version)
    echo_json(agent)


@app.command()
def versions(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent id (agent.…).")],
) -> None:
    """List an agent's versions (each create or change makes one)."""
    with reporting_errors():
        found = client_from(ctx).agent_versions(agent_id)
    rows = [[str(v.version), _when(v.created_at), v.created_by] for v in found]
    echo_table(["VERSION", "CREATED", "BY"], rows)


def _when(unix_ms: int) -> str:
    return datetime.fromtimestamp(unix_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@app.command()
def delete(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="The agent id (agent.…).")],
) -> None:
    """Delete an agent and its versions."""
    with reporting_errors():
        client_from(ctx).delete_agent(agent_id)
    typer.echo(f"deleted {agent_id}")


@app.command()
def export(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID_OR_NAME", help="The agent's id or name.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", dir_okay=False, help="Write here (default: stdout)."),
    ] = None,
    format_: Annotated[
        Literal["yaml", "json"] | None,
        typer.Option("--format", help="Default: json for a .json file, else yaml."),
    ] = None,
) -> None:
    """Write an agent's document, which `dhub agents apply -f` takes back unchanged."""
    with reporting_errors():
        api = client_from(ctx)
        agent = resolve_agent(api, ref)
        doc = api.export_agent(str(agent["id"]))
    chosen = format_ or ("json" if output and output.suffix.lower() == ".json" else "yaml")
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" if chosen == "json" else dump(doc)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"Error: cannot write {output}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"exported {agent['name']} ({agent['id']}, version {agent['version']}) to {output}")


@app.command()
def validate(ctx: typer.Context, file: FileOption) -> None:
    """Check a document without saving it: exit 0 when valid, else print each error, exit 1."""
    with reporting_errors():
        result = client_from(ctx).validate_agent(load_document(file))
    if result.valid:
        typer.echo(f"{file}: valid")
        return
    for error in result.errors:
        typer.echo(error_line(error))
    raise typer.Exit(1)


# share, unshare, grants, owners, mark, unmark
sharing.register(app)
