"""URL helpers shared by the client and its mixins."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import quote


def segment(value: str) -> str:
    """An id as one URL path segment (a stray '/' or '?' must not change the route)."""
    return quote(value, safe="")


def query(**params: Any) -> dict[str, Any]:
    """Query parameters without the ones left unset."""
    return {k: v for k, v in params.items() if v is not None}


T_co = TypeVar("T_co", covariant=True)


class _Paged(Protocol[T_co]):
    @property
    def data(self) -> Sequence[T_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


def follow(fetch: Callable[[str | None], _Paged[T_co]]) -> Iterator[T_co]:
    """Every item of a cursor-paginated listing, fetching pages lazily; ``fetch`` takes the
    cursor (None for the first page)."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.data
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
