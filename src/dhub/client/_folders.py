"""The folders half of ``Client``: collections and folders, what is in them, the caller's
home folder, and moving any resource between them (docs/folders.md).

Where a method takes a folder it takes its id (``folder.…``) or its name, looked up among the
folders the caller can see like an agent's (``resolve_folder``); a collection likewise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dhub.client._models import AgentVersion, Collection, Folder, Resource, ResourcePage
from dhub.client._names import category_of, is_id, pick, plural
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

HOME_TYPE = "home"  # the ``type`` of a user's home folder
_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
_MAX_IDS = 200  # the server's largest page


class FoldersMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _agent_id(self, agent: str) -> str: ...

    # -- folders -----------------------------------------------------------------------------

    def create_folder(
        self,
        name: str,
        *,
        folder: str | None = None,
        collection: str | None = None,
        description: str | None = None,
        alias: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> Folder:
        """A new folder inside ``folder``, else at the top of ``collection``, else in the
        caller's home folder. Names are unique within the folder it goes in (``Conflict``)."""
        body = _envelope(name, description, alias, tags)
        if folder is not None:
            body["folder_id"] = self._folder_id(folder)
        elif collection is not None:
            body["collection_id"] = self._collection_id(collection)
        return self._object("POST", "/folders", json=body)

    def get_folder(self, folder: str) -> Folder:
        """The folder ``folder`` names: its id or its name (see ``resolve_folder``)."""
        if is_id("folder", folder):
            return self._object("GET", f"/folders/{segment(folder)}")
        return self.resolve_folder(folder)

    def home_folder(self) -> Folder:
        """The caller's home folder: where what it creates without a folder goes. It is made
        the first time it is needed, is called ``home`` and passes no access down."""
        return self._object("GET", "/folders/home")

    def resolve_folder(self, folder: str) -> Folder:
        """The folder ``folder`` stands for. An id (``folder.<ulid>``) is an id; anything else
        is a name, matched exactly among the folders the caller can see, leaving out other
        users' home folders (they are all called ``home``, and an admin sees them all): so
        ``home`` is the caller's own home unless it made another folder of that name. None
        is ``UnknownName``, several (in different folders) ``AmbiguousName``."""
        if is_id("folder", folder):
            return self.get_folder(folder)
        found = list(self.iter_folders(name=folder))
        if folder == "home":  # every home folder's name, and one cannot rename it
            found = [f for f in found if f.get("type") != HOME_TYPE] + [self.home_folder()]
        return pick("folder", folder, found)

    def _folder_id(self, folder: str) -> str:
        """The id of the folder ``folder`` stands for (an id costs no request)."""
        return folder if is_id("folder", folder) else str(self.resolve_folder(folder)["id"])

    def list_folders(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        collection_id: str | None = None,
        folder_id: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the folders the caller can see, in creation order; ``folder_id``:
        only those directly in that folder, ``collection_id``: only those in that collection
        (at any depth)."""
        return self._page("/folders", q, name, tags, collection_id, folder_id, type, limit, cursor)

    def iter_folders(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        collection_id: str | None = None,
        folder_id: str | None = None,
        type: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Folder]:
        """Every matching folder, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_folders(
                q=q, name=name, tags=tags, collection_id=collection_id, folder_id=folder_id,
                type=type, limit=page_size, cursor=cursor,
            )
        )  # fmt: skip

    def update_folder(self, folder: str, patch: Mapping[str, Any]) -> Folder:
        """Apply an RFC 7396 merge patch (``{"name": "new"}`` renames it; ``move`` moves it)."""
        return self._merge(self._container("folder", folder), patch)

    def delete_folder(self, folder: str) -> None:
        """Delete an empty folder (one with anything in it is a ``Conflict``)."""
        self._request("DELETE", self._container("folder", folder))

    def folder_children(
        self, folder: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ResourcePage:
        """One page of what is directly in the folder, of every kind, that the caller can
        see, by id. Each item is a resource's envelope; ``category`` says its kind."""
        return self._children(self._container("folder", folder), limit, cursor)

    def iter_folder_children(
        self, folder: str, *, page_size: int | None = None
    ) -> Iterator[Resource]:
        """Everything directly in the folder that the caller can see, fetching lazily."""
        folder_id = self._folder_id(folder)  # once, not per page
        return follow(
            lambda cursor: self.folder_children(folder_id, limit=page_size, cursor=cursor)
        )

    def folder_paths(self, ids: Iterable[str]) -> dict[str, str]:
        """Where each folder or collection of ``ids`` is, by name from the top (``support/
        reports``, ``home/drafts``; ``…`` for folders above it the caller cannot read), for
        those the caller can read: the others are left out. One request per 200 ids."""
        wanted = sorted({str(i) for i in ids if is_id("folder", i) or is_id("collection", i)})
        found: dict[str, str] = {}
        for start in range(0, len(wanted), _MAX_IDS):
            params = {"id": ",".join(wanted[start : start + _MAX_IDS])}
            body = self._object("GET", "/folders/paths", params=params)
            found.update((item["id"], item["path"]) for item in body.get("data") or [])
        return found

    # -- collections -------------------------------------------------------------------------

    def create_collection(
        self,
        name: str,
        *,
        description: str | None = None,
        alias: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> Collection:
        """A new collection: folders and resources go in it, and its owners, grants and
        markings reach everything inside."""
        return self._object("POST", "/collections", json=_envelope(name, description, alias, tags))

    def get_collection(self, collection: str) -> Collection:
        """The collection ``collection`` names: its id or its name."""
        if is_id("collection", collection):
            return self._object("GET", f"/collections/{segment(collection)}")
        return self.resolve_collection(collection)

    def resolve_collection(self, collection: str) -> Collection:
        """The collection ``collection`` stands for: an id, or a name matched exactly among
        the collections the caller can see (``UnknownName`` when none is)."""
        if is_id("collection", collection):
            return self.get_collection(collection)
        return pick("collection", collection, self.iter_collections(name=collection))

    def _collection_id(self, collection: str) -> str:
        """The id of the collection ``collection`` stands for (an id costs no request)."""
        if is_id("collection", collection):
            return collection
        return str(self.resolve_collection(collection)["id"])

    def list_collections(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the collections the caller can see, in creation order."""
        return self._page("/collections", q, name, tags, None, None, None, limit, cursor)

    def iter_collections(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        page_size: int | None = None,
    ) -> Iterator[Collection]:
        """Every matching collection, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_collections(
                q=q, name=name, tags=tags, limit=page_size, cursor=cursor
            )
        )

    def update_collection(self, collection: str, patch: Mapping[str, Any]) -> Collection:
        """Apply an RFC 7396 merge patch (``{"name": "new"}`` renames it)."""
        return self._merge(self._container("collection", collection), patch)

    def delete_collection(self, collection: str) -> None:
        """Delete an empty collection (one with anything in it is a ``Conflict``)."""
        self._request("DELETE", self._container("collection", collection))

    def collection_children(
        self, collection: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ResourcePage:
        """One page of what is at the collection's top level (in no folder of it)."""
        return self._children(self._container("collection", collection), limit, cursor)

    def iter_collection_children(
        self, collection: str, *, page_size: int | None = None
    ) -> Iterator[Resource]:
        """Everything at the collection's top level that the caller can see, lazily."""
        collection_id = self._collection_id(collection)
        return follow(
            lambda cursor: self.collection_children(collection_id, limit=page_size, cursor=cursor)
        )

    # -- any resource ------------------------------------------------------------------------

    def _resource_path(self, resource: str) -> str:
        """``/<category>s/<id>`` of any resource's id, or of an agent's name."""
        category = category_of(resource)
        if category is None:
            return f"/agents/{segment(self._agent_id(resource))}"
        return f"/{plural(category)}/{segment(resource)}"

    def get_resource(self, resource: str) -> Resource:
        """Any resource by its id (the kind is in the id), or an agent by its name."""
        return self._object("GET", self._resource_path(resource))

    def resource_versions(self, resource: str) -> list[AgentVersion]:
        """A resource's versions, newest first: any resource by its id (a table, template,
        ontology, ...), or an agent by its name. Each change to its document is a version
        (a table's rows and an ontology's objects are data, not versions)."""
        body = self._object("GET", f"{self._resource_path(resource)}/versions")
        return [
            AgentVersion(int(v["version"]), int(v["created_at"]), str(v["created_by"]))
            for v in body["data"]
        ]

    def resource_version(self, resource: str, version: int) -> Resource:
        """The resource as it was at ``version`` (1 is the document it was created with)."""
        return self._object("GET", f"{self._resource_path(resource)}/versions/{int(version)}")

    def move(
        self,
        resource: str,
        *,
        folder: str | None = None,
        collection: str | None = None,
    ) -> Resource:
        """Move a resource of any kind (its id; an agent also by its name) into ``folder``
        (it takes the folder's collection), or to the top level of ``collection``. Moving
        changes who inherits access to it, so it takes what sharing takes; returns the
        resource as it is now, ``effective_markings`` included."""
        if folder is None and collection is None:
            raise ValueError(
                "Say where to: folder= (a folder's id or name; home_folder() is yours), "
                "or collection= for a collection's top level."
            )
        # Both keys when going to a collection's top level: a patch of collection_id alone
        # would leave a resource already in that collection in its folder.
        patch: dict[str, Any] = {"folder_id": None if folder is None else self._folder_id(folder)}
        if collection is not None:
            patch["collection_id"] = self._collection_id(collection)
        return self._merge(self._resource_path(resource), patch)

    # -- what folders and collections share ---------------------------------------------------

    def _container(self, category: str, ref: str) -> str:
        """``/folders/<id>`` or ``/collections/<id>`` of the one ``ref`` names."""
        found = self._folder_id(ref) if category == "folder" else self._collection_id(ref)
        return f"/{category}s/{segment(found)}"

    def _merge(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self._object("PATCH", path, json=dict(patch), headers=_MERGE_PATCH)

    def _children(self, path: str, limit: int | None, cursor: str | None) -> ResourcePage:
        params = query(limit=limit, cursor=cursor)
        return _page_of(self._object("GET", f"{path}/children", params=params))

    def _page(
        self,
        path: str,
        q: str | None,
        name: str | None,
        tags: Sequence[str] | None,
        collection_id: str | None,
        folder_id: str | None,
        type: str | None,
        limit: int | None,
        cursor: str | None,
    ) -> ResourcePage:
        params = query(
            q=q, name=name, tags=list(tags) if tags else None, collection_id=collection_id,
            folder_id=folder_id, type=type, limit=limit, cursor=cursor,
        )  # fmt: skip
        return _page_of(self._object("GET", path, params=params))


def _page_of(body: dict[str, Any]) -> ResourcePage:
    return ResourcePage(data=list(body.get("data") or []), next_cursor=body.get("next_cursor"))


def _envelope(
    name: str, description: str | None, alias: str | None, tags: Sequence[str] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    for key, value in (("description", description), ("alias", alias)):
        if value is not None:
            body[key] = value
    if tags is not None:
        body["tags"] = list(tags)
    return body
