"""YAML on the wire: bodies sent as YAML are the same values as JSON (through the same bounds),
YAML that is broken or reaches beyond JSON (aliases, tags, keys that are not text) is a 422
with its line and column, and every JSON response is YAML to a client whose Accept prefers it,
numbers, booleans, nulls and key order exact. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from dhub.domain.yaml_docs import dump
from tests.conftest import FIXTURES, ROOT, load_json, valid_fixtures
from tests.integration.test_resources_api import prompt_doc
from tests.integration.test_runs_api import ok
from tests.support.examples import filled_text

API = "/api/v1"
TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")
YAML_IN = {"Content-Type": "application/yaml"}
YAML_OUT = {"Accept": "application/yaml"}
# Values a careless YAML writer or reader changes: text that looks like something else,
# numbers at the edges of exactness, multi-line text.
TRICKY = {
    "zero_point_one": 0.1, "big": 9007199254740993, "int64": 9223372036854775807,
    "negative_zero": -0.0, "tiny": 1e-300, "huge": 1.5e300, "yes": True, "no": False,
    "nothing": None, "text_yes": "yes", "text_null": "null", "text_number": "1e3",
    "text_octal": "0o17", "text_date": "2024-05-01", "text_empty": "", "text_tilde": "~",
    "multi_line": "def main():\n    return {'x': 1}\n", "indented": "  two spaces\nthen none",
    "unicode": "café ✓ \u2028 next", "carriage": "a\r\nb", "quote": "it's \"quoted\"",
    "colon": "key: value", "hash": "# not a comment", "nested": {"z": 1, "a": [1, "1", 1.0]},
}  # fmt: skip


def as_yaml(value: Any) -> str:
    return dump(value)


def yaml_of(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/yaml"
    return yaml.safe_load(response.text)


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types (1 is not 1.0 nor True) and the same key order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and (a == b or json.dumps(a) == json.dumps(b))


def holds(stored: Any, written: Any) -> bool:
    """``stored`` says what ``written`` says, with the same types (defaults may be added)."""
    if isinstance(written, dict) and isinstance(stored, dict):
        return all(k in stored and holds(stored[k], v) for k, v in written.items())
    if isinstance(written, list) and isinstance(stored, list):
        pairs = zip(stored, written, strict=False)
        return len(stored) == len(written) and all(holds(a, b) for a, b in pairs)
    return same(stored, written)


@pytest.mark.parametrize("media", ["application/yaml", "application/x-yaml", "text/yaml",
                                   "application/yaml; charset=utf-8"])  # fmt: skip
def test_an_agent_created_from_yaml_is_the_one_json_makes(client: TestClient, media: str) -> None:
    doc = {**TRIAGE, "options": TRICKY}
    created = ok(client.post(f"{API}/agents", content=as_yaml(doc),
                             headers={"Content-Type": media}), 201)  # fmt: skip
    assert same(created["options"], TRICKY)
    assert created["nodes"] == TRIAGE["nodes"]
    checked = client.post(f"{API}/agents/validate", content=as_yaml(doc), headers=YAML_IN)
    assert ok(checked) == {"valid": True, "errors": []}


@pytest.mark.parametrize("fixture", valid_fixtures(), ids=lambda p: p.stem)
def test_every_fixture_reads_back_as_yaml_exactly(client: TestClient, fixture: Any) -> None:
    doc = load_json(fixture)
    created = ok(client.post(f"{API}/agents", content=as_yaml(doc), headers=YAML_IN), 201)
    as_json = ok(client.get(f"{API}/agents/{created['id']}"))
    assert same(as_json, created)
    assert same(yaml_of(client.get(f"{API}/agents/{created['id']}", headers=YAML_OUT)), as_json)
    listed = ok(client.get(f"{API}/agents"))
    assert same(yaml_of(client.get(f"{API}/agents", headers=YAML_OUT)), listed)
    versions = f"{API}/agents/{created['id']}/versions"
    assert same(yaml_of(client.get(versions, headers=YAML_OUT)), ok(client.get(versions)))
    assert same(yaml_of(client.get(f"{versions}/1", headers=YAML_OUT)), as_json)


def test_patch_and_runs_take_yaml(client: TestClient) -> None:
    agent = ok(client.post(f"{API}/agents", json=TRIAGE), 201)
    patch = "description: |\n  Two lines\n  of description.\ntags: [a, b]\n"
    merge_yaml = {"Content-Type": "application/merge-patch+yaml"}
    patched = ok(client.patch(f"{API}/agents/{agent['id']}", content=patch, headers=merge_yaml))
    assert patched["description"] == "Two lines\nof description.\n"
    assert patched["tags"] == ["a", "b"]
    body = "inputs:\n  ticket: Checkout page shows an error\n"
    run = yaml_of(client.post(f"{API}/agents/{agent['id']}/runs", content=body,
                              headers={**YAML_IN, **YAML_OUT}), 202)  # fmt: skip
    assert run["inputs"]["ticket"] == "Checkout page shows an error"
    assert same(yaml_of(client.get(f"{API}/runs/{run['id']}", headers=YAML_OUT))["inputs"],
                run["inputs"])  # fmt: skip


def test_resources_answer_in_yaml(client: TestClient) -> None:
    made = ok(client.post(f"{API}/prompts", content=as_yaml(prompt_doc()), headers=YAML_IN), 201)
    one = f"{API}/prompts/{made['id']}"
    for path in (one, f"{API}/prompts", f"{one}/versions", f"{one}/versions/1"):
        assert same(yaml_of(client.get(path, headers=YAML_OUT)), ok(client.get(path)))


def test_errors_answer_in_yaml_too(client: TestClient) -> None:
    missing = yaml_of(client.get(f"{API}/agents/agent.nope", headers=YAML_OUT), 404)
    assert missing == {"detail": "No agent with id 'agent.nope'.", "errors": []}
    invalid = yaml_of(client.post(f"{API}/agents", content="name: x\n",
                                  headers={**YAML_IN, **YAML_OUT}), 422)  # fmt: skip
    assert invalid["errors"][0]["loc"] == "/description"


@pytest.mark.parametrize(
    ("accept", "yaml_wanted"),
    [
        ("application/yaml", True),
        ("text/yaml, application/json;q=0.5", True),
        ("application/json, application/yaml;q=0.5", False),
        ("application/yaml;q=0.5, */*", False),
        ("application/yaml;q=0", False),
        ("*/*", False),
    ],
)
def test_accept_decides(client: TestClient, accept: str, yaml_wanted: bool) -> None:
    response = client.get(f"{API}/agents", headers={"Accept": accept})
    wanted = "application/yaml" if yaml_wanted else "application/json"
    assert response.headers["content-type"] == wanted


def error_of(client: TestClient, text: str | bytes) -> dict[str, Any]:
    body = ok(client.post(f"{API}/agents", content=text, headers=YAML_IN), 422)
    [error] = body["errors"]
    return dict(error)


def test_broken_yaml_says_where(client: TestClient) -> None:
    error = error_of(client, "name: x\ndescription: [unclosed\nmode: react\n")
    assert error["code"] == "yaml_invalid" and "(line 3, column 5)" in error["message"]
    error = error_of(client, "name: x\n\tdescription: tab\n")
    assert error["code"] == "yaml_invalid" and "line 2, column 1" in error["message"]
    error = error_of(client, "a: 1\n---\nb: 2\n")
    assert error["code"] == "yaml_invalid" and "more than one YAML document" in error["message"]


@pytest.mark.parametrize(
    ("text", "loc", "code"),
    [
        ("a: &x [1, 2]\nb: *x\n", "/a", "yaml_alias"),
        ("name: !!binary aGk=\n", "/name", "yaml_tag"),
        ("name: !!python/object/apply:os.system [ls]\n", "/name", "yaml_tag"),
        ("tags: !!set {a, b}\n", "/tags", "yaml_tag"),
        ("name: !custom x\n", "/name", "yaml_tag"),
        ("options:\n  when: !!timestamp 2024-05-01\n", "/options/when", "yaml_tag"),
        ("options:\n  n: !!int twelve\n", "/options/n", "yaml_tag"),
        ("options:\n  1: one\n", "/options", "yaml_key"),
        ("options:\n  yes: one\n", "/options", "yaml_key"),
        ("options:\n  ? [a]\n  : b\n", "/options", "yaml_key"),
        ("options:\n  x: .inf\n", "/options/x", "yaml_number"),
        ('options:\n  x: "a\\0b"\n', "/options/x", "nul"),
        ("options:\n  x: 9223372036854775808\n", "/options/x", "integer_out_of_range"),
        ("options: " + "[" * 70 + "]" * 70 + "\n", "/options" + "/0" * 63, "too_deep"),
    ],
)
def test_what_json_cannot_hold_is_refused(
    client: TestClient, text: str, loc: str, code: str
) -> None:
    error = error_of(client, text)
    assert (error["loc"], error["code"]) == (loc, code), error


def test_a_billion_laughs_is_refused_at_once(client: TestClient) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    started = time.monotonic()
    error = error_of(client, "\n".join(lines) + "\n")
    assert error["code"] == "yaml_alias"
    assert time.monotonic() - started < 2


def test_a_large_yaml_body_is_read(client: TestClient) -> None:
    doc = {**TRIAGE, "name": "large", "options": {f"k{i}": "v" * 40 for i in range(5000)}}
    text = as_yaml(doc)
    assert len(text) > 64 * 1024  # read off the event loop
    created = ok(client.post(f"{API}/agents", content=text, headers=YAML_IN), 201)
    assert same(created["options"], doc["options"])
    assert same(yaml_of(client.get(f"{API}/agents/{created['id']}", headers=YAML_OUT)), created)


def test_the_yaml_examples_are_read_as_written(client: TestClient) -> None:
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        written = yaml.safe_load(path.read_text())
        text = filled_text(client, path.read_text(), written)  # ${table:sales} and the like
        created = ok(client.post(f"{API}/agents", content=text.encode(), headers=YAML_IN), 201)
        assert holds(created, yaml.safe_load(text)), path.name
