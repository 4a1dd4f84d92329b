"""/api/v1/models: the model catalog of the configured providers (keys never appear);
/api/v1/providers/{name}: what answers for a provider name (an entry, or the demo model)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

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


class DemoModel(BaseModel):
    enabled: bool = Field(description="The demo model answers for every provider not configured")
    model: str = Field("demo", description="The model name its answers carry in their usage")


class ModelList(BaseModel):
    data: list[Model]
    providers: list[Provider]
    demo_model: DemoModel


class ResolvedProvider(BaseModel):
    name: str
    configured: bool = Field(description="An entry of the server's configuration has this name")
    type: str | None = Field(
        description="openai, anthropic, openai_compatible, scripted; demo when the demo model "
        "answers for it; null when nothing does (its calls fail, saying what to set)"
    )
    demo: bool = Field(description="The demo model answers for it")
    configure: str | None = Field(
        description="How to make it a real provider (null when configured), e.g. "
        "'set DHUB_OPENAI_API_KEY'"
    )


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
    demo = {"enabled": providers.demo, "model": "demo"}
    return JSON({"data": models, "providers": listed, "demo_model": demo})


@router.get("/providers/{name}", response_model=ResolvedProvider)
async def resolve_provider(ctx: Ctx, name: str) -> JSON:
    """What answers for an agent's ``model_provider`` NAME: a configured entry, the demo
    model (``demo: true``: no entry of that name, and the demo model is on), or nothing; and
    how to configure it for real. Any signed-in user; names no secret."""
    return JSON(ctx.svc.providers.resolve(name))
