"""``dhub agents ...``: manage agents through the API (every command goes via dhub.client).

Every command that takes an agent takes its name or its id (``_common.resolve_agent``)."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from dhub.cli import sharing
from dhub.cli._common import (
    AgentArgument,
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    error_line,
    labelled,
    load_document,
    reporting_errors,
    resolve_agent,
    when,
)

if TYPE_CHECKING:
    from dhub.client import Agent

app = typer.Typer(help="Create, inspect, share and delete agents.", no_args_is_help=True)

MAX_PAGE = 200  # the server's largest page; bigger --limit values just fetch more pages

FileOption = Annotated[
    Path,
    typer.Option(
        "--file", "-f", help="Agent document, JSON or YAML ('-' reads stdin).", dir_okay=False
    ),
]


@app.command()
def apply(ctx: typer.Context, file: FileOption, as_json: JsonOption = False) -> None:
    """Create the agent, or update the one with the same name and folder to match the file.
    A value written ${table:sales} (any kind: table, template, ontology, tool, folder, ...)
    becomes the id of the one resource of that name you can see."""
    with reporting_errors():
        api = client_from(ctx)
        result = api.apply_agent(api.with_ids(load_document(file)))
    agent = result.agent
    message = f"{result.action} {agent['name']} ({agent['id']}, version {agent['version']})"
    done(as_json, message, {"action": result.action, "agent": agent})


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Exactly this name.")] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only agents with this tag (repeatable).")
    ] = None,
    mode: Annotated[Literal["react", "workflow"] | None, typer.Option()] = None,
    input_mode: Annotated[Literal["chat", "event"] | None, typer.Option()] = None,
    type_: Annotated[str | None, typer.Option("--type", help="The agent's type.")] = None,
    folder: Annotated[
        str | None,
        typer.Option(
            "--folder",
            "--folder-id",
            metavar="FOLDER",
            help="Only agents directly in this folder (name or id).",
        ),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection",
            "--collection-id",
            metavar="COLLECTION",
            help="Only agents in this collection, in any of its folders (name or id).",
        ),
    ] = None,
    builtin: Annotated[
        bool | None,
        typer.Option(
            "--builtin/--no-builtin",
            help="Only the built-in agents (shipped with dhub), or only the others.",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Show at most this many (default: all).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the agents you can see, oldest first (the built-ins last)."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.iter_agents(
            q=q,
            name=name,
            tags=tag,
            mode=mode,
            input_mode=input_mode,
            type=type_,
            folder_id=api.resolve_folder(folder)["id"] if folder else None,
            collection_id=api.resolve_collection(collection)["id"] if collection else None,
            is_builtin=builtin,
            page_size=min(limit, MAX_PAGE) if limit else None,
        )
        agents = list(islice(found, limit))
        paths = {} if as_json else api.folder_paths(a["folder_id"] for a in agents
                                                    if a.get("folder_id"))  # fmt: skip
    if as_json:
        echo_json(agents)
    elif not agents:
        typer.echo("No agents found.")
    else:
        headers = ["ID", "NAME", "MODE", "INPUT", "VERSION", "TAGS", "FOLDER"]
        echo_table(headers, [_row(a, paths) for a in agents])


def _row(agent: Agent, paths: dict[str, str]) -> list[str]:
    return [
        str(agent["id"]),
        str(agent.get("name") or ""),
        str(agent.get("mode") or ""),
        str(agent.get("input_mode") or ""),
        str(agent.get("version") or ""),
        ",".join(agent.get("tags") or []),
        _folder(agent, paths, "-"),  # names are unique per folder only
    ]


BUILTIN_FOLDER = "(built-in)"


def _folder(agent: Agent, paths: dict[str, str], top_level: str) -> str:
    """Where the agent sits: its folder (by its path from ``paths``, when the caller can read
    it; else its id), the top level, or with the built-ins (no folder)."""
    if agent.get("is_builtin"):
        return BUILTIN_FOLDER
    folder_id = str(agent.get("folder_id") or "")
    return paths.get(folder_id, folder_id) if folder_id else top_level


@app.command()
def get(
    ctx: typer.Context,
    agent: AgentArgument,
    version: Annotated[
        int | None, typer.Option(min=1, help="Show this earlier version instead.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show an agent: what it is, who owns it, what it is made of (--json: the document)."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        if version is not None:
            found = api.agent_version(found["id"], version)
        folder_id = None if as_json else found.get("folder_id")
        paths = api.folder_paths([folder_id]) if folder_id else {}
    if as_json:
        echo_json(found)
    else:
        echo_detail(_fields(found, paths), _parts(found))


def _fields(agent: Agent, paths: dict[str, str]) -> list[tuple[str, str]]:
    spec = agent.get("agent") or {}
    fields = [
        ("id", str(agent["id"])),
        ("name", str(agent.get("name") or "")),
        ("alias", str(agent.get("alias") or "-")),
        ("description", str(agent.get("description") or "-")),
        ("mode", f"{agent.get('mode')}, input {agent.get('input_mode')}"),
        ("version", f"{agent.get('version')} (updated {when(agent.get('updated_at'))})"),
        ("folder", _folder(agent, paths, "- (top level)")),
        ("your access", _access(agent)),
    ]
    if agent.get("mode") == "react":
        fields.append(("model", f"{spec.get('model_provider')}/{spec.get('model')}"))
    return fields


def _access(agent: Agent) -> str:
    if agent.get("is_builtin"):
        return "read and run (a built-in: `dhub agents copy` makes a copy you can change)"
    return str(agent.get("my_share_scope") or "-")


def _parts(agent: Agent) -> list[tuple[str, list[str]]]:
    owners = [
        str(o.get("id")) if isinstance(o, dict) else str(o) for o in agent.get("owners") or []
    ]
    parts = [
        ("tags", list(agent.get("tags") or [])),
        ("owners", owners),
        ("markings", list(agent.get("markings") or [])),
    ]
    if agent.get("mode") == "workflow":
        nodes = [f"{n.get('id')} ({n.get('type')})" for n in agent.get("nodes") or []]
        return [*parts, ("nodes", nodes)]
    spec = agent.get("agent") or {}
    return [*parts, *((key, _names(spec.get(key))) for key in ("tools", "actors", "roles"))]


def _names(items: Any) -> list[str]:
    """Tools, actors or roles as names: inline ones by name, references by id."""
    out = []
    for item in items or []:
        if isinstance(item, dict):
            out.append(str(item.get("name") or item.get("id") or "?"))
        else:
            out.append(str(item))
    return out


@app.command()
def versions(ctx: typer.Context, agent: AgentArgument, as_json: JsonOption = False) -> None:
    """List an agent's versions (each create or change makes one)."""
    with reporting_errors():
        found = client_from(ctx).agent_versions(agent)
    if as_json:
        echo_json([{"version": v.version, "created_at": v.created_at,
                    "created_by": v.created_by} for v in found])  # fmt: skip
        return
    rows = [[str(v.version), when(v.created_at), v.created_by] for v in found]
    echo_table(["VERSION", "CREATED", "BY"], rows)


