"""Searching an ontology's objects (type, typed filters, text) against a reference computed
here in Python, on SQLite and PostgreSQL: generated objects and queries (hypothesis), every
page followed. Strings mix cases, accents and LIKE's own characters; values may be absent."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_sharing_api import ok

API = "/api/v1/ontologies"
PROPS = {"s": "string", "n": "number", "i": "integer", "b": "boolean", "d": "date", "t": "datetime"}
SCHEMA = {
    "name": "items",
    "description": "generated",
    "object_types": [
        {
            "name": "item",
            "properties": [{"name": "k"}, *({"name": n, "type": t} for n, t in PROPS.items())],
            "primary_key": "k",
            "title_property": "s",
        },
        {"name": "other", "properties": [{"name": "k"}, {"name": "s"}], "primary_key": "k"},
    ],
}
ALPHABET = "aAbBéÉ%_ z"
texts = st.text(alphabet=ALPHABET, min_size=0, max_size=6)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "s": texts,
    "n": st.sampled_from([-1.5, 0, 0.25, 2, 2.0, 3.75, 10]),
    "i": st.integers(-3, 3),
    "b": st.booleans(),
    "d": st.dates(dt.date(2025, 12, 30), dt.date(2026, 1, 3)).map(dt.date.isoformat),
    "t": st.sampled_from(
        [
            "2026-01-01T00:00:00Z",
            "2026-01-01T09:30:00Z",
            "2026-01-01T10:00:00+01:00",
            "2026-01-02T00:00:00Z",
        ]
    ),
}
OPS = {
    "s": ["eq", "ne", "lt", "gt", "in", "contains"],
    "n": ["eq", "ne", "lt", "gte", "in"],
    "i": ["eq", "ne", "lte", "gt", "in"],
    "b": ["eq", "ne"],
    "d": ["eq", "lt", "gt", "in"],
    "t": ["eq", "ne", "lt", "gt"],
}


@st.composite
def objects(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    keys = draw(
        st.lists(st.text(alphabet="abcXYZ09é", min_size=1, max_size=4), max_size=25, unique=True)
    )
    out = {}
    for key in keys:
        props: dict[str, Any] = {"k": key}
        for name, values in VALUES.items():
            if draw(st.booleans()) or (name == "s" and draw(st.booleans())):
                props[name] = draw(values)
        out[key] = props
    return out


@st.composite
def filters(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for name in draw(st.lists(st.sampled_from(sorted(PROPS)), max_size=2)):
        op = draw(st.sampled_from(OPS[name]))
        if op == "in":
            value: Any = draw(st.lists(VALUES[name], min_size=1, max_size=3))
        elif op == "contains":
            value = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=2))
        else:
            value = draw(VALUES[name])
        out.append({"property": name, "op": op, "value": value})
    return out


def _utc(value: str) -> str:
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)
    return parsed.replace(tzinfo=None).isoformat() + "Z"


def _stored(props: dict[str, Any]) -> dict[str, Any]:
    return {k: _utc(v) if k == "t" else v for k, v in props.items()}


def _passes(value: Any, op: str, wanted: Any, kind: str) -> bool:
    if kind == "datetime":
        wanted = [_utc(w) for w in wanted] if op == "in" else _utc(wanted)
    if op == "ne":
        return value is None or value != wanted
    if value is None:
        return False
    return {
        "eq": lambda: value == wanted,
        "in": lambda: value in wanted,
        "contains": lambda: wanted in value,
        "lt": lambda: value < wanted,
        "lte": lambda: value <= wanted,
        "gt": lambda: value > wanted,
        "gte": lambda: value >= wanted,
    }[op]()


def reference(
    stored: dict[str, dict[str, Any]], flts: list[dict[str, Any]], q: str | None
) -> list[str]:
    found = []
    for key in sorted(stored):
        props = stored[key]
        title = props.get("s") or key
        text = "\n".join([title, key, *(v for v in props.values() if isinstance(v, str))]).lower()
        if q and not all(w in text for w in q.lower().split()):
            continue
        if all(
            _passes(props.get(f["property"]), f["op"], f["value"], PROPS[f["property"]])
            for f in flts
        ):
            found.append(key)
    return found


def _all_pages(client: TestClient, url: str, query: dict[str, Any]) -> list[str]:
    keys: list[str] = []
    cursor = None
    while True:
        body = {**query, "limit": 7, **({"cursor": cursor} if cursor else {})}
        page = ok(client.post(url, json=body))
        keys += [o["key"] for o in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return keys


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    data=objects(),
    queries=st.lists(st.tuples(filters(), st.one_of(st.none(), texts)), min_size=1, max_size=6),
)
def test_search_answers_what_the_reference_answers(
    client: TestClient,
    data: dict[str, dict[str, Any]],
    queries: list[tuple[list[dict[str, Any]], str | None]],
) -> None:
    ontology_id = ok(client.post(API, json={**SCHEMA, "name": f"items-{id(data)}"}), 201)["id"]
    items = [{"type": "item", "properties": p} for p in data.values()]
    # An object of another type with the same key and text: never in an "item" search.
    items += [{"type": "other", "properties": {"k": k, "s": "aA"}} for k in list(data)[:3]]
    ok(client.post(f"{API}/{ontology_id}/import", json=items))
    stored = {k: _stored(p) for k, p in data.items()}
    url = f"{API}/{ontology_id}/objects/search"
    for flts, q in queries:
        query: dict[str, Any] = {"type": "item", "filters": flts}
        if q is not None:
            query["q"] = q
        assert _all_pages(client, url, query) == reference(stored, flts, q), (flts, q)
    # The same through the query string, for one filter of each kind of value.
    got = ok(
        client.get(
            f"{API}/{ontology_id}/objects",
            params={"type": "item", "filter": ["i:gt:0", "b:eq:true"], "limit": 200},
        )
    )
    want = reference(
        stored,
        [{"property": "i", "op": "gt", "value": 0}, {"property": "b", "op": "eq", "value": True}],
        None,
    )
    assert [o["key"] for o in got["data"]] == want
    ok(client.delete(f"{API}/{ontology_id}"), 204)


def test_search_refuses_what_it_cannot_type(client: TestClient) -> None:
    ontology_id = ok(client.post(API, json=SCHEMA), 201)["id"]
    url = f"{API}/{ontology_id}/objects/search"

    def errors(body: dict[str, Any]) -> list[tuple[str, str]]:
        response = client.post(url, json=body)
        assert response.status_code == 422, response.text
        return [(e["loc"], e["code"]) for e in response.json()["errors"]]

    assert errors({"filters": [{"property": "s", "value": "x"}]}) == [("/type", "missing")]
    assert errors(
        {
            "type": "item",
            "filters": [
                {"property": "zz", "value": 1},
                {"property": "b", "op": "lt", "value": True},
                {"property": "n", "value": "x"},
                {"property": "i", "op": "in", "value": []},
                {"property": "s", "op": "like", "value": "x"},
            ],
        }
    ) == [
        ("/filters/0/property", "unknown_property"),
        ("/filters/1/op", "invalid_op"),
        ("/filters/2/value", "invalid_value"),
        ("/filters/3/value", "invalid_value"),
        ("/filters/4/op", "invalid_op"),
    ]
    assert errors({"type": "nope"}) == [("/type", "unknown_type")]
    assert errors({"type": "item", "limit": 0}) == [("/limit", "out_of_range")]
    assert errors({"type": "item", "cursor": "bogus"})[0][1] == "invalid_cursor"
    assert errors({"type": "item", "where": {}}) == [("/where", "extra_forbidden")]
    response = client.get(
        f"{API}/{ontology_id}/objects", params={"type": "item", "filter": "i:gt:many"}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "/filters/0/value"
