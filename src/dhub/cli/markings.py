"""``dhub markings ...``: markings restrict who may see an agent to the holders."""

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

app = typer.Typer(help="Create markings and manage who holds them.", no_args_is_help=True)

MarkingArgument = Annotated[
    str, typer.Argument(metavar="MARKING", help="The marking id (marking.…).")
]
PrincipalArgument = Annotated[
    str,
    typer.Argument(metavar="PRINCIPAL", help="A user or group id, or public.all."),
]


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Lowercase name; the id becomes marking.NAME.")],
    description: Annotated[str | None, typer.Option(help="What the marking protects.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a marking (admins)."""
    with reporting_errors():
        marking = client_from(ctx).create_marking(name, description)
    done(as_json, f"created {marking['id']}", marking)


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the markings (admins: all; others: the ones they hold)."""
    with reporting_errors():
        markings = client_from(ctx).list_markings()
    if as_json:
        echo_json(markings)
        return
    rows = [
        [str(m["id"]), str(m.get("description") or ""), str(m.get("created_by") or "")]
        for m in markings
    ]
    echo_table(["ID", "DESCRIPTION", "CREATED BY"], rows)


@app.command()
def get(ctx: typer.Context, marking_id: MarkingArgument, as_json: JsonOption = False) -> None:
    """Show a marking and who holds it."""
    with reporting_errors():
        marking = client_from(ctx).get_marking(marking_id)
    if as_json:
        echo_json(marking)
        return
    echo_detail(
        [
            ("id", str(marking["id"])),
            ("description", str(marking.get("description") or "")),
            ("created by", str(marking.get("created_by") or "")),
            ("created", when(marking.get("created_at"))),
        ],
        [("members", list(marking.get("members") or []))],
    )


@app.command("add-member")
def add_member(
    ctx: typer.Context,
    marking_id: MarkingArgument,
    principal: PrincipalArgument,
    as_json: JsonOption = False,
) -> None:
    """Let a user or group (or public.all) hold a marking."""
    with reporting_errors():
        marking = client_from(ctx).add_marking_member(marking_id, principal)
    done(as_json, f"added {principal} to {marking_id}", marking)


@app.command("remove-member")
def remove_member(
    ctx: typer.Context,
    marking_id: MarkingArgument,
    principal: PrincipalArgument,
    as_json: JsonOption = False,
) -> None:
    """Take a marking away from a user or group."""
    with reporting_errors():
        client_from(ctx).remove_marking_member(marking_id, principal)
    result = {"marking_id": marking_id, "principal_id": principal, "removed": True}
    done(as_json, f"removed {principal} from {marking_id}", result)
