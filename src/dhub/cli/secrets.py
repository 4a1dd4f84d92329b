"""``dhub secrets ...``: secrets (docs/secrets.md), values that MCP servers and other
resources use by reference and nobody reads back. A secret is named by its id or its name.

A value is never an argument: it would stay in the shell's history and in the process list.
``create`` and ``set-value`` read it from stdin when stdin is not a terminal (``... <
token.txt``, or a pipe from a password manager), else ask for it without echoing it.
"""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    fail,
    reporting_errors,
    when,
)
from dhub.cli._containers import Kind, labelled, register_sharing

if TYPE_CHECKING:
    from dhub.client import Client

app = typer.Typer(
    help="Secrets: values other resources use by reference; never shown again once set.",
    no_args_is_help=True,
)

SecretArgument = Annotated[
    str, typer.Argument(metavar="SECRET", help="The secret's name or id (secret.…).")
]


def read_value(prompt: str = "Value") -> str:
    """The value from stdin (one trailing newline dropped), or asked for without echo."""
    if not sys.stdin.isatty():
        value = sys.stdin.read()
        value = value[:-1] if value.endswith("\n") else value
        value = value[:-1] if value.endswith("\r") else value
    else:
        value = getpass.getpass(f"{prompt} (not shown): ")
        if getpass.getpass("Again, to confirm: ") != value:
            fail(["The two values differ: nothing was changed. Try again."])
    if not value:
        fail(["No value given: pipe it into stdin, or type it when asked."])
    return value


def source(found: dict[str, Any]) -> str:
    """Where the value comes from, as a person reads it."""
    if found.get("from_env"):
        return f"env {found['from_env']}"
    return "stored" if found.get("has_value") else "none"


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[
        str | None, typer.Option("--q", help="Substring of the name, alias or description.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the secrets you can see, oldest first (never their values)."""
    with reporting_errors():
        found = list(client_from(ctx).iter_secrets(q=q))
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No secrets found.")
    else:
        rows = [
            [s["id"], s["name"], source(s), str(s.get("version", "")),
             when(s.get("value_updated_at"))]
            for s in found
        ]  # fmt: skip
        echo_table(["ID", "NAME", "VALUE", "VERSION", "VALUE SET"], rows)


@app.command()
def get(ctx: typer.Context, secret: SecretArgument, as_json: JsonOption = False) -> None:
    """Show a secret: where its value comes from, and when it was set (not the value)."""
    with reporting_errors():
        found = client_from(ctx).get_secret(secret)
    if as_json:
        echo_json(found)
        return
    echo_detail(
        [("id", found["id"]), ("name", found["name"]),
         ("description", found.get("description") or "-"), ("value", source(found)),
         ("value set", when(found.get("value_updated_at"))),
         ("version", str(found.get("version", ""))), ("updated", when(found.get("updated_at"))),
         ("your access", str(found.get("my_share_scope") or "-"))],
        [],
    )  # fmt: skip


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The secret's name.")],
    description: Annotated[str, typer.Option(help="What it is for.")] = "",
    from_env: Annotated[
        str | None,
        typer.Option(
            "--from-env",
            help="Admins: read the value from this server environment variable "
            "(DHUB_SECRET_…) whenever it is used, instead of storing one.",
        ),
    ] = None,
    folder: Annotated[str | None, typer.Option(help="The folder's id (folder.…).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Store a secret; its value is read from stdin, or asked for (never an argument)."""
    doc: dict[str, Any] = {"name": name, "description": description}
    if folder:
        doc["folder_id"] = folder
    if from_env:
        doc["from_env"] = from_env
    else:
        doc["value"] = read_value()
    with reporting_errors():
        made = client_from(ctx).create_secret(doc)
    done(as_json, f"created {labelled(made)}", made)


@app.command("set-value")
def set_value(ctx: typer.Context, secret: SecretArgument, as_json: JsonOption = False) -> None:
    """Rotate a secret: its new value is read from stdin, or asked for."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_secret(secret)
    value = read_value("New value")
    with reporting_errors():
        changed = api.update_secret(found["id"], {"value": value, "from_env": None})
    done(as_json, f"set the value of {labelled(changed)} (version {changed['version']})", changed)


@app.command()
def delete(ctx: typer.Context, secret: SecretArgument, as_json: JsonOption = False) -> None:
    """Delete a secret and its value."""
    with reporting_errors():
        api = client_from(ctx)
        found = api.get_secret(secret)
        api.delete_secret(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


class _Secret(Kind):
    """A secret, as the sharing commands find one."""

    def resolve(self, api: Client, ref: str) -> dict[str, Any]:
        return api.get_secret(ref)


# share, unshare, grants, owners, mark, unmark: runner lets others use it, viewer only see it.
register_sharing(app, _Secret("secret"))
