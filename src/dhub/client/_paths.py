"""URL helpers shared by the client and its mixins."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def segment(value: str) -> str:
    """An id as one URL path segment (a stray '/' or '?' must not change the route)."""
    return quote(value, safe="")


def query(**params: Any) -> dict[str, Any]:
    """Query parameters without the ones left unset."""
    return {k: v for k, v in params.items() if v is not None}
