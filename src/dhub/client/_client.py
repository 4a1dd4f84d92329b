"""The synchronous dhub client: one method per agent endpoint, plus ``apply_agent``; the
identity and sharing methods come from ``AccessMixin`` (_access.py), the run and task methods
from ``RunsMixin`` (_runs.py), chat from ``ConversationsMixin`` (_conversations.py), folders
and collections from ``FoldersMixin`` (_folders.py), tables from ``TablesMixin``
(_tables.py), templates and run artifacts from ``TemplatesMixin`` (_templates.py), MCP
servers from ``McpServersMixin`` (_mcp.py), secrets from ``SecretsMixin`` (_secrets.py),
triggers from ``TriggersMixin`` (_triggers.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from dhub.client._access import AccessMixin
from dhub.client._apply import READ_ONLY_FIELDS, replacement_patch, strip_read_only
from dhub.client._config import resolve_token, resolve_url
from dhub.client._conversations import ConversationsMixin
from dhub.client._exceptions import (
    DhubClientError,
    FieldError,
    ServerUnreachable,
    error_from_response,
)
from dhub.client._folders import FoldersMixin
from dhub.client._mcp import McpServersMixin
from dhub.client._models import (
    Agent,
    AgentPage,
    AgentVersion,
    ApplyResult,
    ResourcePage,
    ValidationResult,
)
from dhub.client._names import fill_placeholders, is_id, pick, placeholders, plural
from dhub.client._ontologies import OntologiesMixin
from dhub.client._paths import follow, query, segment
from dhub.client._runs import RunsMixin
from dhub.client._secrets import SecretsMixin
from dhub.client._tables import TablesMixin
from dhub.client._templates import TemplatesMixin
from dhub.client._triggers import TriggersMixin

API_PREFIX = "/api/v1"
DEFAULT_TIMEOUT = httpx.Timeout(30.0)
USER_AGENT = "dhub-client/0.1"

Mode = Literal["react", "workflow"]
InputMode = Literal["chat", "event"]


class Client(
    AccessMixin,
    FoldersMixin,
    TablesMixin,
    OntologiesMixin,
    RunsMixin,
    ConversationsMixin,
    TemplatesMixin,
    McpServersMixin,
    SecretsMixin,
    TriggersMixin,
):
    """A client for one dhub server and one API token.

    ``transport`` replaces the network (e.g. ``httpx.MockTransport``); ``http`` replaces the whole
    ``httpx.Client`` (e.g. a Starlette ``TestClient``), which this client then does not close.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        if http is not None and transport is not None:
            raise ValueError("Pass either transport or http, not both.")
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT}
        self._owns_http = http is None
        self._http = (
            http if http is not None else httpx.Client(transport=transport, timeout=DEFAULT_TIMEOUT)
        )

    @classmethod
    def from_env(
        cls,
        *,
        url: str | None = None,
        token: str | None = None,
        data_dir: str | Path | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> Client:
        """Resolve what is not given: ``$DHUB_URL`` (default ``http://127.0.0.1:8000``), then
        ``$DHUB_TOKEN``, else ``admin.token`` in ``$DHUB_DATA_DIR`` (default ``./.dhub``)."""
        return cls(resolve_url(url), resolve_token(token, data_dir), transport=transport)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Client base_url={self.base_url!r}>"

    # -- agents ------------------------------------------------------------------------------

    def create_agent(self, doc: Mapping[str, Any]) -> Agent:
        return self._object("POST", "/agents", json=dict(doc))

    def get_agent(self, agent: str) -> Agent:
        """The agent ``agent`` names: its id (``agent.…``) or its name (see ``resolve_agent``)."""
        if is_id("agent", agent):
            return self._object("GET", f"/agents/{segment(agent)}")
        return self.resolve_agent(agent)

    def update_agent(self, agent: str, patch: Mapping[str, Any]) -> Agent:
        """Apply an RFC 7396 merge patch: keys set to ``None`` are removed (reset to default)."""
        return self._object(
            "PATCH",
            self._agent_path(agent),
            json=dict(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def delete_agent(self, agent: str) -> None:
        self._request("DELETE", self._agent_path(agent))

    def resolve_agent(self, agent: str) -> Agent:
        """The agent ``agent`` stands for. A string shaped like an id (``agent.<ulid>``) is an
        id; anything else is a name, matched exactly among the agents the caller can see:
        none is ``UnknownName`` (a ``NotFound``), several (in different folders) is
        ``AmbiguousName``, whose ``matches`` are the candidates.

        Every method that takes an agent accepts either; those that only need its id look a
        name up here once per call (an id costs no extra request)."""
        if is_id("agent", agent):
            return self.get_agent(agent)
        return pick("agent", agent, self.iter_agents(name=agent))

    def _agent_id(self, agent: str) -> str:
        """The id of the agent ``agent`` stands for (an id or a name)."""
        return agent if is_id("agent", agent) else str(self.resolve_agent(agent)["id"])

    def _agent_path(self, agent: str) -> str:
        """``/agents/<id>`` of the agent ``agent`` stands for (an id or a name)."""
        return f"/agents/{segment(self._agent_id(agent))}"

    def list_agents(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        collection_id: str | None = None,
        folder_id: str | None = None,
        mode: Mode | None = None,
        input_mode: InputMode | None = None,
        type: str | None = None,
        is_builtin: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AgentPage:
        """One page of the agents the caller can see, in creation order. ``q`` is a substring
        of the name, alias or description; ``name`` is exactly the name; ``is_builtin``: only
        the built-in agents (True) or only the others (False)."""
        params = query(
            q=q,
            name=name,
            tags=list(tags) if tags else None,
            collection_id=collection_id,
            folder_id=folder_id,
            mode=mode,
            input_mode=input_mode,
            type=type,
            is_builtin=None if is_builtin is None else str(bool(is_builtin)).lower(),
            limit=limit,
            cursor=cursor,
        )
        body = self._object("GET", "/agents", params=params)
        return AgentPage(data=list(body["data"]), next_cursor=body.get("next_cursor"))

    def iter_agents(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        collection_id: str | None = None,
        folder_id: str | None = None,
        mode: Mode | None = None,
        input_mode: InputMode | None = None,
        type: str | None = None,
        is_builtin: bool | None = None,
        page_size: int | None = None,
    ) -> Iterator[Agent]:
        """Every matching agent, fetching pages lazily by following ``next_cursor``."""
        return follow(
            lambda cursor: self.list_agents(
                q=q,
                name=name,
                tags=tags,
                collection_id=collection_id,
                folder_id=folder_id,
                mode=mode,
                input_mode=input_mode,
                type=type,
                is_builtin=is_builtin,
                limit=page_size,
                cursor=cursor,
            )
        )

    def validate_agent(self, doc: Any) -> ValidationResult:
        """Check a document without storing it; every problem is reported at once."""
        body = self._object("POST", "/agents/validate", json=doc)
        errors = [FieldError.from_json(e) for e in body.get("errors", [])]
        return ValidationResult(valid=bool(body["valid"]), errors=errors)

    def agent_versions(self, agent: str) -> list[AgentVersion]:
        """The agent's versions, newest first (``agent``: an id or a name)."""
        body = self._object("GET", f"{self._agent_path(agent)}/versions")
        return [
            AgentVersion(int(v["version"]), int(v["created_at"]), str(v["created_by"]))
            for v in body["data"]
        ]

    def agent_version(self, agent: str, version: int) -> Agent:
        """The agent as it was at ``version`` (1 is the document it was created with)."""
        path = f"{self._agent_path(agent)}/versions/{int(version)}"
        return self._object("GET", path)

    def export_agent(self, agent: str) -> dict[str, Any]:
        """The agent's document as ``apply_agent`` takes it back unchanged: what a GET returns
        without the server's envelope (id, version, owners, ...) and markings (only the
        marking endpoints change those). ``agent``: its id or its name. An agent in the
        caller's home folder is exported without ``folder_id`` (nor a null
        ``collection_id``): applied by someone else, or on another server, it goes to their
        home folder."""
        found = self.get_agent(agent)
        doc = {k: v for k, v in found.items() if k not in READ_ONLY_FIELDS}
        if doc.get("folder_id") and doc["folder_id"] == self.home_folder()["id"]:
            del doc["folder_id"]
            if doc.get("collection_id", "") is None:
                del doc["collection_id"]
        return doc

    def find_agent_by_name(
        self, name: str, folder_id: str | None = None, collection_id: str | None = None
    ) -> Agent | None:
        """The agent named exactly ``name`` where a document with this ``folder_id`` and
        ``collection_id`` goes: that folder, else the top of that collection, else (neither)
        the caller's home folder. Names are unique there, so there is one at most."""
        if folder_id is None and collection_id is None:
            folder_id = str(self.home_folder()["id"])
        # folder_id None with a collection: the top of it (the server would take any folder).
        for agent in self.iter_agents(name=name, folder_id=folder_id, collection_id=collection_id):
            if agent.get("name") == name and (agent.get("folder_id") or None) == folder_id:
                return agent
        return None

    def copy_agent(
        self,
        agent: str,
        name: str | None = None,
        folder_id: str | None = None,
        tables: Sequence[str] | None = None,
        templates: Sequence[str] | None = None,
        ontologies: Sequence[str] | None = None,
    ) -> Agent:
        """An editable copy of an agent you can read (a built-in or any other; ``agent``: its
        id or name): yours, version 1, not built-in. ``name``: the copy's (a ``Conflict`` if
        taken); default: the agent's, or the first free of ``<name>-copy``,
        ``<name>-copy-2``, ... ``folder_id``: where it goes; default: where a new agent
        without a folder goes. ``tables``, ``templates``, ``ontologies``: ids the copy lists
        instead of the agent's (e.g. the built-in table-analyst with your table)."""
        given = (("name", name), ("folder_id", folder_id), ("tables", tables),
                 ("templates", templates), ("ontologies", ontologies))  # fmt: skip
        body = {k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
                for k, v in given if v is not None}  # fmt: skip
        return self._object("POST", f"{self._agent_path(agent)}/copy", json=body)

    def with_ids(self, doc: Any) -> Any:
        """The document with each ``${category:name}`` placeholder (``${table:sales}``)
        replaced by the id of the one resource of that name the caller can see (none or
        several: ``UnknownName`` or ``AmbiguousName``)."""
        ids = {
            (category, name): str(self._named(category, name)["id"])
            for category, name in sorted(placeholders(doc))
        }
        return fill_placeholders(doc, ids)

    def _named(self, category: str, name: str) -> dict[str, Any]:
        path = f"/{plural(category)}"
        return pick(
            category,
            name,
            follow(lambda cursor: self._named_page(path, query(name=name, cursor=cursor))),
        )

    def _named_page(self, path: str, params: dict[str, Any]) -> ResourcePage:
        body = self._object("GET", path, params=params)
        return ResourcePage(data=list(body["data"]), next_cursor=body.get("next_cursor"))

    def apply_agent(self, doc: Mapping[str, Any]) -> ApplyResult:
        """Create the agent, or make the existing one with the same name in the same place
        (``folder_id``, else ``collection_id``, else the caller's home folder) equal to
        ``doc`` (fields the document leaves out go back to their defaults)."""
        name, folder_id, collection_id = (
            doc.get("name"),
            doc.get("folder_id"),
            doc.get("collection_id"),
        )
        existing = None
        if isinstance(name, str) and all(
            v is None or isinstance(v, str) for v in (folder_id, collection_id)
        ):
            existing = self.find_agent_by_name(name, folder_id, collection_id)
        body = strip_read_only(dict(doc), existing.get("markings", []) if existing else [])
        if existing is None:
            # Also the path for documents without a usable name: the server says what is wrong.
            return ApplyResult("created", self.create_agent(body))
        updated = self.update_agent(existing["id"], replacement_patch(existing, body))
        changed = updated.get("version") != existing.get("version")
        return ApplyResult("updated" if changed else "unchanged", updated)

    # -- models ------------------------------------------------------------------------------

    def resolve_provider(self, name: str) -> dict[str, Any]:
        """What answers for the model provider ``name`` on the server: ``configured``,
        ``type``, ``demo`` (the demo model answers for it) and ``configure`` (how to make it a
        real provider, e.g. "set DHUB_OPENAI_API_KEY"); docs/providers.md."""
        return self._object("GET", f"/providers/{segment(name)}")

    # -- transport ---------------------------------------------------------------------------

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON object a successful call returns (every body this API sends is one)."""
        response = self._request(method, path, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise DhubClientError(
                f"The server at {self.base_url} answered {method} {path} with a body that is "
                "not a JSON object; is the URL pointing at a dhub server?"
            )
        return body

    def _request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        url = f"{self.base_url}{API_PREFIX}{path}"
        try:
            response = self._http.request(
                method, url, headers={**self._headers, **(headers or {})}, **kwargs
            )
        except httpx.TransportError as exc:
            raise ServerUnreachable(
                f"Could not reach the dhub server at {self.base_url}: {exc or type(exc).__name__}",
                url=url,
            ) from exc
        if response.is_error:
            raise error_from_response(response)
        return response
