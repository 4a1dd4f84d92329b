"""The templates half of ``Client``: document templates (docs/templates.md), rendering them,
and the documents runs made (run artifacts).

Where a method takes a template it takes its id (``template.…``) or its name, looked up among
the templates the caller can see (several of that name: ``AmbiguousName``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from dhub.client._models import Artifact, ArtifactFile, RenderedDocument, Template
from dhub.client._names import is_id, pick
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

    from dhub.client._models import ResourcePage

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


class TemplatesMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    # -- templates ---------------------------------------------------------------------------

    def create_template(self, doc: Mapping[str, Any]) -> Template:
        """Store a template: ``name``, ``format`` (markdown, html, text), ``body`` and its
        typed ``variables``. A body that does not parse, or uses a variable it does not
        declare, is ``InvalidInput`` naming the line or the variables."""
        return self._object("POST", "/templates", json=dict(doc))

    def get_template(self, template: str) -> Template:
        """The template ``template`` names (its id or its name)."""
        return self._object("GET", f"/templates/{segment(self._template_id(template))}")

    def update_template(self, template: str, patch: Mapping[str, Any]) -> Template:
        """Apply an RFC 7396 merge patch; a changed document is a new version."""
        path = f"/templates/{segment(self._template_id(template))}"
        return self._object("PATCH", path, json=dict(patch), headers=_MERGE_PATCH)

    def delete_template(self, template: str) -> None:
        self._request("DELETE", f"/templates/{segment(self._template_id(template))}")

    def list_templates(
        self,
        *,
        name: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the templates the caller can see, in creation order."""
        from dhub.client._models import ResourcePage

        params = query(name=name, q=q, limit=limit, cursor=cursor)
        body = self._object("GET", "/templates", params=params)
        return ResourcePage(data=list(body.get("data") or []), next_cursor=body.get("next_cursor"))

    def iter_templates(
        self, *, name: str | None = None, q: str | None = None, page_size: int | None = None
    ) -> Iterator[Template]:
        """Every matching template, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_templates(name=name, q=q, limit=page_size, cursor=cursor)
        )

    def render_template(
        self,
        template: str,
        variables: Mapping[str, Any] | None = None,
        *,
        output: Literal["source", "html"] = "source",
        version: int | None = None,
    ) -> RenderedDocument:
        """The template rendered with ``variables`` (checked against their declared types:
        ``InvalidInput`` names the variable): its text, or (``output="html"``) as an HTML
        page. ``version``: an older version of it."""
        body = self._render_body(variables, output, version)
        path = f"/templates/{segment(self._template_id(template))}/render"
        return RenderedDocument.from_json(self._object("POST", path, json=body))

    def render_template_pdf(
        self,
        template: str,
        variables: Mapping[str, Any] | None = None,
        *,
        version: int | None = None,
    ) -> bytes:
        """The template rendered with ``variables``, as a PDF file's bytes."""
        body = self._render_body(variables, "pdf", version)
        path = f"/templates/{segment(self._template_id(template))}/render"
        return self._request("POST", path, json=body).content

    @staticmethod
    def _render_body(
        variables: Mapping[str, Any] | None, output: str, version: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"variables": dict(variables or {}), "output": output}
        if version is not None:
            body["version"] = int(version)
        return body

    def _template_id(self, template: str) -> str:
        if is_id("template", template):
            return template
        return str(pick("template", template, self.iter_templates(name=template))["id"])

    # -- run artifacts -----------------------------------------------------------------------

    def list_artifacts(self, run_id: str) -> list[Artifact]:
        """The documents a run made (its template nodes' and render tools'), oldest first."""
        body = self._object("GET", f"/runs/{segment(run_id)}/artifacts")
        return [Artifact.from_json(a) for a in body.get("data") or []]

    def download_artifact(
        self,
        run_id: str,
        artifact_id: str,
        *,
        format: Literal["source", "html", "pdf"] | None = None,
    ) -> ArtifactFile:
        """One artifact's content as stored, or (``format``) converted to HTML or PDF."""
        path = f"/runs/{segment(run_id)}/artifacts/{segment(artifact_id)}"
        response = self._request("GET", path, params=query(format=format))
        return ArtifactFile(
            name=_file_name(response.headers.get("content-disposition", "")) or artifact_id,
            media_type=response.headers.get("content-type", "application/octet-stream"),
            content=response.content,
        )


def _file_name(disposition: str) -> str | None:
    marker = 'filename="'
    start = disposition.find(marker)
    if start < 0:
        return None
    rest = disposition[start + len(marker) :]
    return rest[: rest.find('"')] if '"' in rest else None
