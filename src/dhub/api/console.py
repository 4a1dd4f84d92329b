"""The web console (web/, a React app built by `make web` into api/console/): served by the
API process itself at `/`, with its files under `/assets/`. Routing is client-side (URLs
like `/#/runs/<id>`), so nothing else needs a fallback."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

BUILT = Path(__file__).parent / "console"

_NOT_BUILT = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>dhub</title></head><body><main><h1>dhub</h1>
<p>The web console is not built in this installation. Build it with <code>make web</code>
(or start the server with <code>make run</code>, which builds it), then reload.</p>
<p>The API is at <a href="/docs">/docs</a>.</p></main></body></html>"""


def install(app: FastAPI, built: Path = BUILT) -> None:
    """Serve the console's index at `/` and its assets; a page saying how to build it when
    this installation has none."""
    index = built / "index.html"
    if (built / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=built / "assets"), name="console-assets")

    @app.get("/", include_in_schema=False)
    def console() -> Response:  # a thread: the file system is looked at per request
        if index.is_file():
            # The index names hashed assets: it must not be cached, they may be for ever.
            return FileResponse(index, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(_NOT_BUILT)
