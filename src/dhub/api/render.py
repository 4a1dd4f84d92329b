"""AgentResponse bodies (and those of prompts, tools, actors and roles), assembled as bytes.

The stored document is already the validated spec serialized as compact JSON, so a response is
that document with the server's envelope spliced around it: no parse and re-serialize of the
(possibly large) document on every read. Field order: ``id`` first, then the document, then
the envelope; JSON objects are unordered, so clients see exactly the seed's fields.
"""

from __future__ import annotations

import orjson

from dhub.api.responses import encode
from dhub.services.agent_lists import AgentView
from dhub.services.resources import ResourcePage, ResourceView


def _envelope(view: AgentView | ResourceView) -> bytes:
    record, owners, scope = view.record, view.owners, view.scope
    head = orjson.dumps({"id": record.id})[:-1]  # b'{"id":"..."'
    fields = {
        "markings": orjson.Fragment(record.markings),  # stored as JSON already
        "effective_markings": (
            view.effective_markings if view.above.markings else orjson.Fragment(record.markings)
        ),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "owners": owners,
        "my_share_scope": scope,
        "is_builtin": record.is_builtin,
        "item": record.id,
        "version": record.version,
    }
    try:
        tail = orjson.dumps(fields)[1:]  # b'"markings":...}'
    except TypeError:  # an owner's profile stored before the input bounds (responses.encode)
        own = orjson.loads(record.markings)
        tail = encode({**fields, "markings": own, "effective_markings": view.effective_markings})[
            1:
        ]
    body = record.document.encode()[1:-1]
    return b",".join((head, body, tail)) if body else head + b"," + tail


def agent_json(view: AgentView) -> bytes:
    return _envelope(view)


def resource_json(view: ResourceView) -> bytes:
    return _envelope(view)


def items_json(items: list[bytes], next_cursor: str | None) -> bytes:
    """A page of items already rendered (``AgentService.page_rendered``)."""
    cursor = orjson.dumps(next_cursor)
    return b'{"data":[' + b",".join(items) + b'],"next_cursor":' + cursor + b"}"


def resource_page_json(page: ResourcePage) -> bytes:
    cursor = orjson.dumps(page.next_cursor)
    items = b",".join(resource_json(view) for view in page.data)
    return b'{"data":[' + items + b'],"next_cursor":' + cursor + b"}"
