"""The ``dhub`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dhub.cli import agents, chat, groups, markings, run, runs, tasks, tokens, users
from dhub.cli._common import Connection
from dhub.cli.audit import audit

app = typer.Typer(help="dhub: a self-hosted agent platform.", no_args_is_help=True)
app.add_typer(agents.app, name="agents")
app.add_typer(users.app, name="users")
app.add_typer(groups.app, name="groups")
app.add_typer(markings.app, name="markings")
app.add_typer(tokens.app, name="tokens")
app.add_typer(runs.app, name="runs")
app.add_typer(tasks.app, name="tasks")
app.command()(users.me)
app.command()(audit)
app.command("run")(run.run_file)
app.command("chat")(chat.chat)


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Server URL (default: $DHUB_URL, else http://127.0.0.1:8000)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="API token (default: $DHUB_TOKEN, else admin.token in $DHUB_DATA_DIR or ./.dhub)."
        ),
    ] = None,
) -> None:
    # Tests inject a ready Client as obj=; otherwise remember the options and let the first
    # command that talks to the server build the client (serve never needs one).
    if ctx.obj is None:
        ctx.obj = Connection(url, token)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    data_dir: Annotated[
        Path | None, typer.Option(help="Data directory (default: $DHUB_DATA_DIR or ./.dhub).")
    ] = None,
    examples: Annotated[
        Path | None,
        typer.Option(help="Load the agents in this directory when the data directory is new."),
    ] = None,
) -> None:
    """Run the API server (embedded SQLite unless DHUB_DATABASE_URL says otherwise)."""
    import gc
    import logging

    import uvicorn

    from dhub.api.app import create_app
    from dhub.settings import Settings

    settings = Settings.from_env(data_dir=data_dir, examples_dir=examples)
    # uvicorn configures only its own loggers; dhub's (examples loaded, errors) go beside them.
    logging.basicConfig(level=logging.INFO, format="%(levelname)-9s %(name)s: %(message)s")
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    app = create_app(settings)
    # Everything imported so far lives as long as the process: keep it out of the collector's
    # generations, and collect young objects less often. Full collections of the start-up heap
    # were the p99 of a fast request (bench/api_latency.py).
    gc.collect()
    gc.freeze()
    gc.set_threshold(7_000, 20, 20)
    uvicorn.run(app, host=host, port=port, log_level="info")


def main() -> None:
    app()
