"""Request dependencies: the services and the authenticated caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request

from dhub.access.principal import Principal
from dhub.access.tokens import Authenticator
from dhub.domain.errors import FieldError, InvalidInput, TooLarge
from dhub.providers.registry import Providers
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.principals import PrincipalService
from dhub.services.resources import ResourceService
from dhub.services.runs import RunService, TaskService
from dhub.store.db import Database


@dataclass
class Services:
    db: Database
    auth: Authenticator
    agents: AgentService
    principals: PrincipalService
    runs: RunService
    tasks: TaskService
    conversations: ConversationService
    providers: Providers
    resources: ResourceService  # prompts, tools, actors, roles


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool.
    found: Services = request.app.state.services
    return found


@dataclass(frozen=True, slots=True)
class Context:
    """What every /api/v1 route needs: who is calling, and the services to call."""

    who: Principal
    svc: Services


async def context(request: Request) -> Context:
    # One dependency rather than a chain (bearer scheme -> caller -> services): FastAPI's
    # dependency solving is a measurable share of a fast request (bench/api_latency.py).
    svc: Services = request.app.state.services
    return Context(await svc.auth.authenticate(request.headers.get("authorization")), svc)


# Agent documents are kilobytes; a body this large is a mistake or an attack, and it is refused
# while it streams in rather than after it was held in memory whole.
MAX_BODY_BYTES = 8 * 1024 * 1024


async def json_body(request: Request) -> Any:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(
                f"The request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB: send a smaller "
                "document."
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(
            [FieldError("", f"The request body is not valid JSON: {exc}.", "json_invalid")]
        ) from exc


Ctx = Annotated[Context, Depends(context)]
ServicesDep = Annotated[Services, Depends(services)]
