"""The ``dhub`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="dhub: a self-hosted agent platform.", no_args_is_help=True)


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
    import uvicorn

    from dhub.api.app import create_app
    from dhub.settings import Settings

    settings = Settings.from_env(data_dir=data_dir, examples_dir=examples)
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


def main() -> None:
    app()
