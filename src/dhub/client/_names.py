"""Names wherever ids go: which string is an id, and which resource a name stands for.

An id is what the server makes, ``<category>.<ulid>`` (``agent.01m8pq9je70y0jz9n1k7fmy8v2``),
or the stable id of a built-in agent (``agent.builtin-summarizer``); any other string is a
name, looked up exactly among the resources the caller can see. Names are unique per folder
only, so one name may stand for several resources: that is an error naming each, never a
guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dhub.client._exceptions import AmbiguousName, UnknownName
from dhub.placeholders import CATEGORIES, fill_placeholders, placeholders

__all__ = ["CATEGORIES", "fill_placeholders", "placeholders"]  # and what is defined here

# Crockford base32, lowercase, as dhub.domain.ids makes them (copied: no server imports here).
_ULID = "[0-9abcdefghjkmnpqrstvwxyz]{26}"


_PLURALS = {"ontology": "ontologies", "mcp_server": "mcp-servers"}
# The built-in agents' ids (dhub.services.builtins: ``agent.builtin-<file name>``).
_BUILTIN = "builtin-[a-z0-9][a-z0-9-]*"


def is_id(category: str, ref: str) -> bool:
    """Whether ``ref`` has the shape of an id of this category (then it is never a name)."""
    return re.fullmatch(f"{re.escape(category)}\\.(?:{_ULID}|{_BUILTIN})", ref) is not None


def plural(category: str) -> str:
    """What a kind is called in URLs (``/ontologies``) and lists."""
    return _PLURALS.get(category, f"{category}s")


def category_of(ref: str) -> str | None:
    """The category ``ref`` is an id of, if it is shaped like the id of any resource."""
    return next((c for c in CATEGORIES if is_id(c, ref)), None)


def pick(category: str, name: str, found: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The one resource named exactly ``name`` among ``found`` (a listing filtered by name).
    None: ``UnknownName``; several (in different folders): ``AmbiguousName``."""
    named = [r for r in found if r.get("name") == name]
    if len(named) == 1:
        return named[0]
    if not named:
        raise UnknownName(category, name)
    raise AmbiguousName(category, name, named)
