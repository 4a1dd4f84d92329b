"""Request dependencies: the services and the authenticated caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from dhub.access.principal import Principal
from dhub.access.tokens import Authenticator
from dhub.api.yaml_io import is_yaml, yaml_body
from dhub.domain.bounds import MAX_BODY_BYTES, MAX_PARAM_CHARS, parameter_problems, parse_document
from dhub.domain.errors import InvalidInput, TooLarge
from dhub.providers.registry import Providers
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.folders import FolderService
from dhub.services.mcp_servers import McpServerService
from dhub.services.ontologies import OntologyService
from dhub.services.openai_compat import OpenAICompatService
from dhub.services.principals import PrincipalService
from dhub.services.resources import ResourceService
from dhub.services.runs import RunService, TaskService
from dhub.services.tables import TableService
from dhub.services.templates import ArtifactService, TemplateService
from dhub.services.triggers import TriggerService
from dhub.services.types import Database


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
    resources: ResourceService  # prompts, tools, actors, roles, folders, collections
    folders: FolderService  # what is in them, and home folders
    templates: TemplateService  # rendering
    artifacts: ArtifactService  # what runs made
    tables: TableService  # tables' rows, imports and queries
    ontologies: OntologyService  # an ontology's objects and links
    openai: OpenAICompatService  # the OpenAI-compatible API (/v1)
    mcp_servers: McpServerService  # what MCP servers offer (their tools)
    triggers: TriggerService  # webhooks and schedules (docs/triggers.md)


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
    # Every /api/v1 route depends on it, so it is also where parameters are checked.
    check_parameters(request)
    svc: Services = request.app.state.services
    return Context(await svc.auth.authenticate(request.headers.get("authorization")), svc)


def check_parameters(request: Request) -> None:
    """Every path, query and header value within bounds (domain/bounds.py): no NUL character
    (PostgreSQL cannot compare or store it), path and query values of bounded length. Typed
    parameters (integers) are bounded by their types besides. The raw request is looked at
    first: the values are only parsed one by one when something may be wrong."""
    scope = request.scope
    path: str = scope["path"]
    query: bytes = scope["query_string"]
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    suspect_path = len(path) > MAX_PARAM_CHARS or "\x00" in path
    suspect_query = len(query) > MAX_PARAM_CHARS or b"%00" in query or b"\x00" in query
    suspect_headers = any(b"\x00" in value or b"\x00" in name for name, value in headers)
    if suspect_path or suspect_query or suspect_headers:
        _check_each(request)


def _check_each(request: Request) -> None:
    errors = []
    for name, value in request.path_params.items():
        if isinstance(value, str):
            errors += parameter_problems("path", name, value)
    for name, value in request.query_params.multi_items():
        errors += parameter_problems("query", name, value)
    for raw_name, raw_value in request.headers.raw:
        if b"\x00" in raw_value or b"\x00" in raw_name:
            name = raw_name.decode("latin-1")
            errors += parameter_problems("header", name, raw_value.decode("latin-1"))
    if errors:
        raise InvalidInput(errors)


async def json_body(request: Request, optional: bool = False) -> Any:
    """The request body as JSON within the bounds of domain/bounds.py, or read from YAML when
    its Content-Type says so (api/yaml_io.py). A body over the size limit is refused while it
    streams in rather than after it was held in memory whole. ``optional``: no body (or only
    whitespace) is None."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(
                f"The request body is over {MAX_BODY_BYTES // (1024 * 1024)} MiB: send a smaller "
                "document."
            )
        chunks.append(chunk)
    if optional and not b"".join(chunks).strip():
        return None
    if is_yaml(request.headers.get("content-type")):
        return await yaml_body(b"".join(chunks))
    return parse_document(b"".join(chunks))


Ctx = Annotated[Context, Depends(context)]
ServicesDep = Annotated[Services, Depends(services)]
