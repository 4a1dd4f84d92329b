"""The baseline for bench/api_latency.py: a bare FastAPI app serving precomputed JSON.

It has the same two routes as dhub (``GET /api/v1/agents/{agent_id}`` and
``GET /api/v1/agents?limit=N``) with the same path and query parameter parsing, and answers
with the exact bytes dhub returned for them, read once at start-up. It has no auth, no
database and no rendering, so the difference to dhub is dhub's own per-request cost.

It is served exactly the way ``dhub serve`` serves dhub: ``uvicorn.run(app, host=..., port=...,
log_level="info")`` in one process (uvicorn's defaults otherwise: uvloop and httptools when
installed, access log on).

    python bench/bare_app.py --port 8801 --get-body one.json --list-body list.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Query, Response


def create_app(get_body: bytes, list_body: bytes) -> FastAPI:
    app = FastAPI(title="bare")

    @app.get("/api/v1/agents/{agent_id}")
    async def get_agent(agent_id: str) -> Response:
        return Response(get_body, media_type="application/json")

    @app.get("/api/v1/agents")
    async def list_agents(limit: Annotated[int, Query(ge=1, le=200)] = 50) -> Response:
        return Response(list_body, media_type="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--get-body", type=Path, required=True)
    parser.add_argument("--list-body", type=Path, required=True)
    args = parser.parse_args()

    import uvicorn

    app = create_app(args.get_body.read_bytes(), args.list_body.read_bytes())
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
