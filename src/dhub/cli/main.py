"""The ``dhub`` command line.

Exit status, for every command: 0 it did what was asked; 1 it could not (the server said no,
an agent name matched none or several, a run failed); 2 the command line or an input file is
unusable; 130 interrupted (Ctrl-C; typer's own mapping of KeyboardInterrupt).

Start-up is kept short: the command modules import only typer and rich at the top, and each
command imports the SDK (httpx), YAML or the server's packages when it runs, so ``dhub
--help`` loads none of them (tests/unit/test_cli_startup.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dhub.cli import (
    agents,
    chat,
    collections,
    folders,
    groups,
    markings,
    mcp_servers,
    ontologies,
    run,
    runs,
    secrets,
    tables,
    tasks,
    templates,
    tokens,
    triggers,
    users,
)
from dhub.cli._common import Connection
from dhub.cli.audit import audit
from dhub.cli.usage import usage

app = typer.Typer(help="dhub: a self-hosted agent platform.", no_args_is_help=True)
app.add_typer(agents.app, name="agents")
app.add_typer(folders.app, name="folders")
app.add_typer(collections.app, name="collections")
app.add_typer(tables.app, name="tables")
app.add_typer(users.app, name="users")
app.add_typer(groups.app, name="groups")
app.add_typer(markings.app, name="markings")
app.add_typer(ontologies.app, name="ontologies")
app.add_typer(tokens.app, name="tokens")
app.add_typer(runs.app, name="runs")
app.add_typer(tasks.app, name="tasks")
app.add_typer(templates.app, name="templates")
app.add_typer(mcp_servers.app, name="mcp-servers")
app.add_typer(secrets.app, name="secrets")
app.add_typer(triggers.app, name="triggers")
app.command()(users.me)
app.command()(audit)
app.command()(usage)
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
    no_worker: Annotated[
        bool,
        typer.Option(
            "--no-worker",
            help="Distributed mode: serve the API only; `dhub worker` processes run the runs.",
        ),
    ] = False,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Distributed mode: runs this process executes at once.")
    ] = 100,
) -> None:
    """Run the API server (embedded SQLite unless DHUB_DATABASE_URL says otherwise). In
    distributed mode (DHUB_EXECUTION=distributed) it also takes run jobs, unless --no-worker."""
    import gc
    import logging
    import sys

    import uvicorn

    from dhub.api.app import create_app
    from dhub.services.runtime import WorkerOptions

    settings = _settings(data_dir=data_dir, examples_dir=examples)
    if no_worker and not settings.distributed:
        raise typer.BadParameter(
            "--no-worker is for distributed mode (DHUB_EXECUTION=distributed with a "
            "postgresql:// DHUB_DATABASE_URL); the embedded server executes its runs itself.",
            param_hint="--no-worker",
        )
    # uvicorn configures only its own loggers; dhub's (examples loaded, errors) go beside them,
    # or all of them through one JSON handler (DHUB_LOG_FORMAT=json, docs/observability.md).
    log_format = _logging()
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migrations applied: not news
    app = create_app(settings, None if no_worker else WorkerOptions(concurrency))
    # Everything imported so far lives as long as the process: keep it out of the collector's
    # generations, and collect young objects less often. Full collections of the start-up heap
    # were the p99 of a fast request (bench/api_latency.py).
    gc.collect()
    gc.freeze()
    gc.set_threshold(7_000, 20, 20)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"dhub: the web console is at http://{shown}:{port}/ (sign in with an API token)",
          file=sys.stderr, flush=True)  # fmt: skip
    log_config = None if log_format == "json" else uvicorn.config.LOGGING_CONFIG
    uvicorn.run(app, host=host, port=port, log_level="info", log_config=log_config)


@app.command()
def worker(
    concurrency: Annotated[
        int, typer.Option(min=1, help="Runs executed at once (they are I/O-bound).")
    ] = 100,
    queues: Annotated[
        list[str] | None, typer.Option("--queues", help="Queues to take jobs from.")
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            min=0, help="On SIGTERM, seconds to let calls under way finish before stopping."
        ),
    ] = 30.0,
    data_dir: Annotated[
        Path | None, typer.Option(help="Data directory (default: $DHUB_DATA_DIR or ./.dhub).")
    ] = None,
) -> None:
    """Run a worker of distributed mode: it takes run jobs from PostgreSQL and executes them
    (DHUB_EXECUTION=distributed, DHUB_DATABASE_URL=postgresql://...). SIGTERM or Ctrl-C stops
    it gracefully: its runs go back to the queue for the other workers."""
    import asyncio
    import logging

    from dhub.services.worker_main import run_worker

    settings = _settings(data_dir=data_dir)
    if not settings.distributed:
        raise typer.BadParameter(
            "dhub worker needs distributed mode: set DHUB_EXECUTION=distributed and "
            "DHUB_DATABASE_URL=postgresql://... (the same as the API processes).",
            param_hint="DHUB_EXECUTION",
        )
    _logging()
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migrations applied: not news
    asyncio.run(run_worker(settings, concurrency, tuple(queues or ()), grace))


def _logging() -> str:
    """The process's log lines, as DHUB_LOG_FORMAT says (text or json); the OTEL_* variables
    checked too (a server or worker starts only with settings it can honour)."""
    from dhub.observability import logs, traces

    try:
        traces.check()
        return logs.configure()
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _settings(**kwargs: Any) -> Any:
    from dhub.settings import Settings

    try:
        return Settings.from_env(**kwargs)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="environment") from exc


def main() -> None:
    """The ``dhub`` script. Commands report the SDK's errors themselves; one that escaped
    would otherwise be a traceback, so it is said here, once, the same way."""
    try:
        app()
    except Exception as exc:
        from dhub.cli._common import error_lines
        from dhub.client import DhubClientError

        if not isinstance(exc, DhubClientError):
            raise
        for line in error_lines(exc):
            typer.echo(line, err=True)
        sys.exit(1)
