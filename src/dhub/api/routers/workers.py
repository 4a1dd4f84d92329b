"""/api/v1/workers: the worker processes of distributed mode and their heartbeats (admins)."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter
from pydantic import BaseModel

from dhub.api.deps import Ctx
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.domain.ids import now_ms
from dhub.runtime.worker import HEARTBEAT_SECONDS
from dhub.services.principals import require_admin
from dhub.services.runtime import worker_listing

router = APIRouter(tags=["workers"], responses=ERROR_RESPONSES)


class Worker(BaseModel):
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    live_runs: int
    started_at: int
    heartbeat_at: int
    stopping: bool
    alive: bool  # beat within the last three heartbeats


class WorkerList(BaseModel):
    data: list[Worker]
    execution: str  # embedded | distributed


@router.get("/workers", response_model=WorkerList)
async def list_workers(ctx: Ctx) -> JSON:
    """The workers that took jobs lately, oldest first, with their last heartbeat and how
    many runs each had in memory then (admins). Embedded mode has none: the server executes
    its runs itself."""
    require_admin(ctx.who)
    found = await worker_listing(ctx.svc.db)
    fresh = now_ms() - int(3 * HEARTBEAT_SECONDS * 1000)
    data = [{**dataclasses.asdict(w), "alive": w.heartbeat_at >= fresh} for w in found]
    return JSON({"data": data, "execution": "embedded" if ctx.svc.runs.dispatch.holds_new_runs
                 else "distributed"})  # fmt: skip
