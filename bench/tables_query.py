"""A filter + group by over a 1,000,000-row table (issue 19's benchmark): through the API
(``POST /api/v1/tables/{id}/query`` over httpx's ASGI transport), through the ``table.query``
operation an agent's tool calls, through a whole agent run, and the same query run directly
on the database, in the same run, interleaved so the machine's noise hits all four alike.
Prints p50/p99 and the ratios to direct (goal: within 2x).

The agent run: a react agent listing the table, whose model is the scripted provider (it
answers at once): it calls ``query_table`` once with the query, then answers. Timed from
``POST /api/v1/agents/{id}/runs`` until the run has succeeded (the executor's own result, so
no polling interval is counted): queueing, the two model calls, the tool call through the
run's knowledge port, and every saved step and event.

The table is made through the API (its columns), then filled by the database's own bulk
load (COPY, or sqlite3 executemany) so that setting up takes seconds.

    .venv/bin/python bench/tables_query.py [--rows 1000000] [--rounds 20]
                                           [--db sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.services import table_tools
from dhub.settings import Settings
from tables_import import drop_schema, pg_schema_url, write_csv  # bench/ is on sys.path

TOKEN = "bench_tables_token"
COLUMNS = [
    {"name": "region", "type": "string"},
    {"name": "product", "type": "string"},
    {"name": "units", "type": "integer"},
    {"name": "price", "type": "number"},
    {"name": "day", "type": "date"},
]
QUERY = {
    "filter": {
        "and": [
            {"column": "region", "op": "eq", "value": "north"},
            {"column": "units", "op": "ge", "value": 10},
        ]
    },
    "group_by": ["product"],
    "aggregates": [
        {"op": "sum", "column": "units", "as": "units"},
        {"op": "avg", "column": "price", "as": "avg_price"},
        {"op": "count", "as": "n"},
    ],
    "sort": [{"column": "units", "desc": True}],
    "limit": 20,
}
DIRECT = (
    "SELECT product, SUM(units) AS units, AVG(price) AS avg_price, COUNT(*) AS n FROM {table} "
    "WHERE region = {p} AND units >= {p} GROUP BY product ORDER BY units DESC, product LIMIT 21"
)


AGENT = {
    "name": "bench-analyst", "description": "", "mode": "react", "input_mode": "chat",
    "agent": {"instructions": "Answer from the table.", "model_provider": "openai",
              "model": "gpt-4o-mini", "tools": [], "actors": []},
}  # fmt: skip
ASK = {"tool_calls": [{"id": "q1", "name": "query_table",
                       "arguments": {"table": "sales", **QUERY}}]}  # fmt: skip
ANSWER = "North: the top products by units."


def fill_sqlite(path: str, table: str, csv_path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    with csv_path.open(newline="") as f:
        rows = csv.reader(f)
        next(rows)
        conn.execute("BEGIN")
        conn.executemany(
            f'INSERT INTO "{table}" (region, product, units, price, day) VALUES (?, ?, ?, ?, ?)',
            ((r, p, int(u), float(x), d) for r, p, u, x, d in rows),
        )
        conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def fill_postgres(url: str, table: str, csv_path: Path) -> None:
    with psycopg.connect(url) as conn:
        with (
            conn.cursor() as cursor,
            cursor.copy(
                f'COPY "{table}" (region, product, units, price, day) '
                "FROM STDIN (FORMAT csv, HEADER)"
            ) as copy,
            csv_path.open("rb") as f,
        ):
            while chunk := f.read(1 << 20):
                copy.write(chunk)
        conn.commit()
        conn.execute(f'ANALYZE "{table}"')
        conn.commit()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(url: str, data_dir: Path, csv_path: Path, rounds: int) -> dict[str, list[float]]:
    # The scripted model's replies, in order: one tool call and one answer per agent run
    # (the check, the warm-up and the rounds).
    script = ProvidersConfig(
        entries={"openai": EntryConfig(type="scripted", replies=[ASK, ANSWER] * (rounds + 2))}
    )
    settings = Settings(data_dir=data_dir, database_url=url, admin_token=TOKEN, providers=script)
    app = create_app(settings)
    timings: dict[str, list[float]] = {"api": [], "operation": [], "agent run": [], "direct": []}
    async with app.router.lifespan_context(app):
        services = app.state.services
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers, timeout=600
        ) as client:
            made = await client.post("/api/v1/tables", json={"name": "sales", "columns": COLUMNS})
            made.raise_for_status()
            table_id = made.json()["id"]
            physical = "kt_" + table_id.split(".", 1)[1]
            if services.db.is_sqlite:
                fill_sqlite(services.db.sqlite_path, physical, csv_path)
            else:
                fill_postgres(url, physical, csv_path)
            principal = await services.auth.authenticate(f"Bearer {TOKEN}")
            made = await client.post("/api/v1/agents", json={**AGENT, "tables": [table_id]})
            made.raise_for_status()
            agent_id = made.json()["id"]

            async def api() -> Any:
                response = await client.post(f"/api/v1/tables/{table_id}/query", json=QUERY)
                response.raise_for_status()
                return response.json()["rows"]

            async def operation() -> Any:
                arguments = {"table_ids": [table_id], "table": "sales", **QUERY}
                return (await table_tools.query(services.db, principal, arguments))["rows"]

            async def agent_run() -> Any:
                body = {"inputs": {"message": "Which products sold most in the north?"}}
                started = await client.post(f"/api/v1/agents/{agent_id}/runs", json=body)
                started.raise_for_status()
                run_id = started.json()["id"]
                # The executor's result as the run ends; None if it had ended already.
                result = await services.runs.executor.wait(run_id)
                status = result.status if result else await _status(client, run_id)
                assert status == "succeeded", (run_id, result and result.error)
                return run_id

            direct_sql = DIRECT.format(
                table=f'"{physical}"', p="?" if services.db.is_sqlite else "%s"
            )

            async def direct() -> Any:
                if services.db.is_sqlite:
                    return await asyncio.to_thread(
                        _sqlite_direct, services.db.sqlite_path, direct_sql
                    )
                async with await psycopg.AsyncConnection.connect(url) as conn:
                    cursor = await conn.execute(direct_sql, ("north", 10))
                    return await cursor.fetchall()

            runners: dict[str, Callable[[], Awaitable[Any]]] = {
                "api": api, "operation": operation, "agent run": agent_run, "direct": direct,
            }  # fmt: skip
            first = await api()
            second = await operation()
            same = [(r["product"], r["units"], r["n"]) for r in first]  # averages: float order
            assert same == [(r["product"], r["units"], r["n"]) for r in second] and len(same) == 20
            events = await client.get(
                f"/api/v1/runs/{await agent_run()}/events", params={"limit": 1000}
            )
            [tool] = [e for e in events.json()["data"] if e["type"] == "tool.succeeded"]
            rows = tool["data"]["result"]["rows"]
            assert [(r["product"], r["units"], r["n"]) for r in rows] == same
            assert [r[0] for r in (await direct())[:20]] == [r["product"] for r in first]
            for name in runners:  # warm-up
                await runners[name]()
            for _ in range(rounds):
                for name, run in runners.items():
                    started = time.perf_counter()
                    await run()
                    timings[name].append(time.perf_counter() - started)
    return timings


async def _status(client: httpx.AsyncClient, run_id: str) -> str:
    """The status of a run that is no longer live in the executor: it has ended (an embedded
    server runs it to the end, and this agent never waits for anyone)."""
    return str((await client.get(f"/api/v1/runs/{run_id}")).json()["status"])


def _sqlite_direct(path: str, sql: str) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, ("north", 10)).fetchall()
    finally:
        conn.close()


def report(db: str, timings: dict[str, list[float]]) -> None:
    direct50 = statistics.median(timings["direct"])
    for name, values in timings.items():
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        print(
            f"{db:9} {name:10} p50 {p50 * 1000:8.1f} ms  p99 {p99 * 1000:8.1f} ms  "
            f"p50/direct {p50 / direct50:5.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        csv_path = root / "sales.csv"
        write_csv(csv_path, args.rows)
        print(f"{args.rows:,} rows; query: region = north AND units >= 10, group by product, "
              f"sum/avg/count, top 20; {args.rounds} rounds")  # fmt: skip
        if args.db in ("sqlite", "both"):
            report(
                "sqlite",
                asyncio.run(
                    measure(f"sqlite:///{root / 'd.db'}", root / "d1", csv_path, args.rounds)
                ),
            )
        if args.db in ("postgres", "both"):
            schema, url = pg_schema_url()
            try:
                report("postgres", asyncio.run(measure(url, root / "d2", csv_path, args.rounds)))
            finally:
                drop_schema(schema)


if __name__ == "__main__":
    main()
