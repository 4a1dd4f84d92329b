"""Rendering templates and reading run artifacts (docs/templates.md). The template itself (its
envelope, access, versions) is a kind of services/resources.py; here are the two uses on top:

- ``TemplateService.render``: a template the caller may read, rendered with checked values,
  as its text (JSON), as HTML, or as PDF;
- ``ArtifactService``: the documents a run made, seen by exactly who may read the run
  (RunService.get: a run the caller may not read answers like a random id, and so do its
  artifacts).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Literal

from dhub.access.principal import Principal
from dhub.domain.documents import FORMATS, RenderError
from dhub.domain.errors import FieldError, InvalidInput, NotFound
from dhub.domain.resources import TemplateSpec
from dhub.knowledge import formats
from dhub.knowledge.templates import Rendered, render_spec
from dhub.services.resources import ResourceService
from dhub.services.runs import RunService
from dhub.store import artifacts as repo
from dhub.store.db import Database

Output = Literal["source", "html", "pdf"]
OUTPUTS: tuple[Output, ...] = ("source", "html", "pdf")
HTML = "text/html; charset=utf-8"
PDF = "application/pdf"


@dataclass(frozen=True, slots=True)
class Document:
    """A document to send: its bytes, media type and download name."""

    content: bytes
    media_type: str
    file_name: str


@dataclass(frozen=True, slots=True)
class RenderResult:
    template_id: str
    version: int
    rendered: Rendered
    output: Output
    html: str | None = None
    pdf: bytes | None = None

    def as_json(self) -> dict[str, Any]:
        text = self.html if self.output == "html" and self.html is not None else self.rendered.text
        media_type = HTML if self.output == "html" else self.rendered.media_type
        return {
            "template_id": self.template_id,
            "version": self.version,
            "format": self.rendered.format,
            "media_type": media_type,
            "text": text,
        }


# PDFs made at once by this process: WeasyPrint takes seconds for a long document (over 20 s
# for a 1000-row table, bench/templates.py), so more requests wait their turn rather than
# taking every core.
_PDF_SLOTS = threading.BoundedSemaphore(2)


def _pdf(text: str, document_format: str, title: str) -> bytes:
    with _PDF_SLOTS:
        return formats.to_pdf(text, document_format, title)


async def convert(text: str, document_format: str, output: Output, title: str) -> Any:
    """``text`` (of ``document_format``) as HTML text or PDF bytes, in a worker thread."""
    if output == "html":
        return formats.to_html(text, document_format, title)
    return await asyncio.to_thread(_pdf, text, document_format, title)


class TemplateService:
    def __init__(self, db: Database, resources: ResourceService, runs: RunService) -> None:
        self.db = db
        self.resources = resources
        self.runs = runs

    async def render(self, who: Principal, template_id: str, body: Any) -> RenderResult:
        """``{"variables": {...}, "output": "source" | "html" | "pdf", "version": n}``: the
        template (its latest version, or ``version``) rendered; errors name the variable."""
        variables, output, version = _render_body(body)
        if version is None:
            view = await self.resources.get(who, "template", template_id)
        else:
            view = await self.resources.version(who, "template", template_id, version)
        spec = TemplateSpec.model_validate_json(view.record.document)
        try:
            rendered = await asyncio.to_thread(render_spec, spec, variables)
        except RenderError as exc:
            at = f"/variables/{exc.variable}" if exc.variable else "/variables"
            raise InvalidInput([FieldError(at, exc.message, exc.code)]) from exc
        result = RenderResult(template_id, view.record.version, rendered, output)
        if output == "html":
            html = await convert(rendered.text, rendered.format, "html", spec.name)
            return RenderResult(template_id, view.record.version, rendered, output, html=html)
        if output == "pdf":
            pdf = await convert(rendered.text, rendered.format, "pdf", spec.name)
            return RenderResult(template_id, view.record.version, rendered, output, pdf=pdf)
        return result


def _render_body(body: Any) -> tuple[Any, Output, int | None]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InvalidInput([FieldError("", "The body must be a JSON object.", "type")])
    errors = []
    unknown = sorted(set(body) - {"variables", "output", "version"})
    errors += [
        FieldError(f"/{k}", f"Unknown field '{k}': send variables, output, version.", "unknown")
        for k in unknown
    ]
    output = body.get("output", "source")
    if output not in OUTPUTS:
        message = f"'output' is one of {', '.join(OUTPUTS)}; got {output!r}."
        errors.append(FieldError("/output", message, "enum"))
    version = body.get("version")
    if version is not None and (type(version) is not int or version < 1):
        errors.append(FieldError("/version", "'version' is a version number (1, 2, ...).", "type"))
    variables = body.get("variables", {})
    if not isinstance(variables, dict):
        errors.append(FieldError("/variables", "'variables' is an object of name: value.", "type"))
    if errors:
        raise InvalidInput(errors)
    return variables, output, version


class ArtifactService:
    def __init__(self, db: Database, runs: RunService) -> None:
        self.db = db
        self.runs = runs

    async def list(self, who: Principal, run_id: str) -> list[repo.ArtifactRecord]:
        await self.runs.get(who, run_id)  # a hidden run: "No run with id ..."
        async with self.db.read() as conn:
            return await repo.list_artifacts(conn, run_id)

    async def get(self, who: Principal, run_id: str, artifact_id: str) -> repo.ArtifactRecord:
        await self.runs.get(who, run_id)
        async with self.db.read() as conn:
            found = await repo.get_artifact(conn, run_id, artifact_id)
        if found is None:
            raise NotFound(f"Run '{run_id}' has no artifact '{artifact_id}'.")
        return found

    async def download(
        self, who: Principal, run_id: str, artifact_id: str, output: str | None
    ) -> Document:
        """The artifact as stored, or (``output`` html or pdf) converted from its format."""
        found = await self.get(who, run_id, artifact_id)
        content = found.content or b""
        if output in (None, "", "source"):
            return Document(content, found.media_type, found.name)
        if output != "html" and output != "pdf":
            message = f"'format' is one of source, html, pdf; got {output!r}."
            raise InvalidInput([FieldError("/format", message, "enum")])
        if found.format not in FORMATS:
            message = f"Artifact '{artifact_id}' is {found.media_type}: it has no {output} form."
            raise InvalidInput([FieldError("/format", message, "not_convertible")])
        stem = found.name.rsplit(".", 1)[0]
        wanted: Output = "html" if output == "html" else "pdf"
        converted = await convert(content.decode(), found.format, wanted, stem)
        if output == "html":
            return Document(converted.encode(), HTML, f"{stem}.html")
        return Document(converted, PDF, f"{stem}.pdf")
