"""``dhub tokens ...``: your API tokens (admins: anyone's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_json,
    echo_table,
    reporting_errors,
    when,
)

if TYPE_CHECKING:
    from dhub.client import Token

app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)

NameOption = Annotated[
    str, typer.Option("--name", help="What the token is for (e.g. 'laptop', 'ci').")
]
ExpiresOption = Annotated[
    int | None,
    typer.Option("--expires-in-days", min=1, help="Stop working after this many days."),
]


def expiry(days: int | None) -> datetime | None:
    return None if days is None else datetime.now(UTC) + timedelta(days=days)


def echo_new_token(token: Token, as_json: bool = False) -> None:
    """The secret alone on stdout (so ``$(dhub tokens create ...)`` captures just it), or
    (``as_json``) the whole token with it; what it is, with the warning that it is shown
    once, on stderr."""
    typer.echo(
        f"Created token {token['id']} ({token['name']}) for {token['user_id']}, "
        f"expires {when(token.get('expires_at'), 'never')}.",
        err=True,
    )
    typer.echo(
        "This secret is shown only once and cannot be retrieved again; store it now:", err=True
    )
    if as_json:
        echo_json(token)
    else:
        typer.echo(token["token"])


def status(token: Token, now_ms: int) -> str:
    if token.get("revoked_at") is not None:
        return "revoked"
    expires = token.get("expires_at")
    if expires is not None and expires <= now_ms:
        return "expired"
    return "active"


@app.command()
def create(
    ctx: typer.Context,
    name: NameOption,
    expires_in_days: ExpiresOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token for yourself and print its secret (shown once)."""
    with reporting_errors():
        token = client_from(ctx).create_token(name, expires_at=expiry(expires_in_days))
    echo_new_token(token, as_json)


@app.command("list")
def list_(
    ctx: typer.Context,
    user: Annotated[
        str | None, typer.Option("--user", help="Another user's tokens (admins only).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List tokens (never their secrets)."""
    with reporting_errors():
        tokens = client_from(ctx).list_tokens(user)
    if as_json:
        echo_json(tokens)
        return
    if not tokens:
        typer.echo("No tokens found.")
        return
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    rows = [
        [
            str(t["id"]),
            str(t["name"]),
            str(t["user_id"]),
            when(t.get("created_at")),
            when(t.get("expires_at"), "never"),
            status(t, now_ms),
        ]
        for t in tokens
    ]
    echo_table(["ID", "NAME", "USER", "CREATED", "EXPIRES", "STATUS"], rows)


@app.command()
def revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token id (token.…).")],
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: it stops working at once."""
    with reporting_errors():
        client_from(ctx).revoke_token(token_id)
    done(as_json, f"revoked {token_id}", {"id": token_id, "revoked": True})
