"""``dhub tables`` changing rows and columns, and its versions, against a real app (SQLite and
PostgreSQL) through CliRunner: what a person sees, names for ids, errors naming the row and
column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api)

    return run


def values(api: Client, table: str) -> list[dict[str, Any]]:
    return list(api.iter_rows(table))


def test_rows_are_appended_changed_and_deleted(dhub: Any, api: Client, tmp_path: Path) -> None:
    columns = [{"name": "sku", "type": "string", "nullable": False},
               {"name": "count", "type": "integer"}]  # fmt: skip
    made = api.create_table("stock", columns)
    as_json = tmp_path / "rows.json"
    as_json.write_text(json.dumps([{"sku": "A-1", "count": 3}, {"sku": "B-2"}]))
    appended = dhub("tables", "append", "stock", as_json)
    assert appended.output == f"appended 2 rows to stock ({made['id']})\n"
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"sku": "C-3", "count": 1}\n\n{"sku": "D-4", "count": 2}\n')
    assert json.loads(dhub("tables", "append", made["id"], lines, "--json").stdout) == {
        "inserted": 2, "row_ids": [3, 4]}  # fmt: skip
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"rows": [{"sku": "E-5"}, {"sku": "F-6", "count": "many"}]}))
    refused = dhub("tables", "append", "stock", wrapped)
    assert refused.exit_code == 1
    assert "/rows/1/count" in refused.output and "row 2, column 'count'" in refused.output
    assert len(values(api, "stock")) == 4  # all or nothing
    not_rows = tmp_path / "scalar.json"
    not_rows.write_text("[1, 2]")
    bad = dhub("tables", "append", "stock", not_rows)
    assert bad.exit_code == 2 and "each a JSON object" in bad.output
    not_text = tmp_path / "rows.json"
    not_text.write_bytes(b"\xff\xfe[")
    unreadable = dhub("tables", "append", "stock", not_text)
    assert unreadable.exit_code == 2 and "cannot read" in unreadable.output

    # A string column keeps the text: 007 stays "007", the integer column gets a number.
    changed = dhub("tables", "update-row", "stock", "2", "sku=007", "count=9")
    assert changed.exit_code == 0, changed.output
    assert changed.output == f"updated row 2 of stock ({made['id']})\n"
    assert values(api, "stock")[1] == {"_row": 2, "sku": "007", "count": 9}
    cleared = dhub("tables", "update-row", "stock", "2", "count=null", "--json")
    assert json.loads(cleared.stdout)["count"] is None
    wrong = dhub("tables", "update-row", "stock", "2", "count=lots")
    assert wrong.exit_code == 1 and "'count'" in wrong.output

    deleted = dhub("tables", "delete-rows", "stock", "1", "3")
    assert deleted.output == f"deleted 2 rows of stock ({made['id']})\n"
    assert [r["_row"] for r in values(api, "stock")] == [2, 4]
    assert json.loads(dhub("tables", "delete-rows", "stock", "1", "--json").stdout) == {
        "deleted": 0}  # fmt: skip
    assert api.get_table(made["id"])["version"] == 1  # rows are not versions


def test_columns_make_a_version(dhub: Any, api: Client) -> None:
    columns = [{"name": "sku", "type": "string", "nullable": False, "description": "The code"},
               {"name": "count", "type": "integer"}]  # fmt: skip
    made = api.create_table("stock", columns)
    api.append_rows("stock", [{"sku": "A-1", "count": 3}])
    widened = dhub("tables", "columns", "stock", "-c", "sku:string!", "-c", "count:number",
                   "-c", "note:string")  # fmt: skip
    assert widened.exit_code == 0, widened.output
    assert widened.output == (
        f"stock ({made['id']}) (version 2): sku:string, count:number, note:string\n"
    )
    found = api.get_table("stock")
    assert found["columns"][0]["description"] == "The code"  # kept
    assert values(api, "stock") == [{"_row": 1, "sku": "A-1", "count": 3, "note": None}]
    refused = dhub("tables", "columns", "stock", "-c", "sku:integer!")
    assert refused.exit_code == 1 and "/columns/0/type" in refused.output
    none = dhub("tables", "columns", "stock")
    assert none.exit_code == 2 and "--column" in none.output

    listed = dhub("tables", "versions", "stock")
    assert [line.split()[0] for line in listed.output.splitlines()] == ["VERSION", "2", "1"]
    as_json = json.loads(dhub("tables", "versions", made["id"], "--json").stdout)
    assert [(v["version"], v["created_by"]) for v in as_json] == [
        (2, "user.admin"),
        (1, "user.admin"),
    ]
    first = json.loads(dhub("tables", "versions", "stock", "1").stdout)
    assert [c["type"] for c in first["columns"]] == ["string", "integer"]
    unknown = dhub("tables", "versions", "nothing")
    assert unknown.exit_code == 1 and "no table named 'nothing'" in unknown.output
