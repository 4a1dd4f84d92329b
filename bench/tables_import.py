"""Import a CSV of N rows (default 1,000,000) into a new table through the API, against the
database's own bulk load of the same file, in the same run (issue 19's benchmark).

- dhub: ``POST /api/v1/tables/import?format=csv`` through an in-process app (httpx over
  ASGI): the upload is spooled, column types are inferred from the whole file, every value is
  checked and converted, and the rows go in by the store's bulk path (executemany off the
  loop thread on SQLite, COPY on PostgreSQL), in one transaction with the table's creation.
- SQLite baseline: ``sqlite3`` ``executemany`` of the CSV's rows as the csv module reads
  them (strings, no checks) into a table of the same types, one transaction, same pragmas.
- PostgreSQL baseline: ``COPY ... FROM STDIN (FORMAT csv, HEADER)`` of the file's bytes.

Prints rows/s for each and the ratio.

    .venv/bin/python bench/tables_import.py [--rows 1000000] [--db sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import random
import sqlite3
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

from dhub.api.app import create_app
from dhub.settings import Settings

TOKEN = "bench_tables_token"
PG_URL = os.environ.get("DHUB_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = [f"product-{i:03d}" for i in range(200)]


def write_csv(path: Path, rows: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = date(2024, 1, 1)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["region", "product", "units", "price", "day"])
        for _ in range(rows):
            out.writerow(
                [
                    rng.choice(REGIONS),
                    rng.choice(PRODUCTS),
                    rng.randint(1, 50),
                    round(rng.uniform(1, 500), 2),
                    (start + timedelta(days=rng.randint(0, 700))).isoformat(),
                ]
            )


async def dhub_import(url: str, data_dir: Path, csv_path: Path) -> tuple[float, int]:
    app = create_app(Settings(data_dir=data_dir, database_url=url, admin_token=TOKEN))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/csv"}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            body = csv_path.read_bytes()  # noqa: ASYNC240 (before the clock starts)
            started = time.perf_counter()
            response = await client.post(
                "/api/v1/tables/import",
                params={"name": f"sales-{uuid.uuid4().hex[:6]}"},
                content=body,
                headers=headers,
                timeout=3600,
            )
            elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, int(response.json()["inserted"])


def sqlite_baseline(path: Path, csv_path: Path) -> tuple[float, int]:
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute(
        "CREATE TABLE base (_row INTEGER PRIMARY KEY AUTOINCREMENT, region TEXT, product TEXT, "
        "units BIGINT, price DOUBLE, day DATE)"
    )
    started = time.perf_counter()
    with csv_path.open(newline="") as f:
        rows = csv.reader(f)
        next(rows)
        conn.execute("BEGIN")
        cursor = conn.executemany(
            "INSERT INTO base (region, product, units, price, day) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    count = cursor.rowcount
    conn.close()
    return elapsed, count


def postgres_baseline(url: str, csv_path: Path) -> tuple[float, int]:
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE base (_row BIGSERIAL PRIMARY KEY, region TEXT, product TEXT, "
            "units BIGINT, price DOUBLE PRECISION, day DATE)"
        )
        conn.commit()
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy(
                "COPY base (region, product, units, price, day) FROM STDIN (FORMAT csv, HEADER)"
            ) as copy,
            csv_path.open("rb") as f,
        ):
            while chunk := f.read(1 << 20):
                copy.write(chunk)
        conn.commit()
        elapsed = time.perf_counter() - started
        count = conn.execute("SELECT count(*) FROM base").fetchone()[0]  # type: ignore[index]
    return elapsed, count


def pg_schema_url() -> tuple[str, str]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    return schema, f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


def drop_schema(schema: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def report(
    name: str, dhub: tuple[float, int], base: tuple[float, int], label: str
) -> dict[str, Any]:
    d_rate, b_rate = dhub[1] / dhub[0], base[1] / base[0]
    print(
        f"{name:10} dhub import: {dhub[1]:>9,} rows in {dhub[0]:6.2f} s = {d_rate:>9,.0f} rows/s | "
        f"{label}: {base[0]:6.2f} s = {b_rate:>9,.0f} rows/s | dhub/base = {d_rate / b_rate:.2f}"
    )
    return {"db": name, "dhub_rows_per_s": d_rate, "base_rows_per_s": b_rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        csv_path = root / "sales.csv"
        write_csv(csv_path, args.rows)
        size = csv_path.stat().st_size / 1e6
        print(f"{args.rows:,} rows, {size:.1f} MB of CSV")
        if args.db in ("sqlite", "both"):
            dhub = asyncio.run(dhub_import(f"sqlite:///{root / 'dhub.db'}", root / "d1", csv_path))
            base = sqlite_baseline(root / "base.db", csv_path)
            report("sqlite", dhub, base, "sqlite3 executemany")
        if args.db in ("postgres", "both"):
            schema, url = pg_schema_url()
            try:
                dhub = asyncio.run(dhub_import(url, root / "d2", csv_path))
                base = postgres_baseline(url, csv_path)
                report("postgres", dhub, base, "COPY csv")
            finally:
                drop_schema(schema)


if __name__ == "__main__":
    main()
