"""Turn pydantic validation errors into JSON pointers into the document the user sent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from dhub.domain.errors import FieldError


def escape(segment: str | int) -> str:
    return str(segment).replace("~", "~0").replace("/", "~1")


def join(*segments: str | int) -> str:
    return "".join("/" + escape(s) for s in segments)


def pointer_for(loc: Sequence[str | int], doc: Any, union_tags: frozenset[str]) -> str:
    """Walk ``loc`` through ``doc``, dropping the union-member tags pydantic inserts.

    A string segment is a real key when the current value is an object that has it, or when it
    is the last segment (a missing field). Otherwise it names a union member and is skipped.
    """
    parts: list[str | int] = []
    cur: Any = doc
    last = len(loc) - 1
    for i, seg in enumerate(loc):
        if isinstance(seg, int):
            parts.append(seg)
            cur = cur[seg] if isinstance(cur, list) and 0 <= seg < len(cur) else None
            continue
        if isinstance(cur, dict) and seg in cur:
            parts.append(seg)
            cur = cur[seg]
        elif not isinstance(cur, dict) or (seg in union_tags and (i < last or cur is None)):
            continue
        else:
            parts.append(seg)
            cur = None
    return join(*parts)


def _message(err: ErrorDetails) -> str:
    kind = err["type"]
    loc = err["loc"]
    field = next((s for s in reversed(loc) if isinstance(s, str)), "value")
    if kind == "missing":
        return f"'{field}' is required: add it."
    if kind == "extra_forbidden":
        return f"'{field}' is not a known field here: remove it or check its spelling."
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx = err.get("ctx") or {}
        expected = ctx.get("expected_tags", "")
        return f"{ctx.get('tag', 'this value')!r} is not a known type; use one of {expected}."
    msg = str(err["msg"])
    return f"'{field}': {msg[0].lower()}{msg[1:]}." if msg else f"'{field}' is invalid."


def from_validation_error(
    exc: ValidationError, doc: Any, union_tags: Iterable[str] = ()
) -> list[FieldError]:
    tags = frozenset(union_tags)
    seen: set[str] = set()
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        pointer = pointer_for(loc, doc, tags)
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            pointer += "/type"
        # A bad value for an ``int | float`` field fails both members: report it once.
        if pointer in seen:
            continue
        seen.add(pointer)
        out.append(FieldError(pointer, _message(err), err["type"]))
    return out
