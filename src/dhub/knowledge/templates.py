"""Templates as agents use them (issue 19, docs/knowledge.md): the ``template.render``
operation and the tools an agent that lists templates gets (``agent_tools``), registered as
the ``template`` kind of services/knowledge_kinds.py.

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

import orjson
from pydantic import MISSING

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.documents import (
    MEDIA_TYPES,
    RESERVED,
    TEMPLATE_ID,
    RenderError,
    TemplateVariable,
    check_values,
    file_name,
    render,
)
from dhub.domain.ids import new_id, now_ms
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.resources import TemplateSpec, unreachable
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.tools import KnowledgeKind
from dhub.store import artifacts as artifact_repo
from dhub.store import resources as resource_repo
from dhub.store import runs as run_repo
from dhub.store.db import Conn, Database
from dhub.store.resources import ResourceRecord

TEXT_SHOWN = 4000  # characters of the rendered text the model sees (the artifact has it all)
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


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
        record = await readable(conn, principal, template_id)
    if record is None:
        raise KnowledgeError(unreachable("template", template_id))
    spec = TemplateSpec.model_validate_json(record.document)
    try:
        rendered = await asyncio.to_thread(render_spec, spec, _variables(arguments))
    except RenderError as exc:
        raise KnowledgeError(exc.message) from exc
    artifact_id = None
    run_id = arguments.get("run_id")
    if isinstance(run_id, str) and run_id:
        artifact_id = await store_artifact(
            db, run_id, principal.user_id, rendered, template_id, record.version
        )
    return {
        "artifact_id": artifact_id,
        "text": rendered.text[:TEXT_SHOWN],
        "truncated": len(rendered.text) > TEXT_SHOWN,
        "media_type": rendered.media_type,
    }


async def readable(conn: Conn, principal: Principal, template_id: str) -> ResourceRecord | None:
    """The template ``template_id`` when ``principal`` may read it now (owners, grants,
    folders, every marking held: the policy of the one reference check), else None."""
    if TEMPLATE_ID.fullmatch(template_id) is None:
        return None
    found = await resource_repo.get_resources(conn, [template_id], sorted(principal.principal_ids))
    row = found.get(template_id)
    if row is None or row.record.category != "template":
        return None
    owners = [o["id"] for o in row.owners]
    markings = orjson.loads(row.record.markings)
    seen = policy.access(
        principal, owners, row.grant, markings, row.above, builtin=row.record.is_builtin
    )
    return row.record if seen is not None and seen.allows("read") else None


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


def agent_tools(records: Sequence[ResourceRecord]) -> list[KnowledgeTool]:
    """One tool per template the agent lists: ``render_<name>`` whose parameters are the
    template's variables (names made unique with a suffix when two templates clash)."""
    tools: list[KnowledgeTool] = []
    taken: set[str] = set()
    ids = [r.id for r in records]
    for record in records:
        spec = TemplateSpec.model_validate_json(record.document)
        name = tool_name(spec.name)
        n = 2
        while name in taken:
            suffix = f"_{n}"
            name = tool_name(spec.name)[: 64 - len(suffix)] + suffix
            n += 1
        taken.add(name)
        about = spec.description or f"the {spec.format} template '{spec.name}'"
        tools.append(
            KnowledgeTool(
                name=name,
                description=(
                    f"Render {about} into a {spec.format} document, kept with this run "
                    "(the result gives its artifact_id and the start of its text). Give each "
                    "variable a value of its type."
                ),
                parameters=variables_schema(spec.variables),
                operation="template.render",
                bound={"template_id": record.id, "template_ids": ids},
            )
        )
    return tools


OPERATIONS: dict[str, Callable[..., Awaitable[Any]]] = {"template.render": render_op}
KIND = KnowledgeKind("template", agent_tools, OPERATIONS)
