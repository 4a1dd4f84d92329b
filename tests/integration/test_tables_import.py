"""Tables made from files and files appended to tables, over HTTP, on SQLite and PostgreSQL:
CSV, JSON Lines and Parquet round trips with inferred types, errors pointing at row and
column, size limits, and a hidden table answering like a random id."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from dhub.api.routers import tables as tables_router
from tests.conftest import ROOT
from tests.integration.test_sharing_api import World, ok
from tests.integration.test_tables_api import RANDOM, TABLES, all_rows, make_table

CSV = (
    "Region,Units,Unit Price,Shipped,On Date,At,Note\n"
    "north,3,2.5,true,2024-01-31,2024-01-31T10:00:00Z,\n"
    'south,,10,false,2024-02-01,2024-02-01 11:30:00,"a, b"\n'
    "east,-7,1e3,yes,2024-02-02,2024-02-02T23:59:59.25+01:00,x\n"
)
EXPECTED_TYPES = {
    "Region": "string", "Units": "integer", "Unit_Price": "number", "Shipped": "boolean",
    "On_Date": "date", "At": "datetime", "Note": "string",
}  # fmt: skip


def import_file(client: TestClient, name: str, data: bytes, fmt: str, **kw: Any) -> Any:
    params = {"name": name, "format": fmt}
    return client.post(f"{TABLES}/import", params=params, content=data, **kw)


def types_of(table: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["type"] for c in table["columns"]}


def problems(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [e["message"] for e in response.json()["errors"]]


def test_csv_round_trip_with_inferred_types(client: TestClient) -> None:
    body = ok(import_file(client, "sales", CSV.encode(), "csv"), 201)
    assert body["inserted"] == 3
    assert types_of(body["table"]) == EXPECTED_TYPES
    rows = all_rows(client, body["table"]["id"])
    assert rows[0] == {
        "_row": 1, "Region": "north", "Units": 3, "Unit_Price": 2.5, "Shipped": True,
        "On_Date": "2024-01-31", "At": "2024-01-31T10:00:00", "Note": None,
    }  # fmt: skip
    assert rows[1]["Units"] is None and rows[1]["Note"] == "a, b"
    assert rows[2]["Unit_Price"] == 1000.0 and rows[2]["At"] == "2024-02-02T22:59:59.250000"
    # appending the same file again: columns by name
    again = client.post(f"{TABLES}/{body['table']['id']}/import", content=CSV.encode(),
                        headers={"Content-Type": "text/csv"})  # fmt: skip
    assert ok(again) == {"inserted": 3}
    assert len(all_rows(client, body["table"]["id"])) == 6


def test_jsonl_round_trip_with_inferred_types(client: TestClient) -> None:
    lines = [
        {"id": 1, "score": 1, "ok": True, "day": "2024-01-01", "tags": ["a"], "name": "x"},
        {"id": 2, "score": 2.5, "ok": False, "day": "2024-01-02T10:00:00", "tags": None},
        {"id": 3, "score": None, "extra": {"k": 1}, "name": "2024-01-01"},
    ]
    data = b"\n".join(orjson.dumps(line) for line in lines) + b"\n\n"
    body = ok(import_file(client, "events", data, "jsonl"), 201)
    assert types_of(body["table"]) == {
        "id": "integer", "score": "number", "ok": "boolean", "day": "datetime", "tags": "json",
        "name": "string", "extra": "json",
    }  # fmt: skip
    rows = all_rows(client, body["table"]["id"])
    assert rows[0]["tags"] == ["a"] and rows[0]["day"] == "2024-01-01T00:00:00"
    assert rows[1]["score"] == 2.5 and rows[1]["name"] is None
    assert rows[2]["extra"] == {"k": 1} and rows[2]["name"] == "2024-01-01"


def test_parquet_round_trip_keeps_its_types(client: TestClient) -> None:
    table = pa.table(
        {
            "city": ["Oslo", None, "Lima"],
            "count": pa.array([1, 2, None], pa.int32()),
            "ratio": [0.5, 1.5, 2.0],
            "flag": [True, False, None],
            "day": [date(2024, 1, 1), date(2024, 1, 2), None],
            "at": pa.array(
                [datetime(2024, 1, 1, 12, tzinfo=UTC), None, datetime(2024, 5, 1, tzinfo=UTC)],
                pa.timestamp("us", tz="UTC"),
            ),
            "items": [[1, 2], [], None],
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    body = ok(import_file(client, "cities", sink.getvalue(), "parquet"), 201)
    assert types_of(body["table"]) == {
        "city": "string", "count": "integer", "ratio": "number", "flag": "boolean",
        "day": "date", "at": "datetime", "items": "json",
    }  # fmt: skip
    rows = all_rows(client, body["table"]["id"])
    assert rows[0] == {
        "_row": 1, "city": "Oslo", "count": 1, "ratio": 0.5, "flag": True,
        "day": "2024-01-01", "at": "2024-01-01T12:00:00", "items": [1, 2],
    }  # fmt: skip
    assert rows[1]["city"] is None and rows[2]["items"] is None


def test_errors_point_at_row_and_column(client: TestClient) -> None:
    table_id = make_table(client, "typed", "name:string!", "price:number", "day:date")
    data = "name,price,day\na,1,2024-01-01\nb,abc,2024-01-02\n,3,\nd,4,2024-02-30\ne,5\n"
    found = problems(
        client.post(f"{TABLES}/{table_id}/import", params={"format": "csv"}, content=data)
    )
    assert found == [
        "row 2, column 'price': 'abc' is not a number",
        "row 3, column 'name': a value is required",
        "row 4, column 'day': '2024-02-30' is not a date (YYYY-MM-DD)",
        "row 5 has 2 values; the header has 3 columns",
    ]
    assert all_rows(client, table_id) == []  # all or nothing
    wrong = problems(
        client.post(
            f"{TABLES}/{table_id}/import", params={"format": "csv"}, content="name,colour\nx,red\n"
        )
    )
    assert wrong == ["the table has no column for 'colour' (its columns: name, price, day)"]
    missing = problems(
        client.post(f"{TABLES}/{table_id}/import", params={"format": "csv"}, content="price\n1\n")
    )
    assert missing == ["column 'name' is required, and the file has no such column"]
    bad_json = problems(
        client.post(
            f"{TABLES}/{table_id}/import",
            params={"format": "jsonl"},
            content=b'{"name": "a"}\n[1]\n',
        )
    )
    assert bad_json == ["row 2: a row is a JSON object"]
    wrong_type = problems(
        client.post(
            f"{TABLES}/{table_id}/import",
            params={"format": "jsonl"},
            content=b'{"name": "a", "price": "12"}\n',
        )
    )
    assert wrong_type == ["row 1, column 'price': '12' is not a number"]


def parquet(**columns: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def test_parquet_errors_point_at_row_and_column(client: TestClient) -> None:
    table_id = make_table(client, "typed", "name:string!", "price:number", "day:date")
    url = f"{TABLES}/{table_id}/import"
    # A Parquet file is typed: text in a number column is refused, every row named (as a
    # JSON Lines "12"; only CSV's text is parsed).
    data = parquet(name=["a", "b"], price=["1", "abc"], day=["2024-01-01", "2024-01-02"])
    assert problems(client.post(url, params={"format": "parquet"}, content=data)) == [
        "row 1, column 'price': '1' is not a number",
        "row 2, column 'price': 'abc' is not a number",
    ]
    # A null in a required column, and a date that is not one.
    data = parquet(
        name=pa.array(["a", None, "c"], pa.string()),
        price=pa.array([1.0, 2.0, None], pa.float64()),
        day=["2024-01-01", "2024-01-02", "2024-02-30"],
    )
    response = client.post(url, params={"format": "parquet"}, content=data)
    assert problems(response) == [
        "row 2, column 'name': a value is required",
        "row 3, column 'day': '2024-02-30' is not a date (YYYY-MM-DD)",
    ]
    assert {e["loc"] for e in response.json()["errors"]} == {"/file"}
    assert all_rows(client, table_id) == []  # all or nothing
    fixed = parquet(name=["a"], price=pa.array([1.5], pa.float64()), day=[date(2024, 1, 1)])
    assert ok(client.post(url, params={"format": "parquet"}, content=fixed)) == {"inserted": 1}


def test_bad_files_and_formats(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    assert problems(import_file(client, "x", b"", "csv")) == [
        "the file is empty: a CSV starts with a header row"
    ]
    assert problems(import_file(client, "x", b"\xff\xfe,\n", "csv"))[0].startswith(
        "the file is not UTF-8"
    )
    assert problems(import_file(client, "x", b"not parquet", "parquet"))[0].startswith(
        "the file is not Parquet"
    )
    response = client.post(f"{TABLES}/import", params={"name": "x"}, content=b"a\n1\n")
    assert response.status_code == 422 and "format" in response.text
    monkeypatch.setattr(tables_router, "MAX_IMPORT_BYTES", 10)
    response = import_file(client, "x", b"a\n" + b"1\n" * 20, "csv")
    assert response.status_code == 413
    assert ok(client.get(TABLES))["data"] == []  # nothing made by the refused imports


def test_import_into_a_hidden_table_answers_like_a_random_id(client: TestClient) -> None:
    world = World(client)
    mallory = world.user("mallory")
    table_id = make_table(client)
    for target in (table_id, RANDOM):
        response = client.post(
            f"{TABLES}/{target}/import", params={"format": "csv"}, content=b"region\nx\n",
            headers=world.as_(mallory),
        )  # fmt: skip
        assert response.status_code == 404
        assert response.json()["detail"] == f"No table with id '{target}'."
    assert all_rows(client, table_id) == []


def test_empty_strings_and_backslash_n_stay_strings(client: TestClient) -> None:
    lines = [{"s": ""}, {"s": "\\N"}, {"s": None}, {"s": 'a,"b"\n\tc'}]
    data = b"\n".join(orjson.dumps(line) for line in lines)
    body = ok(import_file(client, "strings", data, "jsonl"), 201)
    assert [r["s"] for r in all_rows(client, body["table"]["id"])] == [
        "",
        "\\N",
        None,
        'a,"b"\n\tc',
    ]


def test_the_example_sales_table_imports(client: TestClient) -> None:
    data = (ROOT / "examples" / "knowledge" / "sales.csv").read_bytes()
    body = ok(import_file(client, "sales", data, "csv"), 201)
    assert body["inserted"] == 50
    assert types_of(body["table"]) == {
        "order_id": "integer", "day": "date", "region": "string", "product": "string",
        "units": "integer", "unit_price": "number", "customer": "string", "paid": "boolean",
    }  # fmt: skip


def test_both_csv_readers_read_alike(client: TestClient) -> None:
    """A new table's import reads a clean CSV with pyarrow, an append with the csv module:
    quoted commas, quotes, newlines, empty cells and a BOM come out the same either way."""
    data = (
        '\ufeffname,note,n\r\n"a, b","say ""hi""",1\r\nc,"two\nlines",\r\n,"",3\r\né,☃,-4\r\n'
    ).encode()
    body = ok(import_file(client, "tricky", data, "csv"), 201)
    table_id = body["table"]["id"]
    again = client.post(f"{TABLES}/{table_id}/import", params={"format": "csv"}, content=data)
    assert ok(again) == {"inserted": 4}
    rows = [{k: v for k, v in r.items() if k != "_row"} for r in all_rows(client, table_id)]
    assert rows[:4] == rows[4:]
    assert rows[:4] == [
        {"name": "a, b", "note": 'say "hi"', "n": 1},
        {"name": "c", "note": "two\nlines", "n": None},
        {"name": None, "note": None, "n": 3},
        {"name": "é", "note": "☃", "n": -4},
    ]
    # a file pyarrow cannot read as is (a short row) still gets the csv module's pointers
    short = b"name,n\nx,1\ny\n"
    assert problems(import_file(client, "short", short, "csv")) == [
        "row 2 has 1 values; the header has 2 columns"
    ]
