"""Tables through the SDK and ``dhub tables`` (human output), against a real app on SQLite and
PostgreSQL: CLI -> SDK -> HTTP -> API -> store. Another user's Client is the outsider."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import Result

from dhub.client import Client, InvalidInput, NotFound, UnknownName
from tests.integration.test_cli_folders import api, dhub, ok, table, user  # noqa: F401


def test_sdk_tables_end_to_end(api: Client, tmp_path: Path) -> None:  # noqa: F811
    made = api.create_table(
        "stock",
        [
            {"name": "sku", "type": "string", "nullable": False},
            {"name": "count", "type": "integer"},
        ],
    )
    assert api.resolve_table("stock")["id"] == made["id"]
    assert api.append_rows("stock", [{"sku": "a", "count": 1}, {"sku": "b"}]) == {
        "inserted": 2,
        "row_ids": [1, 2],
    }
    assert api.update_row("stock", 2, {"count": 5})["count"] == 5
    assert [r["sku"] for r in api.iter_rows("stock", page_size=1)] == ["a", "b"]
    assert api.delete_rows("stock", [1]) == 1
    with pytest.raises(InvalidInput) as refused:
        api.append_rows("stock", [{"count": "x"}])
    assert {e.loc for e in refused.value.errors} == {"/rows/0/count", "/rows/0/sku"}
    changed = api.update_table(
        "stock", {"columns": [*made["columns"], {"name": "note", "type": "string"}]}
    )
    assert changed["version"] == 2
    buffer = io.BytesIO()
    pq.write_table(pa.table({"sku": ["c", "d"], "count": [7, 8]}), buffer)
    assert api.import_rows("stock", buffer.getvalue(), format="parquet") == {"inserted": 2}
    path = tmp_path / "prices.jsonl"
    path.write_text('{"sku": "a", "price": 2.5}\n{"sku": "b", "price": 1}\n')
    imported = api.import_table("prices", path)
    assert imported["inserted"] == 2
    assert [c["type"] for c in imported["table"]["columns"]] == ["string", "number"]
    result = api.query_table("stock", {"aggregates": [{"op": "sum", "column": "count", "as": "n"}]})
    assert result["rows"] == [{"n": 20}]
    joined = api.sql(
        "SELECT s.sku, p.price FROM stock s JOIN prices p ON p.sku = s.sku", ["stock", "prices"]
    )
    assert joined["rows"] == [["b", 1.0]]
    api.delete_table("stock")
    with pytest.raises(UnknownName):
        api.get_table("stock")


def test_sdk_outsider_gets_nothing(api: Client, user: Callable[[str], Client]) -> None:  # noqa: F811
    made = api.create_table("secret", [{"name": "x", "type": "integer"}])
    api.append_rows(made["id"], [{"x": 1}])
    eve = user("eve")
    with pytest.raises(UnknownName):
        eve.resolve_table("secret")
    for attempt in (
        lambda: eve.list_rows(made["id"]),
        lambda: eve.query_table(made["id"], {}),
        lambda: eve.import_rows(made["id"], b"x\n2\n", format="csv"),
        lambda: eve.sql("SELECT * FROM secret", [made["id"]]),
    ):
        with pytest.raises(NotFound) as hidden:
            attempt()
        assert hidden.value.detail == f"No table with id '{made['id']}'."


def test_cli_tables(dhub: Callable[..., Result], tmp_path: Path) -> None:  # noqa: F811
    sales = tmp_path / "sales.csv"
    sales.write_text("region,units,price\nnorth,3,2.5\nsouth,1,10\nnorth,4,1.25\n")
    out = ok(dhub("tables", "import", str(sales))).stdout
    assert "with 3 rows: region:string, units:integer, price:number" in out
    assert table(dhub("tables", "list"))[0] == ["ID", "NAME", "COLUMNS", "UPDATED"]
    rows = table(dhub("tables", "rows", "sales"))
    assert rows[0] == ["_row", "region", "units", "price"] and rows[1] == ["1", "north", "3", "2.5"]
    grouped = table(
        dhub(
            "tables", "query", "sales", '{"group_by": ["region"], "aggregates": [{"op": "count"}]}'
        )
    )
    assert grouped == [["region", "count"], ["north", "2"], ["south", "1"]]
    answered = table(
        dhub(
            "tables",
            "sql",
            "SELECT region, units FROM sales ORDER BY units",
            "-t",
            "sales",
            "--limit",
            "2",
        )
    )
    assert answered == [
        ["region", "units"],
        ["south", "1"],
        ["north", "3"],
        ["(truncated: there are more rows)"],
    ]
    refused = dhub("tables", "sql", "DELETE FROM sales", "-t", "sales")
    assert refused.exit_code == 1 and "Only a SELECT" in refused.output
    assert "deleted sales" in ok(dhub("tables", "delete", "sales")).stdout
