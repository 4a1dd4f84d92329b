"""``dhub groups ...``: groups of users (and of other groups)."""

from __future__ import annotations

from typing import Annotated

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    reporting_errors,
    when,
)

app = typer.Typer(help="Create groups and manage their members (admins).", no_args_is_help=True)

GroupArgument = Annotated[str, typer.Argument(metavar="GROUP", help="The group id (group.…).")]
PrincipalArgument = Annotated[
    str,
    typer.Argument(metavar="PRINCIPAL", help="A user or group id, or public.all."),
]


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Lowercase name; the id becomes group.NAME.")],
    display_name: Annotated[
        str | None, typer.Option(help="The name people see (default: NAME).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a group."""
    with reporting_errors():
        group = client_from(ctx).create_group(name, display_name or name)
    done(as_json, f"created {group['id']}", group)


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the groups."""
    with reporting_errors():
        groups = client_from(ctx).list_groups()
    if as_json:
        echo_json(groups)
        return
    rows = [
        [str(g["id"]), str(g.get("display_name") or ""), when(g.get("created_at"))] for g in groups
    ]
    echo_table(["ID", "NAME", "CREATED"], rows)


@app.command()
def get(ctx: typer.Context, group_id: GroupArgument, as_json: JsonOption = False) -> None:
    """Show a group and its direct members."""
    with reporting_errors():
        group = client_from(ctx).get_group(group_id)
    if as_json:
        echo_json(group)
        return
    echo_detail(
        [
            ("id", str(group["id"])),
            ("name", str(group.get("display_name") or "")),
            ("created", when(group.get("created_at"))),
        ],
        [("members", list(group.get("members") or []))],
    )


@app.command("add-member")
def add_member(
    ctx: typer.Context,
    group_id: GroupArgument,
    principal: PrincipalArgument,
    as_json: JsonOption = False,
) -> None:
    """Add a user, a group or public.all to a group."""
    with reporting_errors():
        group = client_from(ctx).add_member(group_id, principal)
    done(as_json, f"added {principal} to {group_id}", group)


@app.command("remove-member")
def remove_member(
    ctx: typer.Context,
    group_id: GroupArgument,
    principal: PrincipalArgument,
    as_json: JsonOption = False,
) -> None:
    """Remove a direct member from a group."""
    with reporting_errors():
        client_from(ctx).remove_member(group_id, principal)
    result = {"group_id": group_id, "principal_id": principal, "removed": True}
    done(as_json, f"removed {principal} from {group_id}", result)


@app.command()
def delete(ctx: typer.Context, group_id: GroupArgument, as_json: JsonOption = False) -> None:
    """Delete a group."""
    with reporting_errors():
        client_from(ctx).delete_group(group_id)
    done(as_json, f"deleted {group_id}", {"id": group_id, "deleted": True})
