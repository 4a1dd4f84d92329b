"""The tables half of ``Client`` (docs/tables.md): tables, their rows, imports from files,
structured queries and read-only SQL.

Where a method takes a table it takes its id (``table.…``) or its name, looked up among the
tables the caller can see (``resolve_table``: one match, else ``UnknownName`` or
``AmbiguousName``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dhub.client._models import ResourcePage
from dhub.client._names import is_id, pick
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
FileLike = str | Path | bytes | IO[bytes]


def file_format(path: str | Path) -> str:
    """csv, jsonl or parquet, by the file's suffix (ValueError for any other)."""
    found = _SUFFIXES.get(Path(path).suffix.lower())
    if found is None:
        raise ValueError(
            f"Cannot tell the format of {str(path)!r} from its suffix: pass format= "
            "(csv, jsonl or parquet)."
        )
    return found


class TablesMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _folder_id(self, folder: str) -> str: ...

        def _collection_id(self, collection: str) -> str: ...

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
        ) -> ResourcePage: ...

    # -- tables ------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        columns: Sequence[Mapping[str, Any]],
        *,
        description: str | None = None,
        folder: str | None = None,
        collection: str | None = None,
    ) -> dict[str, Any]:
        """A new, empty table; ``columns``: ``{"name", "type", "nullable"?, "description"?}``
        with type one of string, number, integer, boolean, date, datetime, json."""
        body: dict[str, Any] = {"name": name, "columns": [dict(c) for c in columns]}
        if description is not None:
            body["description"] = description
        body.update(self._place(folder, collection))
        return self._object("POST", "/tables", json=body)

    def _place(self, folder: str | None, collection: str | None) -> dict[str, str]:
        if folder is not None:
            return {"folder_id": self._folder_id(folder)}
        if collection is not None:
            return {"collection_id": self._collection_id(collection)}
        return {}

    def get_table(self, table: str) -> dict[str, Any]:
        return self._object("GET", f"/tables/{segment(self._table_id(table))}")

    def resolve_table(self, table: str) -> dict[str, Any]:
        if is_id("table", table):
            return self.get_table(table)
        return pick("table", table, self.iter_tables(name=table))

    def _table_id(self, table: str) -> str:
        return table if is_id("table", table) else str(self.resolve_table(table)["id"])

    def list_tables(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        folder_id: str | None = None,
        collection_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        return self._page("/tables", q, name, None, collection_id, folder_id, None, limit, cursor)

    def iter_tables(
        self,
        *,
        q: str | None = None,
        name: str | None = None,
        folder_id: str | None = None,
        collection_id: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        return follow(
            lambda cursor: self.list_tables(
                q=q, name=name, folder_id=folder_id, collection_id=collection_id, cursor=cursor
            )
        )

    def update_table(self, table: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch of the table's document; a new ``columns`` list adds, drops or
        widens columns (what the rows cannot take is refused)."""
        path = f"/tables/{segment(self._table_id(table))}"
        return self._object("PATCH", path, json=dict(patch), headers=_MERGE_PATCH)

    def delete_table(self, table: str) -> None:
        """Delete the table and its rows."""
        self._request("DELETE", f"/tables/{segment(self._table_id(table))}")

    # -- imports -----------------------------------------------------------------------------

    def import_table(
        self,
        name: str,
        file: FileLike,
        *,
        format: str | None = None,
        description: str | None = None,
        folder: str | None = None,
        collection: str | None = None,
    ) -> dict[str, Any]:
        """A new table from a CSV, JSON Lines or Parquet file (a path, bytes or a binary
        file), column names and types inferred: ``{"table": ..., "inserted": n}``."""
        params: dict[str, Any] = {"name": name, "format": format or _format_of(file)}
        if description is not None:
            params["description"] = description
        params.update(self._place(folder, collection))
        with _Opened(file) as content:
            return self._object("POST", "/tables/import", params=params, content=content)

    def import_rows(
        self, table: str, file: FileLike, *, format: str | None = None
    ) -> dict[str, Any]:
        """Append a file's rows to a table (columns matched by name): ``{"inserted": n}``."""
        path = f"/tables/{segment(self._table_id(table))}/import"
        params = {"format": format or _format_of(file)}
        with _Opened(file) as content:
            return self._object("POST", path, params=params, content=content)

    # -- rows --------------------------------------------------------------------------------

    def list_rows(
        self, table: str, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """One page of rows by row id: ``{"data": [...], "next_cursor": ...}``."""
        path = f"/tables/{segment(self._table_id(table))}/rows"
        return self._object("GET", path, params=query(limit=limit, cursor=cursor))

    def iter_rows(self, table: str, *, page_size: int | None = None) -> Iterator[dict[str, Any]]:
        table_id = self._table_id(table)
        cursor: str | None = None
        while True:
            page = self.list_rows(table_id, limit=page_size, cursor=cursor)
            yield from page.get("data") or []
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def append_rows(self, table: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``{"inserted": n, "row_ids": [...]}``; values are checked against the columns."""
        path = f"/tables/{segment(self._table_id(table))}/rows"
        return self._object("POST", path, json={"rows": [dict(r) for r in rows]})

    def update_row(self, table: str, row_id: int, values: Mapping[str, Any]) -> dict[str, Any]:
        path = f"/tables/{segment(self._table_id(table))}/rows/{int(row_id)}"
        return self._object("PATCH", path, json=dict(values))

    def delete_rows(self, table: str, row_ids: Sequence[int]) -> int:
        path = f"/tables/{segment(self._table_id(table))}/rows/delete"
        body = self._object("POST", path, json={"row_ids": [int(i) for i in row_ids]})
        return int(body["deleted"])

    # -- queries -----------------------------------------------------------------------------

    def query_table(self, table: str, query: Mapping[str, Any]) -> dict[str, Any]:
        """A structured query (filter, select, group_by, aggregates, sort, limit, cursor):
        ``{"columns": [...], "rows": [...], "next_cursor": ...}``."""
        path = f"/tables/{segment(self._table_id(table))}/query"
        return self._object("POST", path, json=dict(query))

    def sql(self, sql: str, tables: Sequence[str], *, limit: int | None = None) -> dict[str, Any]:
        """Read-only SQL over ``tables`` (ids or names; the SQL names them by name):
        ``{"columns": [...], "rows": [[...]], "truncated": bool}``."""
        body: dict[str, Any] = {"sql": sql, "tables": [self._table_id(t) for t in tables]}
        if limit is not None:
            body["limit"] = limit
        return self._object("POST", "/tables/sql", json=body)


def _format_of(file: FileLike) -> str:
    if isinstance(file, str | Path):
        return file_format(file)
    name = getattr(file, "name", None)
    if isinstance(name, str):
        return file_format(name)
    raise ValueError("Pass format= (csv, jsonl or parquet) with bytes or an unnamed file.")


class _Opened:
    """The request body for ``file``: a path is opened (and closed afterwards)."""

    def __init__(self, file: FileLike) -> None:
        self._file = file
        self._handle: IO[bytes] | None = None

    def __enter__(self) -> bytes | IO[bytes]:
        if isinstance(self._file, str | Path):
            self._handle = Path(self._file).open("rb")
            return self._handle
        return self._file

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()
