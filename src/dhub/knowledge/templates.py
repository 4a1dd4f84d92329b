"""Templates as agents use them (issue 19): the ``template.render`` operation and the tools an
agent that lists templates gets (``agent_tools``), per docs/knowledge contract.

The operation runs for a run's user (``principal``) and trusts nothing the model sends: the
template must be one the agent listed (``template_ids``, bound by the runtime) and one the
user may read now; its variables are checked against the declared types. With a ``run_id``
(the runtime's), what it renders is kept as an artifact of that run.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import MISSING

from dhub.access.principal import Principal
from dhub.domain.documents import (
    MEDIA_TYPES,
    RESERVED,
    RenderError,
    TemplateVariable,
    check_values,
    file_name,
    render,
)
from dhub.domain.ids import new_id, now_ms
from dhub.domain.resources import TemplateSpec, unreachable
from dhub.knowledge.errors import KnowledgeError
from dhub.services.references import Reach
from dhub.store import artifacts as artifact_repo
from dhub.store import runs as run_repo
from dhub.store.db import Database

TEXT_SHOWN = 4000  # characters of the rendered text the model sees (the artifact has it all)
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True, slots=True)
class KnowledgeTool:
    name: str  # what the model calls, e.g. "query_table" (^[a-zA-Z0-9_-]{1,64}$)
    description: str  # what the model is told (include column names/types etc.)
    parameters: dict[str, Any]  # JSON Schema of the model's arguments
    operation: str  # registry key, e.g. "table.query"
    bound: dict[str, Any]  # fixed arguments merged over the model's (the ids the agent listed)
    confirm: bool = False  # True: an actor; a person confirms first (unless auto)


@dataclass(frozen=True, slots=True)
class StoredTemplate:
    """A template as a tool is made from it: its id and current document."""

    id: str
    version: int
    spec: TemplateSpec


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    format: str
    media_type: str
    file_name: str


def render_spec(spec: TemplateSpec, values: Any) -> Rendered:
    """Check ``values`` and render (RenderError names what is wrong). CPU-bound and bounded
    (domain/documents.py): callers on the event loop run it in a thread."""
    text = render(spec.body, spec.format, check_values(spec.variables, values))
    return Rendered(text, spec.format, MEDIA_TYPES[spec.format], file_name(spec.name, spec.format))


# -- the operation ------------------------------------------------------------------------------


async def render_op(db: Database, principal: Principal, arguments: dict[str, Any]) -> Any:
    """``template.render``: ``template_id`` (one of the bound ``template_ids``) and
    ``variables``; with ``run_id`` the document is kept as an artifact of that run. Returns
    ``{artifact_id, text (the first TEXT_SHOWN characters), media_type, truncated}``."""
    template_id = arguments.get("template_id")
    allowed = arguments.get("template_ids") or []
    if not isinstance(template_id, str) or not template_id:
        raise KnowledgeError("'template_id' is required: the id of one of your templates.")
    if template_id not in allowed:
        raise KnowledgeError(unreachable("template", template_id))
    async with db.read(snapshot=True) as conn:
        row = await Reach(conn, principal).use(template_id, "template")
    if row is None:
        raise KnowledgeError(unreachable("template", template_id))
    spec = TemplateSpec.model_validate_json(row.record.document)
    try:
        rendered = await asyncio.to_thread(render_spec, spec, _variables(arguments))
    except RenderError as exc:
        raise KnowledgeError(exc.message) from exc
    artifact_id = None
    run_id = arguments.get("run_id")
    if isinstance(run_id, str) and run_id:
        artifact_id = await store_artifact(
            db, run_id, principal.user_id, rendered, template_id, row.record.version
        )
    return {
        "artifact_id": artifact_id,
        "text": rendered.text[:TEXT_SHOWN],
        "truncated": len(rendered.text) > TEXT_SHOWN,
        "media_type": rendered.media_type,
    }


def _variables(arguments: Mapping[str, Any]) -> Any:
    """The values to render with: ``variables``, or (a model's call of a render tool, whose
    parameters are the variables themselves) the arguments but the runtime's own."""
    if "variables" in arguments:
        return arguments["variables"]
    return {k: v for k, v in arguments.items() if k not in RESERVED}


async def store_artifact(
    db: Database,
    run_id: str,
    user_id: str,
    rendered: Rendered,
    template_id: str | None,
    template_version: int | None,
    node_id: str | None = None,
) -> str | None:
    """Keep ``rendered`` with the run ``run_id`` when that run is ``user_id``'s (the runtime
    passes its own run; nothing else is written to). Its id, or None."""
    artifact_id = new_id("artifact")
    content = rendered.text.encode()
    async with db.write() as conn:
        run = await run_repo.get_run(conn, run_id)
        if run is None or run.user_id != user_id:
            return None
        await artifact_repo.insert_artifact(
            conn,
            {
                "id": artifact_id,
                "run_id": run_id,
                "name": rendered.file_name,
                "media_type": rendered.media_type,
                "format": rendered.format,
                "size": len(content),
                "content": content,
                "node_id": node_id,
                "template_id": template_id,
                "template_version": template_version,
                "created_at": now_ms(),
                "created_by": user_id,
            },
        )
    return artifact_id


# -- the tools ----------------------------------------------------------------------------------


def tool_name(name: str) -> str:
    """``render_<name>`` made of the characters a tool name may hold, at most 64."""
    cleaned = _TOOL_NAME.sub("_", name).strip("_") or "template"
    return f"render_{cleaned}"[:64]


_JSON_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "datetime": {"type": "string", "format": "date-time"},
    "object": {"type": "object"},
    "array": {"type": "array"},
}


def variables_schema(variables: Sequence[TemplateVariable]) -> dict[str, Any]:
    """The declared variables as the JSON Schema of an object."""
    properties: dict[str, Any] = {}
    for var in variables:
        schema = dict(_JSON_TYPES[var.type])
        if var.description:
            schema["description"] = var.description
        if var.default is not MISSING:
            schema["default"] = var.default
        properties[var.name] = schema
    required = [v.name for v in variables if v.required]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def agent_tools(items: Sequence[StoredTemplate]) -> list[KnowledgeTool]:
    """One tool per template the agent lists: ``render_<name>`` whose parameters are the
    template's variables (names made unique with a suffix when two templates clash)."""
    tools: list[KnowledgeTool] = []
    taken: set[str] = set()
    ids = [t.id for t in items]
    for item in items:
        name = tool_name(item.spec.name)
        n = 2
        while name in taken:
            suffix = f"_{n}"
            name = tool_name(item.spec.name)[: 64 - len(suffix)] + suffix
            n += 1
        taken.add(name)
        about = item.spec.description or f"the {item.spec.format} template '{item.spec.name}'"
        tools.append(
            KnowledgeTool(
                name=name,
                description=(
                    f"Render {about} into a {item.spec.format} document, kept with this run "
                    "(the result gives its artifact_id and the start of its text). Give each "
                    "variable a value of its type."
                ),
                parameters=variables_schema(item.spec.variables),
                operation="template.render",
                bound={"template_id": item.id, "template_ids": ids},
            )
        )
    return tools


OPERATIONS: dict[str, Callable[..., Awaitable[Any]]] = {"template.render": render_op}
