"""``dhub me`` and ``dhub users ...``: who you are, and (admins) managing users."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

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
from dhub.cli.tokens import ExpiresOption, NameOption, echo_new_token, expiry

if TYPE_CHECKING:
    from dhub.client import User

app = typer.Typer(help="Create, inspect and delete users (admins).", no_args_is_help=True)

UserArgument = Annotated[str, typer.Argument(metavar="ID", help="The user id (user.…).")]


def me(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show who your token belongs to, its groups and the markings it holds."""
    with reporting_errors():
        found = client_from(ctx).me()
    if as_json:
        echo_json(found)
    else:
        _echo_user(found)


def _echo_user(user: User) -> None:
    fields = [
        ("id", str(user["id"])),
        ("name", str(user.get("display_name") or "")),
        ("email", str(user.get("email") or "-")),
        ("admin", "yes" if user.get("is_admin") else "no"),
        ("created", when(user.get("created_at"))),
    ]
    lists = [(key, list(user[key])) for key in ("groups", "markings") if key in user]
    echo_detail(fields, lists)


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Lowercase name; the id becomes user.NAME.")],
    display_name: Annotated[
        str | None, typer.Option(help="The name people see (default: NAME).")
    ] = None,
    email: Annotated[str | None, typer.Option(help="Email address.")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="Make the user an admin.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Create a user. Give it a token with `dhub users token`."""
    with reporting_errors():
        user = client_from(ctx).create_user(name, display_name or name, email=email, is_admin=admin)
    done(as_json, f"created {user['id']}", user)


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the users."""
    with reporting_errors():
        users = client_from(ctx).list_users()
    if as_json:
        echo_json(users)
        return
    rows = [
        [
            str(u["id"]),
            str(u.get("display_name") or ""),
            str(u.get("email") or "-"),
            "yes" if u.get("is_admin") else "no",
            when(u.get("created_at")),
        ]
        for u in users
    ]
    echo_table(["ID", "NAME", "EMAIL", "ADMIN", "CREATED"], rows)


@app.command()
def get(ctx: typer.Context, user_id: UserArgument, as_json: JsonOption = False) -> None:
    """Show one user."""
    with reporting_errors():
        user = client_from(ctx).get_user(user_id)
    if as_json:
        echo_json(user)
    else:
        _echo_user(user)


@app.command()
def delete(ctx: typer.Context, user_id: UserArgument, as_json: JsonOption = False) -> None:
    """Delete a user (its tokens stop working)."""
    with reporting_errors():
        client_from(ctx).delete_user(user_id)
    done(as_json, f"deleted {user_id}", {"id": user_id, "deleted": True})


@app.command()
def token(
    ctx: typer.Context,
    user_id: UserArgument,
    name: NameOption,
    expires_in_days: ExpiresOption = None,
    as_json: JsonOption = False,
) -> None:
    """Issue an API token for a user and print its secret (shown once)."""
    with reporting_errors():
        issued = client_from(ctx).issue_token(user_id, name, expires_at=expiry(expires_in_days))
    echo_new_token(issued, as_json)