@app.command()
def delete(ctx: typer.Context, agent: AgentArgument, as_json: JsonOption = False) -> None:
    """Delete an agent and its versions."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        api.delete_agent(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


@app.command()
def move(
    ctx: typer.Context,
    agent: AgentArgument,
    to: Annotated[
        str | None, typer.Option("--to", metavar="FOLDER", help="Into this folder (name or id).")
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection", metavar="COLLECTION", help="To the top level of this collection."
        ),
    ] = None,
    home: Annotated[bool, typer.Option("--home", help="Into your home folder.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Move an agent to a folder or collection: it inherits that place's owners, grants and
    markings instead (so moving takes what sharing takes)."""
    from dhub.cli.folders import move_to, where

    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        moved = move_to(api, found["id"], to, collection, home)
    done(as_json, f"moved {labelled(moved)} {where(moved)}", moved)


@app.command()
def copy(
    ctx: typer.Context,
    agent: AgentArgument,
    name: Annotated[
        str | None,
        typer.Option(help="The copy's name (default: the agent's, or <name>-copy, -copy-2...)."),
    ] = None,
    folder: Annotated[
        str | None,
        typer.Option("--folder", help="The folder id to put it in (default: where new agents go)."),
    ] = None,
    table: Annotated[
        list[str] | None,
        typer.Option(
            "--table",
            help="A table (name or id) the copy lists instead of the agent's; repeat for more.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Copy an agent you can read (a built-in one too) into one of your own to change."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        tables = [str(api.resolve_table(t)["id"]) for t in table] if table else None
        made = api.copy_agent(str(found["id"]), name=name, folder_id=folder, tables=tables)
    done(as_json, f"copied {labelled(found)} to {labelled(made)}", made)


@app.command()
def export(
    ctx: typer.Context,
    agent: AgentArgument,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", dir_okay=False, help="Write here (default: stdout)."),
    ] = None,
    format_: Annotated[
        Literal["yaml", "json"] | None,
        typer.Option("--format", help="Default: json for a .json file, else yaml."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="For scripts: print the document as JSON, or with -o what was written.",
        ),
    ] = False,
) -> None:
    """Write an agent's document, which `dhub agents apply -f` takes back unchanged."""
    from dhub.domain.yaml_docs import dump  # YAML as the API writes it; not for --help

    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        doc = api.export_agent(str(found["id"]))
    if output is None:
        chosen = "json" if as_json else format_ or "yaml"
    else:
        chosen = format_ or ("json" if output.suffix.lower() == ".json" else "yaml")
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" if chosen == "json" else dump(doc)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"Error: cannot write {output}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    message = f"exported {found['name']} ({found['id']}, version {found['version']}) to {output}"
    written = {"id": found["id"], "name": found["name"], "version": found["version"],
               "file": str(output), "format": chosen}  # fmt: skip
    done(as_json, message, written)


@app.command()
def validate(ctx: typer.Context, file: FileOption, as_json: JsonOption = False) -> None:
    """Check a document without saving it: exit 0 when valid, else print each error, exit 1.
    ${kind:name} placeholders become ids as with `apply`."""
    with reporting_errors():
        api = client_from(ctx)
        result = api.validate_agent(api.with_ids(load_document(file)))
    if as_json:
        errors = [{"loc": e.loc, "message": e.message, "code": e.code} for e in result.errors]
        echo_json({"valid": result.valid, "errors": errors})
    elif result.valid:
        typer.echo(f"{file}: valid")
    else:
        for error in result.errors:
            typer.echo(error_line(error))
    if not result.valid:
        raise typer.Exit(1)


# share, unshare, grants, owners, mark, unmark
sharing.register(app)
