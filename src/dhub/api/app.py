"""The FastAPI application factory. Nothing is built at import time."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.routing import BaseRoute, Route

from dhub import __version__
from dhub.access.bootstrap import ADMIN_ID, ensure_admin
from dhub.access.principal import Principal
from dhub.access.tokens import Authenticator
from dhub.api import a2a, apidocs, console, errors, mcp, metrics, yaml_io
from dhub.api.deps import Services
from dhub.api.routers import (
    agents,
    conversations,
    examples,
    folders,
    health,
    mcp_servers,
    models,
    ontologies,
    openai_compat,
    principals,
    resources,
    runs,
    tables,
    templates,
    triggers,
    workers,
)
from dhub.domain.agent import AgentSpec
from dhub.domain.resources import KINDS
from dhub.observability import traces
from dhub.observability.metrics import configure as configure_metrics
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.examples import Makers, load_examples
from dhub.services.folders import FolderService
from dhub.services.mcp_servers import McpServerService
from dhub.services.ontologies import OntologyService
from dhub.services.openai_compat import OpenAICompatService
from dhub.services.principals import PrincipalService
from dhub.services.resources import ResourceService
from dhub.services.runs import RunService, TaskService
from dhub.services.runtime import WorkerOptions, open_runtime, stop_watch
from dhub.services.schedules import scheduler_for
from dhub.services.tables import TableService
from dhub.services.templates import ArtifactService, TemplateService
from dhub.services.triggers import TriggerService
from dhub.settings import Settings

log = logging.getLogger("dhub")


def create_app(
    settings: Settings | None = None,
    worker: WorkerOptions | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The API server. ``worker``: in distributed mode, this process takes run jobs too
    (``dhub serve`` without ``--no-worker``); embedded, the server executes every run.
    ``clock``: now, in Unix seconds, for triggers and schedules (tests pass a fake one)."""
    settings = settings or Settings.from_env()
    tracing = traces.start()  # OTEL_* variables (docs/observability.md)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_metrics(settings.metrics)  # before the runtime resumes runs
        app.state.metrics = metrics.MetricsAccess(settings.metrics, settings.metrics_token)
        runtime = await open_runtime(settings, worker)
        db = runtime.db
        auth = Authenticator(db)
        agent_service = AgentService(db, runtime.providers, settings.list_cache_mb)
        run_service = RunService(
            db, agent_service, runtime.graphs, runtime.executor, runtime.dispatch
        )
        resource_service = ResourceService(db, runtime.vault)
        conversation_service = ConversationService(db, run_service)
        services = Services(
            db=db,
            auth=auth,
            agents=agent_service,
            principals=PrincipalService(db, auth),
            runs=run_service,
            tasks=TaskService(db, run_service),
            conversations=conversation_service,
            providers=runtime.providers,
            resources=resource_service,
            folders=FolderService(db, resource_service),
            templates=TemplateService(db, resource_service, run_service),
            artifacts=ArtifactService(db, run_service),
            tables=TableService(db, resource_service),
            ontologies=OntologyService(db),
            openai=OpenAICompatService(agent_service, run_service, conversation_service),
            mcp_servers=McpServerService(db, runtime.mcp),
            triggers=TriggerService(db, agent_service, run_service, runtime.vault, clock),
        )
        runtime.scheduler = scheduler_for(runtime, services.triggers)
        app.state.services = services
        app.state.runtime = runtime
        boot = await ensure_admin(db, settings.data_dir, settings.admin_token)
        if boot.generated_token is not None:
            print(
                f"dhub: created the admin user '{ADMIN_ID}'. Its API token, shown once "
                f"(also saved to {settings.data_dir / 'admin.token'}):\n  {boot.generated_token}",
                file=sys.stderr,
                flush=True,
            )
        if boot.fresh and settings.examples_dir is not None:
            admin = Principal(ADMIN_ID, is_admin=True)
            makers = Makers(services.agents, services.resources, services.tables)
            await load_examples(makers, admin, settings.examples_dir)
        resumed = await runtime.begin(run_service.hub)
        if resumed:
            log.info("resumed %d unfinished run(s)", len(resumed))
        _freeze_start_up()
        app.state.mcp = mcp.session_manager(settings.mcp_wait_seconds)  # a manager runs once
        app.state.a2a_wait_seconds = settings.mcp_wait_seconds  # A2A's message/send waits as long
        watch: asyncio.Task[None] | None = None
        try:
            async with app.state.mcp.run():
                try:
                    yield
                finally:
                    watch = stop_watch()
        finally:
            await runtime.close()
            if watch is not None:
                watch.cancel()
            if tracing:
                traces.stop()

    app = _bare_app(lifespan)
    errors.install(app)
    app.add_middleware(yaml_io.YamlResponses)  # JSON responses as YAML, when asked
    app.add_middleware(metrics.HttpMetrics)  # outermost: it times everything (DHUB_METRICS)
    app.router.routes.extend(_shared_routes())
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    traces.instrument_app(app)
    return app


