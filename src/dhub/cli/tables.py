"""``dhub tables ...``: tables of typed rows (docs/tables.md): create one from columns or by
importing a CSV, JSON Lines or Parquet file, look at its rows, query it, run read-only SQL.

A table is named by its id (``table.…``) or its name (``Client.resolve_table``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    reporting_errors,
    when,
)
from dhub.cli._containers import Kind, labelled, register_sharing, register_versions

if TYPE_CHECKING:
    from dhub.client import Client

app = typer.Typer(
    help="Tables: typed rows that agents can describe, query and read with SQL.",
    no_args_is_help=True,
)

TableArgument = Annotated[
    str, typer.Argument(metavar="TABLE", help="The table's name or id (table.…).")
]
InOption = Annotated[
    str | None, typer.Option("--in", metavar="FOLDER", help="In this folder (name or id).")
]
FormatOption = Annotated[
    str | None,
    typer.Option("--format", help="csv, jsonl or parquet (default: from the file's suffix)."),
]


def _resolve(api: Client, ref: str) -> dict[str, Any]:
    return api.resolve_table(ref)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _columns(found: dict[str, Any]) -> list[str]:
    return [f"{c['name']}:{c['type']}" for c in found.get("columns") or []]


@app.command("list")
def list_(
    ctx: typer.Context,
    q: Annotated[str | None, typer.Option("--q", help="Substring of the name.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List the tables you can see, oldest first."""
    with reporting_errors():
        found = list(client_from(ctx).iter_tables(q=q))
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No tables found.")
    else:
        rows = [
            [t["id"], t["name"], str(len(t.get("columns") or [])), when(t.get("updated_at"))]
            for t in found
        ]
        echo_table(["ID", "NAME", "COLUMNS", "UPDATED"], rows)


@app.command()
def get(ctx: typer.Context, table: TableArgument, as_json: JsonOption = False) -> None:
    """Show a table: its columns and where it is."""
    with reporting_errors():
        found = _resolve(client_from(ctx), table)
    if as_json:
        echo_json(found)
        return
    echo_detail(
        [
            ("id", found["id"]),
            ("name", found["name"]),
            ("description", found.get("description") or ""),
            ("folder", found.get("folder_id") or "-"),
            ("version", str(found.get("version"))),
        ],
        [("columns", _columns(found))],
    )


ColumnOption = Annotated[
    list[str] | None,
    typer.Option(
        "--column",
        "-c",
        metavar="NAME:TYPE[!]",
        help="A column (repeat): type string, number, integer, boolean, date, datetime "
        "or json; '!' at the end: required.",
    ),
]


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Unique within the folder it goes in.")],
    column: ColumnOption = None,
    description: Annotated[str | None, typer.Option(help="What it holds.")] = None,
    in_: InOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an empty table with these columns."""
    columns = _parse_columns(column or [])
    with reporting_errors():
        made = client_from(ctx).create_table(name, columns, description=description, folder=in_)
    done(as_json, f"created {labelled(made)}", made)


def _parse_columns(specs: list[str]) -> list[dict[str, Any]]:
    columns = []
    for spec in specs:
        col_name, sep, kind = spec.partition(":")
        if not sep or not kind.rstrip("!"):
            raise typer.BadParameter(
                f"{spec!r}: write NAME:TYPE, e.g. price:number", param_hint="--column"
            )
        columns.append(
            {"name": col_name, "type": kind.rstrip("!"), "nullable": not kind.endswith("!")}
        )
    return columns


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="CSV, JSON Lines or Parquet.")
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="A new table of this name (default: the file's name)."),
    ] = None,
    into: Annotated[
        str | None, typer.Option("--into", metavar="TABLE", help="Append to this table instead.")
    ] = None,
    file_format: FormatOption = None,
    in_: InOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a table from a file (column names and types inferred), or append a file's rows
    to a table (--into; columns matched by name)."""
    with reporting_errors():
        api = client_from(ctx)
        if into is not None:
            found = _resolve(api, into)
            result = api.import_rows(found["id"], file, format=file_format)
            done(as_json, f"appended {result['inserted']} rows to {labelled(found)}", result)
            return
        result = api.import_table(name or file.stem, file, format=file_format, folder=in_)
    made = result["table"]
    message = (
        f"created {labelled(made)} with {result['inserted']} rows: {', '.join(_columns(made))}"
    )
    done(as_json, message, result)


