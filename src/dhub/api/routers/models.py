"""/api/v1/models: the model catalog of the configured providers (keys never appear)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from dhub.api.deps import Ctx
from dhub.api.responses import ERROR_RESPONSES, JSON

router = APIRouter(tags=["models"], responses=ERROR_RESPONSES)


class Capabilities(BaseModel):
    tools: bool
    structured_output: bool
    reasoning: bool
    vision: bool


class Model(BaseModel):
    provider: str
    id: str
    context_window: int
    max_output_tokens: int
    capabilities: Capabilities
    reasoning_efforts: list[str] | None
    known: bool


class Provider(BaseModel):
    name: str
    type: str


class ModelList(BaseModel):
    data: list[Model]
    providers: list[Provider]


@router.get("/models", response_model=ModelList)
async def list_models(
    ctx: Ctx,
    provider: str | None = Query(None, description="Only this provider's models."),
) -> JSON:
    """The models of every configured provider: context window, maximum output and
    capabilities. A model not listed can still be named by an agent: its provider's family
    defaults apply (``known: false``), or add it to the providers file."""
    providers = ctx.svc.providers
    models = [m.as_json() for m in providers.catalog() if provider in (None, m.provider)]
    listed: list[dict[str, Any]] = [
        {"name": name, "type": providers.wire(name)}
        for name in providers.names
        if provider in (None, name)
    ]
    return JSON({"data": models, "providers": listed})
