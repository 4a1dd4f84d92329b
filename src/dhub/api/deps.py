"""Request dependencies: the services and the authenticated caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dhub.access.principal import Principal
from dhub.access.tokens import Authenticator
from dhub.domain.errors import FieldError, InvalidInput, Unauthenticated
from dhub.services.agents import AgentService
from dhub.store.db import Database

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`")


@dataclass
class Services:
    db: Database
    auth: Authenticator
    agents: AgentService


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool.
    found: Services = request.app.state.services
    return found


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None:
        raise Unauthenticated(
            "This endpoint needs 'Authorization: Bearer <token>'; see admin.token in the data "
            "directory for the first token."
        )
    svc: Services = request.app.state.services
    return await svc.auth.authenticate(f"Bearer {credentials.credentials}")


async def json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(
            [FieldError("", f"The request body is not valid JSON: {exc}.", "json_invalid")]
        ) from exc


Caller = Annotated[Principal, Depends(caller)]
ServicesDep = Annotated[Services, Depends(services)]