def _bare_app(lifespan: Any = None, openapi_url: str | None = "/openapi.json") -> FastAPI:
    return FastAPI(
        title="dhub",
        version=__version__,
        description="A self-hosted agent platform.",
        lifespan=lifespan,
        docs_url=None,  # served by apidocs.py from local files, not a CDN
        redoc_url=None,
        openapi_url=openapi_url,
    )


def _freeze_start_up() -> None:
    """What start-up built lives as long as the server: out of the collector's generations,
    it is not traversed again by every full collection (a third of the time of many
    concurrent runs went to collections before; bench/runs.py). A process that starts many
    apps (the tests) freezes at each start, so what the earlier ones left is never collected:
    freezing once per process instead showed a leaked sandbox worker process (ResourceWarning
    when collected), still to be found, so it stays per start for now."""
    gc.freeze()


@functools.cache
def _shared_routes() -> list[BaseRoute]:
    """Every route of the API, built once per process and shared by its apps: FastAPI builds
    an included router's routes for each app it is included in (a pydantic adapter for each
    route's models, about 0.2 s in all), and a process may hold several apps (the tests hold
    one per test). Routes reach their app's state through the request, never through this
    one's."""
    app = _bare_app(openapi_url=None)
    app.include_router(health.router)
    # For Prometheus, not the API's clients: outside /api/v1 and the OpenAPI document, and
    # guarded by DHUB_METRICS itself (api/metrics.py).
    app.router.routes.append(
        Route(metrics.PATH, metrics.endpoint, methods=["GET"], include_in_schema=False)
    )
    # The interop entry points first: a request walks the routes in order, and these are
    # called per model turn or tool call by other programs (bench/README.md measured about
    # 1 ms of route matching when they came last). Their prefixes overlap no other route.
    app.router.routes.append(Route(mcp.PATH, mcp.Endpoint(), methods=["POST"]))
    app.include_router(openai_compat.router, prefix="/v1")  # OpenAI's clients (docs/openai.md)
    app.include_router(a2a.router)  # other agent platforms (docs/a2a.md)
    app.include_router(triggers.hooks)  # webhooks' deliveries (docs/triggers.md)
    app.include_router(agents.router, prefix="/api/v1")
    app.include_router(triggers.router, prefix="/api/v1")
    app.include_router(principals.router, prefix="/api/v1")
    app.include_router(runs.router, prefix="/api/v1")
    app.include_router(conversations.router, prefix="/api/v1")
    app.include_router(models.router, prefix="/api/v1")
    app.include_router(workers.router, prefix="/api/v1")
    app.include_router(examples.router, prefix="/api/v1")
    app.include_router(templates.router, prefix="/api/v1")
    console.install(app)
    apidocs.install(app)
    app.include_router(folders.router, prefix="/api/v1")  # before /folders/{id}
    app.include_router(tables.router, prefix="/api/v1")  # before /tables/{id}
    app.include_router(mcp_servers.router, prefix="/api/v1")  # before /mcp-servers/{id}
    for router in resources.routers:
        app.include_router(router, prefix="/api/v1")
    app.include_router(ontologies.router, prefix="/api/v1")
    return list(app.router.routes)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema plus AgentSpec and the prompt, tool, actor and role specs: the request
    bodies we validate ourselves (to report every error at once with JSON pointers)."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        bodies: list[type[BaseModel]] = [AgentSpec, *(kind.spec for kind in KINDS.values())]
        for model in bodies:
            spec = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in spec.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components[model.__name__] = spec
        _declare_bearer_auth(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _declare_bearer_auth(schema: dict[str, Any]) -> None:
    """Authentication is one dependency reading the header (see api/deps.py), so the bearer
    scheme is declared here for /docs and clients."""
    schema["components"]["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token: `Authorization: Bearer <token>`",
        }
    }
    for path, operations in schema["paths"].items():
        if path.startswith(("/api/", "/v1/", "/a2a/")):
            for operation in operations.values():
                operation["security"] = [{"bearer": []}]
