"""The ontologies half of ``Client``: ontologies (their schema is their document), their
objects and links, search, following links and import (docs/ontologies.md).

Where a method takes an ontology it takes its id (``ontology.…``) or its name, looked up
among the ontologies the caller can see (``resolve_ontology``); a table, likewise
(``resolve_table``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from dhub.client._models import ObjectPage, Ontology, OntologyObject, ResourcePage
from dhub.client._names import is_id, pick
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
_JSONL = {"Content-Type": "application/jsonl"}


class OntologiesMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _table_id(self, table: str) -> str: ...

    # -- ontologies --------------------------------------------------------------------------

    def create_ontology(self, doc: Mapping[str, Any]) -> Ontology:
        """A new ontology from its document (name, description, object_types, link_types)."""
        return self._object("POST", "/ontologies", json=dict(doc))

    def get_ontology(self, ontology: str) -> Ontology:
        """The ontology ``ontology`` names: its id or its name."""
        if is_id("ontology", ontology):
            return self._object("GET", f"/ontologies/{segment(ontology)}")
        return pick("ontology", ontology, self.iter_ontologies(name=ontology))

    resolve_ontology = get_ontology

    def _ontology_path(self, ontology: str) -> str:
        found = ontology if is_id("ontology", ontology) else str(self.get_ontology(ontology)["id"])
        return f"/ontologies/{segment(found)}"

    def list_ontologies(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        folder_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the ontologies the caller can see, in creation order."""
        params = query(
            q=q,
            name=name,
            tags=list(tags) if tags else None,
            folder_id=folder_id,
            limit=limit,
            cursor=cursor,
        )
        body = self._object("GET", "/ontologies", params=params)
        return ResourcePage(list(body.get("data") or []), body.get("next_cursor"))

    def iter_ontologies(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        folder_id: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Ontology]:
        """Every matching ontology, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_ontologies(
                q=q, name=name, tags=tags, folder_id=folder_id, limit=page_size, cursor=cursor
            )
        )

    def update_ontology(self, ontology: str, patch: Mapping[str, Any]) -> Ontology:
        """A merge patch of the ontology's document (a new version of its schema)."""
        return self._object(
            "PATCH", self._ontology_path(ontology), json=dict(patch), headers=_MERGE_PATCH
        )

    def delete_ontology(self, ontology: str) -> None:
        """Delete the ontology, its objects and links."""
        self._request("DELETE", self._ontology_path(ontology))

    # -- objects -----------------------------------------------------------------------------

    def search_objects(
        self,
        ontology: str,
        *,
        type: str | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ObjectPage:
        """One page of objects: of ``type``, passing every filter (``{"property", "op",
        "value"}``), with every word of ``q`` in their text."""
        body = query(
            type=type,
            filters=[dict(f) for f in filters] if filters else None,
            q=q,
            limit=limit,
            cursor=cursor,
        )
        found = self._object("POST", f"{self._ontology_path(ontology)}/objects/search", json=body)
        return ObjectPage(list(found.get("data") or []), found.get("next_cursor"))

    def iter_objects(
        self,
        ontology: str,
        *,
        type: str | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
        q: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[OntologyObject]:
        """Every matching object, fetching pages lazily."""
        ontology_id = self._ontology_path(ontology).rsplit("/", 1)[1]  # resolved once
        return follow(
            lambda cursor: self.search_objects(
                ontology_id, type=type, filters=filters, q=q, limit=page_size, cursor=cursor
            )
        )

    def get_object(self, ontology: str, type: str, key: str | int) -> OntologyObject:
        return self._object("GET", self._object_path(ontology, type, key))

    def create_object(
        self, ontology: str, type: str, properties: Mapping[str, Any]
    ) -> OntologyObject:
        body = {"type": type, "properties": dict(properties)}
        return self._object("POST", f"{self._ontology_path(ontology)}/objects", json=body)

    def update_object(
        self, ontology: str, type: str, key: str | int, properties: Mapping[str, Any]
    ) -> OntologyObject:
        """Change some properties (merged; None removes a value)."""
        return self._object(
            "PATCH", self._object_path(ontology, type, key), json={"properties": dict(properties)}
        )

    def delete_object(self, ontology: str, type: str, key: str | int) -> None:
        """Delete the object and its links."""
        self._request("DELETE", self._object_path(ontology, type, key))

    def _object_path(self, ontology: str, type: str, key: str | int) -> str:
        return f"{self._ontology_path(ontology)}/objects/{segment(type)}/{segment(str(key))}"

    # -- links -------------------------------------------------------------------------------

    def link_objects(
        self, ontology: str, link_type: str, from_key: str | int, to_key: str | int
    ) -> dict[str, Any]:
        """Link two objects (nothing new if they are linked already)."""
        body = {"link_type": link_type, "from": from_key, "to": to_key}
        return self._object("POST", f"{self._ontology_path(ontology)}/links", json=body)

    def unlink_objects(
        self, ontology: str, link_type: str, from_key: str | int, to_key: str | int
    ) -> None:
        ends = "/".join(segment(str(k)) for k in (link_type, from_key, to_key))
        self._request("DELETE", f"{self._ontology_path(ontology)}/links/{ends}")

    def follow_links(
        self,
        ontology: str,
        type: str,
        key: str | int,
        link: str,
        *,
        reverse: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ObjectPage:
        """The objects one object is linked to by ``link`` (a link type's name, or its
        inverse's; ``reverse``: a link type followed backwards)."""
        params = query(reverse="true" if reverse else None, limit=limit, cursor=cursor)
        path = f"{self._object_path(ontology, type, key)}/links/{segment(link)}"
        found = self._object("GET", path, params=params)
        return ObjectPage(list(found.get("data") or []), found.get("next_cursor"))

    # -- import ------------------------------------------------------------------------------

    def import_objects(
        self, ontology: str, items: Sequence[Mapping[str, Any]] | Mapping[str, Any] | bytes
    ) -> dict[str, Any]:
        """Import objects and links, all or nothing: ``{"objects": [...], "links": [...]}``,
        a list of items, or JSON Lines (bytes). Returns what was created and updated."""
        path = f"{self._ontology_path(ontology)}/import"
        if isinstance(items, bytes):
            return self._object("POST", path, content=items, headers=_JSONL)
        body = dict(items) if isinstance(items, Mapping) else [dict(i) for i in items]
        return self._object(
            "POST", path, content=orjson.dumps(body), headers={"Content-Type": "application/json"}
        )

    def import_objects_from_table(
        self,
        ontology: str,
        table: str,
        *,
        type: str | None = None,
        properties: Mapping[str, str | None] | None = None,
        link_type: str | None = None,
        from_column: str | None = None,
        to_column: str | None = None,
    ) -> dict[str, Any]:
        """Objects of ``type`` (one a row) and/or links of ``link_type`` (one a row, between
        the keys in ``from_column`` and ``to_column``) from every row of a table (its name or
        id), all or nothing. ``properties`` maps properties to columns; a property it leaves
        out takes the column of the same name, one mapped to None is left out."""
        if type is None and properties is not None:
            raise ValueError("properties maps the properties of a type: give type as well.")
        if link_type is None and (from_column is not None or to_column is not None):
            raise ValueError("from_column and to_column are a link's ends: give link_type.")
        body: dict[str, Any] = {"table": self._table_id(table)}
        if type is not None:
            body["objects"] = {"type": type}
            if properties:
                body["objects"]["properties"] = dict(properties)
        if link_type is not None:
            body["links"] = {"link_type": link_type, "from": from_column, "to": to_column}
        return self._object("POST", f"{self._ontology_path(ontology)}/import-table", json=body)