@app.command()
def rows(
    ctx: typer.Context,
    table: TableArgument,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many rows.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Show a table's first rows."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        page = api.list_rows(found["id"], limit=limit)
    if as_json:
        echo_json(page)
        return
    names = ["_row", *(c["name"] for c in found.get("columns") or [])]
    echo_table(names, [[_cell(r.get(n)) for n in names] for r in page["data"]])


@app.command()
def append(
    ctx: typer.Context,
    table: TableArgument,
    file: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            help='Rows as JSON (a list of objects, or {"rows": [...]}) or JSON Lines '
            "(.jsonl, .ndjson: one object a line).",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Append rows from a JSON or JSON Lines file, all or nothing (values checked against the
    columns; a problem is named by row and column)."""
    rows_ = _read_rows(file)
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        result = api.append_rows(found["id"], rows_)
    done(as_json, f"appended {result['inserted']} rows to {labelled(found)}", result)


def _read_rows(file: Path) -> list[dict[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc}", param_hint="FILE") from None
    try:
        if file.suffix.lower() in (".jsonl", ".ndjson"):
            found: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            found = json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{file}: not JSON: {exc}", param_hint="FILE") from None
    if isinstance(found, dict) and isinstance(found.get("rows"), list):
        found = found["rows"]
    if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
        raise typer.BadParameter(f"{file}: expected rows, each a JSON object", param_hint="FILE")
    return found


@app.command("update-row")
def update_row(
    ctx: typer.Context,
    table: TableArgument,
    row_id: Annotated[int, typer.Argument(metavar="ROW", help="The row's id (its _row).")],
    values: Annotated[
        list[str],
        typer.Argument(
            metavar="NAME=VALUE...",
            help="New values; a VALUE is JSON when it parses (but stays text in a string "
            "column), null empties a cell.",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Change some columns of one row."""
    from dhub.cli.runs import read_values

    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        texts = {c["name"] for c in found.get("columns") or [] if c.get("type") == "string"}
        changed = api.update_row(found["id"], row_id, read_values(values, None, texts))
    done(as_json, f"updated row {row_id} of {labelled(found)}", changed)


@app.command("delete-rows")
def delete_rows(
    ctx: typer.Context,
    table: TableArgument,
    row_ids: Annotated[
        list[int], typer.Argument(metavar="ROW...", help="The rows' ids (their _row).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Delete rows by id."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        deleted = api.delete_rows(found["id"], row_ids)
    done(as_json, f"deleted {deleted} rows of {labelled(found)}", {"deleted": deleted})


@app.command("columns")
def columns_(
    ctx: typer.Context,
    table: TableArgument,
    column: ColumnOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set a table's columns (a new version): a new name adds a column, a missing one drops
    it with its values, integer -> number widens; what the rows cannot take is refused."""
    if not column:
        raise typer.BadParameter("give every column the table is to have", param_hint="--column")
    wanted = _parse_columns(column)
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        # A column kept keeps its description: -c names only its name and type.
        described = {c["name"]: c.get("description") for c in found.get("columns") or []}
        for col in wanted:
            if described.get(col["name"]):
                col["description"] = described[col["name"]]
        changed = api.update_table(found["id"], {"columns": wanted})
    message = f"{labelled(changed)} (version {changed.get('version')}): "
    done(as_json, message + ", ".join(_columns(changed)), changed)


def _echo_result(columns: list[str], rows_: list[list[Any]], empty: str) -> None:
    if not rows_:
        typer.echo(empty)
    else:
        echo_table(columns, [[_cell(v) for v in row] for row in rows_])


@app.command()
def query(
    ctx: typer.Context,
    table: TableArgument,
    query_json: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help="The query as JSON, e.g. "
            '\'{"group_by": ["region"], "aggregates": [{"op": "count"}]}\', or @file.json.',
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Run a structured query: filter, select, group_by, aggregates, sort, limit."""
    text = Path(query_json[1:]).read_text() if query_json.startswith("@") else query_json
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="QUERY") from None
    with reporting_errors():
        api = client_from(ctx)
        result = api.query_table(_resolve(api, table)["id"], body)
    if as_json:
        echo_json(result)
        return
    names = [c["name"] for c in result["columns"]]
    _echo_result(names, [[r.get(n) for n in names] for r in result["rows"]], "No rows.")
    if result.get("next_cursor"):
        typer.echo(f'(more: add "cursor": "{result["next_cursor"]}")')


@app.command()
def sql(
    ctx: typer.Context,
    statement: Annotated[
        str, typer.Argument(metavar="SQL", help="One SELECT, naming tables by name.")
    ],
    table: Annotated[
        list[str],
        typer.Option("--table", "-t", metavar="TABLE", help="A table it may read (repeat)."),
    ],
    limit: Annotated[
        int | None, typer.Option(min=1, max=10000, help="At most this many rows.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run read-only SQL over the tables given with --table."""
    with reporting_errors():
        result = client_from(ctx).sql(statement, table, limit=limit)
    if as_json:
        echo_json(result)
        return
    _echo_result(result["columns"], result["rows"], "No rows.")
    if result.get("truncated"):
        typer.echo("(truncated: there are more rows)")


@app.command()
def delete(ctx: typer.Context, table: TableArgument, as_json: JsonOption = False) -> None:
    """Delete a table and its rows."""
    with reporting_errors():
        api = client_from(ctx)
        found = _resolve(api, table)
        api.delete_table(found["id"])
    done(as_json, f"deleted {labelled(found)}", {"id": found["id"], "deleted": True})


class _Table(Kind):
    """A table, as the sharing commands find one."""

    def resolve(self, api: Client, ref: str) -> dict[str, Any]:
        return api.resolve_table(ref)


# share, unshare, grants, owners, mark, unmark; versions
register_sharing(app, _Table("table"))
register_versions(app, _Table("table"))
