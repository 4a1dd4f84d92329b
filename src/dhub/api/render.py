"""AgentResponse bodies, assembled as bytes.

The stored document is already the validated spec serialized as compact JSON, so a response is
that document with the server's envelope spliced around it: no parse and re-serialize of the
(possibly large) document on every read. Field order: ``id`` first, then the document, then
the envelope; JSON objects are unordered, so clients see exactly the seed's fields.
"""

from __future__ import annotations

import orjson

from dhub.services.agents import AgentView, Page


def agent_json(view: AgentView) -> bytes:
    record = view.record
    head = orjson.dumps({"id": record.id})[:-1]  # b'{"id":"..."'
    tail = orjson.dumps(
        {
            "markings": orjson.Fragment(record.markings),  # stored as JSON already
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "owners": view.owners,
            "my_share_scope": view.scope,
            "is_builtin": record.is_builtin,
            "item": record.id,
            "version": record.version,
        }
    )[1:]  # b'"markings":...}'
    body = record.document.encode()[1:-1]
    return b",".join((head, body, tail)) if body else head + b"," + tail


def page_json(page: Page) -> bytes:
    cursor = orjson.dumps(page.next_cursor)
    items = b",".join(agent_json(view) for view in page.data)
    return b'{"data":[' + items + b'],"next_cursor":' + cursor + b"}"
