from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import literal, select

from dhub.api.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(svc: ServicesDep) -> dict[str, str]:
    async with svc.db.read() as conn:
        await conn.execute(select(literal(1)))
    return {"status": "ok"}
