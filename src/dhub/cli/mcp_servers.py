"""``dhub mcp-servers ...``: the MCP servers agents take tools from (docs/mcp.md "Using MCP
servers' tools"). A server is named by its id or its name. Secret values in headers and env
are references (``{"secret": "secret.…"}``) and are shown as such: no answer holds one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    load_document,
    reporting_errors,
    when,
)

if TYPE_CHECKING:
    from dhub.client import McpTool

app = typer.Typer(
    help="MCP servers: the tools of Model Context Protocol servers, for agents.",
    no_args_is_help=True,
)

ServerArgument = Annotated[
    str, typer.Argument(metavar="SERVER", help="The MCP server's name or id (mcp_server.…).")
]


def where(server: dict[str, Any]) -> str:
    """How dhub reaches it: the URL, or the program it starts."""
    if server.get("transport") == "streamable_http":
        return str(server.get("url") or "")
    if server.get("command"):
        return " ".join([server["command"], *server.get("args", [])])
    return "(its source)"


def shown_value(value: Any) -> str:
    """A header's or variable's value; a secret as the reference it is."""
    if isinstance(value, dict) and "secret" in value:
        return f"{{secret: {value['secret']}}}"
    return str(value)


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the MCP servers you can see, oldest first."""
    with reporting_errors():
        found = list(client_from(ctx).iter_mcp_servers(q=q))
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No MCP servers found.")
    else:
        rows = [
            [s["id"], s["name"], s.get("transport", ""), str(s.get("version", "")), where(s)]
            for s in found
        ]
        echo_table(["ID", "NAME", "TRANSPORT", "VERSION", "WHERE"], rows)


@app.command()
def get(ctx: typer.Context, server: ServerArgument, as_json: JsonOption = False) -> None:
    """Show an MCP server: how it is reached, and what agents may use of it."""
    with reporting_errors():
        found = client_from(ctx).get_mcp_server(server)
    if as_json:
        echo_json(found)
        return
    allowed = found.get("allowed_tools")
    fields = [
        ("id", found["id"]), ("name", found["name"]),
        ("transport", found.get("transport", "")), ("where", where(found)),
        ("version", str(found.get("version", ""))), ("updated", when(found.get("updated_at"))),
        ("timeout", f"{found.get('timeout', '')} s"),
    ]  # fmt: skip
    if found.get("transport") == "stdio":
        fields.append(("network", "yes" if found.get("network") else "no"))
    values = {**(found.get("headers") or {}), **(found.get("env") or {})}
    echo_detail(
        fields,
        [("allowed tools", ["(all)"] if allowed is None else list(allowed)),
         ("headers" if found.get("transport") == "streamable_http" else "env",
          [f"{k}: {shown_value(v)}" for k, v in values.items()])],
    )  # fmt: skip


@app.command()
def create(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="An MCP server document (JSON or YAML; - for stdin).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Store an MCP server from a file: name, transport, and its url or command."""
    with reporting_errors():
        made = client_from(ctx).create_mcp_server(load_document(file))
    done(as_json, f"created {made['id']} ({made['name']})", made)


@app.command()
def delete(ctx: typer.Context, server: ServerArgument, as_json: JsonOption = False) -> None:
    """Delete an MCP server."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_mcp_server(server)
        api.delete_mcp_server(found["id"])
    done(as_json, f"deleted {found['name']} ({found['id']})", {"id": found["id"], "deleted": True})


@app.command()
def tools(
    ctx: typer.Context,
    server: ServerArgument,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Ask the server again instead of the cached list.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List the tools an MCP server offers agents (needs run access to it)."""
    with reporting_errors():
        offered = client_from(ctx).mcp_server_tools(server, refresh=refresh)
    if as_json:
        echo_json({"data": [_tool_json(t) for t in offered.tools], "server": offered.server})
    elif not offered.tools:
        typer.echo("This server offers no tools.")
    else:
        rows = [
            [t.name, _parameters(t.input_schema), _first_line(t.description)] for t in offered.tools
        ]
        echo_table(["NAME", "PARAMETERS", "DESCRIPTION"], rows)


def _tool_json(tool: McpTool) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(tool)


def _parameters(schema: dict[str, Any]) -> str:
    """``city, days?``: the tool's parameters, optional ones marked."""
    required = set(schema.get("required") or [])
    names = list((schema.get("properties") or {}).keys())
    return ", ".join(n if n in required else f"{n}?" for n in names)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
