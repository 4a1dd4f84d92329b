from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import literal, select

from dhub.api.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(svc: ServicesDep) -> dict[str, str]:
    """Liveness: the process answers and reaches its database."""
    async with svc.db.read() as conn:
        await conn.execute(select(literal(1)))
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, svc: ServicesDep) -> Response:
    """Readiness, for a load balancer: the database answers and, in distributed mode, the
    run queue too (jobs can be deferred); 503 naming what is not ready otherwise."""
    problems: dict[str, str] = {}
    try:
        async with svc.db.read() as conn:
            await conn.execute(select(literal(1)))
    except Exception as exc:
        problems["database"] = f"unreachable: {exc.__class__.__name__}"
    queue = getattr(request.app.state, "runtime", None)
    queue = queue.queue if queue is not None else None
    if queue is not None and "database" not in problems:
        try:
            await queue.check()
        except Exception as exc:
            problems["queue"] = f"not usable: {exc.__class__.__name__}: {exc}"
    if problems:
        return JSONResponse({"status": "unavailable", "problems": problems}, status_code=503)
    return JSONResponse({"status": "ready", "execution": "distributed" if queue else "embedded"})
