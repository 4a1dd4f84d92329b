"""An app on a real socket (uvicorn in a thread), for clients that speak HTTP to it: a CLI
in another process, the MCP SDK's client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from tests.e2e.test_serve import free_port


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """The app's base URL while it serves (its lifespan started); stopped afterwards."""
    server = uvicorn.Server(uvicorn.Config(app, port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(30)
