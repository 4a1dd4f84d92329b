"""/api/v1/templates/{id}/render and /api/v1/runs/{id}/artifacts: thin routes over
TemplateService and ArtifactService (the template's own CRUD is api/routers/resources.py)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.services.templates import PDF, Document

router = APIRouter(responses=ERROR_RESPONSES)


class Rendered(BaseModel):
    template_id: str
    version: int
    format: Literal["markdown", "html", "text"]
    media_type: str
    text: str


class Artifact(BaseModel):
    id: str
    run_id: str
    name: str
    media_type: str
    format: str | None
    size: int
    node_id: str | None
    template_id: str | None
    template_version: int | None
    created_at: int
    created_by: str


class ArtifactList(BaseModel):
    data: list[Artifact]


_RENDER_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "variables": {"type": "object", "description": "name: value"},
                        "output": {
                            "type": "string",
                            "enum": ["source", "html", "pdf"],
                            "description": "source (default): the rendered text; html: as an "
                            "HTML page; pdf: a PDF file (application/pdf)",
                        },
                        "version": {"type": "integer", "minimum": 1},
                    },
                }
            }
        },
    }
}


def _download(document: Document) -> Response:
    disposition = f'attachment; filename="{document.file_name}"'
    return Response(
        document.content,
        media_type=document.media_type,
        headers={"Content-Disposition": disposition, "X-Content-Type-Options": "nosniff"},
    )


@router.post(
    "/templates/{template_id}/render",
    tags=["templates"],
    response_model=Rendered,
    openapi_extra=_RENDER_BODY,
    responses={200: {"content": {PDF: {}}}},
    summary="Render a template with variables",
)
async def render_template(template_id: str, request: Request, ctx: Ctx) -> Response:
    body = await json_body(request, optional=True)
    result = await ctx.svc.templates.render(ctx.who, template_id, body)
    if result.pdf is not None:
        stem = result.rendered.file_name.rsplit(".", 1)[0]
        return _download(Document(result.pdf, PDF, f"{stem}.pdf"))
    return JSON(result.as_json())


@router.get("/runs/{run_id}/artifacts", tags=["runs"], response_model=ArtifactList)
async def list_artifacts(run_id: str, ctx: Ctx) -> Response:
    """The documents the run made, oldest first (without their content)."""
    found = await ctx.svc.artifacts.list(ctx.who, run_id)
    return JSON({"data": [a.as_json() for a in found]})


@router.get(
    "/runs/{run_id}/artifacts/{artifact_id}",
    tags=["runs"],
    response_class=Response,
    responses={200: {"content": {"text/markdown": {}, "text/html": {}, PDF: {}}}},
)
async def download_artifact(
    run_id: str,
    artifact_id: str,
    ctx: Ctx,
    format: Literal["source", "html", "pdf"] | None = Query(
        None, description="html or pdf: the document converted (Markdown, HTML, text)"
    ),
) -> Response:
    """The document itself, with its Content-Type, as an attachment."""
    return _download(await ctx.svc.artifacts.download(ctx.who, run_id, artifact_id, format))
