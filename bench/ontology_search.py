"""Ontology search latency: import N customers and 2N orders through the API (in process),
then time searches (a page of 50) on SQLite or PostgreSQL through the service the API calls,
inside the event loop (the test client's thread hops would otherwise dominate): a key lookup,
a typed filter, a text query, filter + text, and following a link. Shows what the LIKE-based
text search and the JSON filters cost as an ontology grows (docs/ontologies.md).

    .venv/bin/python bench/ontology_search.py [--objects 50000] [--rounds 100]
        [--database postgresql://postgres@127.0.0.1:5432/bench]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.api.app import create_app
from dhub.services.ontologies import OntologyService
from dhub.settings import Settings

TOKEN = "dhub_bench_token"
SCHEMA = {
    "name": "bench",
    "description": "bench",
    "object_types": [
        {
            "name": "customer",
            "primary_key": "id",
            "title_property": "name",
            "properties": [
                {"name": "id"},
                {"name": "name"},
                {"name": "country"},
                {"name": "score", "type": "integer"},
            ],
        },
        {
            "name": "order",
            "primary_key": "id",
            "properties": [{"name": "id"}, {"name": "total", "type": "number"}, {"name": "status"}],
        },
    ],
    "link_types": [
        {
            "name": "placed",
            "from_type": "customer",
            "to_type": "order",
            "cardinality": "one_to_many",
            "inverse": "placed_by",
        }
    ],
}
WORDS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"]
COUNTRIES = ["FR", "DE", "US", "GB", "IT", "ES", "NL", "JP"]


def _items(n: int, rng: random.Random) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(n):
        name = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}"
        items.append(
            {
                "type": "customer",
                "properties": {
                    "id": f"c{i}",
                    "name": name,
                    "country": rng.choice(COUNTRIES),
                    "score": rng.randrange(100),
                },
            }
        )
    for j in range(2 * n):
        items.append(
            {
                "type": "order",
                "properties": {
                    "id": f"o{j}",
                    "total": round(rng.uniform(1, 500), 2),
                    "status": rng.choice(["open", "shipped"]),
                },
            }
        )
        items.append({"link_type": "placed", "from": f"c{j % n}", "to": f"o{j}"})
    return items


async def _time(call: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=50_000, help="customers (orders: 2x)")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--database", default=None, help="a PostgreSQL URL; default SQLite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{Path(tmp) / 'dhub.db'}"
        app = create_app(Settings(data_dir=Path(tmp), database_url=url, admin_token=TOKEN))
        with TestClient(app) as client:
            client.headers["Authorization"] = f"Bearer {TOKEN}"
            ontology = client.post("/api/v1/ontologies", json=SCHEMA).json()["id"]
            base = f"/api/v1/ontologies/{ontology}"
            items = _items(args.objects, random.Random(19))
            start = time.perf_counter()
            for chunk in range(0, len(items), 20_000):
                done = client.post(f"{base}/import", json=items[chunk : chunk + 20_000])
                assert done.status_code == 200, done.text[:500]
            took = time.perf_counter() - start
            print(
                f"{url.split(':')[0]}: imported {len(items):,} items in {took:.1f}s "
                f"({len(items) / took:,.0f} items/s)"
            )
            svc: OntologyService = client.app.state.services.ontologies  # type: ignore[attr-defined]
            admin = Principal("user.admin", is_admin=True)
            half = f"c{args.objects // 2}"
            cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("get by key", lambda: svc.get_object(admin, ontology, "customer", half)),
                (
                    "filter (country eq, score gt)",
                    lambda: svc.search(
                        admin,
                        ontology,
                        {
                            "type": "customer",
                            "filters": [
                                {"property": "country", "value": "FR"},
                                {"property": "score", "op": "gt", "value": 90},
                            ],
                        },
                    ),
                ),
                (
                    "text (one word)",
                    lambda: svc.search(admin, ontology, {"type": "customer", "q": "umbrella"}),
                ),
                (
                    "text (two words, rare)",
                    lambda: svc.search(admin, ontology, {"q": "stark 4242"}),
                ),
                (
                    "filter + text",
                    lambda: svc.search(
                        admin,
                        ontology,
                        {
                            "type": "order",
                            "q": "shipped",
                            "filters": [{"property": "total", "op": "lt", "value": 10}],
                        },
                    ),
                ),
                ("follow link", lambda: svc.follow(admin, ontology, "customer", "c7", "placed")),
            ]
            for label, call in cases:
                times = sorted(client.portal.call(_time, call, args.rounds))  # type: ignore[attr-defined]
                p50 = statistics.median(times)
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(f"  {label:32} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")


if __name__ == "__main__":
    main()
