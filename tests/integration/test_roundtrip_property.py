"""Random valid agent documents survive the API unchanged (hypothesis), on both databases."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dhub.domain.functions import KNOWN_DECORATORS
from dhub.domain.resources import BUILT_IN_TOOLS
from tests.integration.test_fixture_documents import SERVER_KEYS, assert_contains

Draw = st.DrawFn
text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24)
ident = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
requirement = st.from_regex(r"[a-z][a-z0-9]{0,12}(==[0-9]\.[0-9])?", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_value = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
json_object = st.dictionaries(text, json_value, max_size=3)
var_type = st.sampled_from(["string", "number", "boolean", "object", "array"])
effort = st.sampled_from(["none", "minimal", "low", "medium", "high", "xhigh", "max"])
seconds = st.integers(1, 10**6) | st.floats(0.001, 10**6)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


# Create-time rules (domain/function_spec.py): the source defines an entry point, inputs/outputs are
# JSON schemas, decorators wrap the entry point with valid arguments, each at most once.
main_source = st.sampled_from(
    ["def main(x):\n    return x\n", "def main(x: int, y: str = 'a') -> dict:\n    return {}\n"]
)
schemas = st.fixed_dictionaries({"type": var_type}, optional={"description": text})
DECORATOR_ARGUMENTS = {
    "retry": st.fixed_dictionaries(
        {"attempts": st.integers(1, 10)},
        optional={"delay": st.integers(0, 60), "backoff": st.sampled_from(["fixed", "linear"])},
    ),
    "timeout": st.fixed_dictionaries({"seconds": seconds}),
    "cache": st.fixed_dictionaries({"ttl": seconds}),
    "rate_limit": st.fixed_dictionaries({"calls": st.integers(1, 100), "period": seconds}),
}


def function_spec() -> st.SearchStrategy[dict[str, Any]]:
    decorators = st.lists(st.sampled_from(KNOWN_DECORATORS), max_size=2, unique=True).flatmap(
        lambda kinds: st.tuples(
            *(
                st.fixed_dictionaries(
                    {
                        "decorator": st.just(k),
                        "name": st.just("main"),
                        "arguments": DECORATOR_ARGUMENTS[k],
                    }
                )
                for k in kinds
            )
        ).map(list)
    )
    return st.fixed_dictionaries(
        {"source": main_source},
        optional={
            "inputs": st.dictionaries(ident, schemas, max_size=2),
            "outputs": st.dictionaries(ident, schemas, max_size=2),
            "dependencies": st.lists(requirement, max_size=2),
            "decorators": decorators,
        },
    )


def overrides(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The object form: a stored tool or actor with fields set for this agent."""
    optional: dict[str, st.SearchStrategy[Any]] = {"options": json_object}
    if kind == "actor":
        optional["confirmation_policy"] = st.just("confirm")
    return st.fixed_dictionaries(
        {"id": st.just(f"@{kind}"), "description": text}, optional=optional
    )


def item(inline: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A tool_call node's tool: stored (any form) or inline."""
    ref = st.fixed_dictionaries({"id": st.just("@tool"), "name": text})
    return st.just("@tool") | ref | inline | overrides("tool")


# An agent's references must name stored resources the caller can read (checked on create):
# "@tool", "@actor", "@role" and "@prompt" stand for ones the test stores first (_stored).
def agent_item(kind: str, inline: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(sorted(BUILT_IN_TOOLS)) if kind == "tool" else st.nothing()
    ref = st.fixed_dictionaries({"id": st.just(f"@{kind}"), "name": text})
    return st.just(f"@{kind}") | names | ref | inline


tool_config = st.fixed_dictionaries(
    {"name": ident, "function": function_spec()},
    optional={
        "description": text,
        "type": st.just("python"),
        "require_browser": st.booleans(),
        "options": json_object,
    },
)
actor_config = st.fixed_dictionaries(
    {"name": ident, "function": function_spec()},
    optional={
        "description": text,
        "confirmation_policy": st.sampled_from(["confirm", "auto"]),
        "options": json_object,
    },
)


@st.composite
def compaction(draw: Draw) -> dict[str, Any]:
    trigger = draw(st.floats(0.02, 0.99))
    target = draw(st.floats(0.01, trigger, exclude_max=True))
    return {
        "enabled": draw(maybe(st.booleans())),
        "trigger_ratio": trigger,
        "target_ratio": target,
        "summary_max_tokens": draw(maybe(st.integers(128, 8192))),
    }


inline_role = st.fixed_dictionaries(
    {"name": ident, "instructions": text},
    optional={"description": text, "max_iterations": st.integers(1, 20)},
)
agent_config = st.fixed_dictionaries(
    {"instructions": text, "model_provider": ident, "model": ident},
    optional={
        "prompts": st.lists(
            st.fixed_dictionaries(
                {"prompt_id": st.just("@prompt")},
                optional={"variables": maybe(st.dictionaries(st.just("x"), json_value))},
            ),
            max_size=2,
        ),
        "tools": st.lists(agent_item("tool", tool_config | overrides("tool")), max_size=3),
        "actors": st.lists(agent_item("actor", actor_config | overrides("actor")), max_size=2),
        "roles": st.lists(agent_item("role", inline_role), max_size=2),
        "outputs": maybe(json_object),
        "max_iterations": st.integers(1, 1000),
        "max_input_tokens": maybe(st.integers(1, 10**7)),
        "compaction": maybe(compaction()),
        "options": maybe(json_object),
        "reasoning_effort": maybe(effort),
    },
)


def node_config(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    mappings = st.dictionaries(ident, text | json_value, max_size=2)
    configs: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "template": st.fixed_dictionaries({"template": text}, optional={"output": ident}),
        "code": st.fixed_dictionaries(
            {"source": main_source},
            optional={
                "input_mappings": mappings,
                "outputs": st.dictionaries(ident, var_type | schemas, max_size=2),
                "timeout": seconds,
            },
        ),
        "llm": st.fixed_dictionaries(
            {"model_provider": ident, "model": ident, "prompt": text},
            optional={
                "system_prompt": text,
                "reasoning_effort": maybe(effort),
                "output": ident,
                "response": json_object,
            },
        ),
        "tool_call": st.fixed_dictionaries(
            {"tool": item(tool_config)}, optional={"input_mappings": mappings, "timeout": seconds}
        ),
        "human_input": st.fixed_dictionaries(
            {"prompt": text},
            optional={
                "input_fields": st.lists(
                    st.fixed_dictionaries(
                        {"name": ident, "type": var_type},
                        optional={"required": st.booleans(), "options": st.lists(text, max_size=2)},
                    ),
                    max_size=2,
                ),
                "timeout": seconds,
                "assignees": st.lists(ident, max_size=2),
                "on_timeout": st.sampled_from(["error", "skip", "default"]),
            },
        ),
        "variable": st.fixed_dictionaries(
            {
                "operations": st.lists(
                    st.fixed_dictionaries(
                        {
                            "action": st.sampled_from(["set", "append", "increment", "clear"]),
                            "variable": ident,
                        },
                        optional={"value": json_value},
                    ),
                    max_size=2,
                )
            }
        ),
    }
    return configs[kind]


@st.composite
def workflow_parts(draw: Draw) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A start, a chain of random nodes (one of them maybe a loop with a body), an end."""
    start_vars = st.lists(
        st.fixed_dictionaries(
            {"name": ident, "type": var_type},
            optional={"required": st.booleans(), "default": json_value, "description": text},
        ),
        max_size=3,
    )
    nodes = [{"id": "start", "type": "start", "config": {"variables": draw(start_vars)}}]
    kinds = draw(
        st.lists(
            st.sampled_from(["template", "code", "llm", "tool_call", "human_input", "variable"]),
            max_size=5,
        )
    )
    chain = ["start"]
    for i, kind in enumerate(kinds):
        node: dict[str, Any] = {"id": f"n{i}", "type": kind, "config": draw(node_config(kind))}
        if draw(st.booleans()):
            node["metadata"] = draw(json_object)
        nodes.append(node)
        chain.append(node["id"])
    edges: list[dict[str, Any]] = []
    if draw(st.booleans()):
        body = [
            {"id": "b0", "type": "template", "config": {"template": "{{ item }}"}},
            {"id": "b1", "type": "template", "config": {"template": "{{ text }}"}},
        ]
        loop = {
            "id": "loop",
            "type": "loop",
            "config": {"source": "{{ items }}", "body_node_ids": ["b0", "b1"]},
        }
        nodes += [loop, *body]
        chain.append("loop")
        edges.append({"source": "b0", "target": "b1"})
    nodes.append(
        {
            "id": "end",
            "type": "end",
            "config": {
                "outputs": draw(
                    st.lists(
                        st.fixed_dictionaries({"name": ident, "type": var_type, "value": text}),
                        max_size=2,
                    )
                )
            },
        }
    )
    chain.append("end")
    condition = st.none() | st.just("{{ true }}")
    for src, dst in itertools.pairwise(chain):
        edge: dict[str, Any] = {"source": src, "target": dst}
        if (c := draw(condition)) is not None:
            edge["condition"] = c
        edges.append(edge)
    return nodes, edges


@st.composite
def agent_documents(draw: Draw) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": draw(text.filter(bool)) + uuid.uuid4().hex[:8],
        "description": draw(text),
    }
    optional = {
        "alias": maybe(text),
        "category": st.just("agent"),
        "type": maybe(ident),
        # folder_id and collection_id name real containers: tests/integration/test_folders.py
        "tags": maybe(st.lists(ident, max_size=3, unique=True)),
        "input_mode": st.sampled_from(["chat", "event"]),
        # Knowledge is named by reference, checked like tools: the ones the test stores first.
        "tables": st.lists(st.just("@table"), max_size=1),
        "templates": st.lists(st.just("@template"), max_size=1),
        "ontologies": st.lists(st.just("@ontology"), max_size=1),
        "conversations": st.lists(
            st.fixed_dictionaries(
                {"name": ident, "type": var_type, "description": text},
                optional={"default": json_value},
            ),
            max_size=2,
        ),
        "options": maybe(json_object),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            doc[key] = draw(strategy)
    if draw(st.booleans()):
        doc["mode"] = "workflow"
        doc["nodes"], doc["edges"] = draw(workflow_parts())
        if draw(st.booleans()):
            doc["agent"] = None
    else:
        if draw(st.booleans()):
            doc["mode"] = "react"
        doc["agent"] = draw(agent_config)
    return doc


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(doc=agent_documents())
def test_random_valid_documents_round_trip(client: TestClient, doc: dict[str, Any]) -> None:
    doc = _with_ids(doc, _stored(client))
    created = client.post("/api/v1/agents", json=doc)
    assert created.status_code == 201, created.text
    body = created.json()
    assert_contains(body, doc)
    assert set(body) - set(doc) <= SERVER_KEYS | {
        "alias", "type", "tags", "input_mode", "mode", "agent", "nodes", "edges", "tables",
        "templates", "ontologies", "conversations", "options", "category",
    }  # fmt: skip
    assert client.get(f"/api/v1/agents/{body['id']}").json() == body


_REFERENCED = {
    "prompt": {
        "name": "rt-prompt",
        "description": "d",
        "template": "{{x}}",
        "variables": [{"name": "x", "default": "y"}],
    },
    "tool": {"name": "rt_tool", "description": "d", "function": {"source": "def main(): pass"}},
    "actor": {"name": "rt_actor", "description": "d", "function": {"source": "def main(): pass"}},
    "role": {"name": "rt-role", "description": "d", "instructions": "i"},
    "table": {"name": "rt_table", "columns": [{"name": "n", "type": "integer"}]},
    "template": {"name": "rt-template", "format": "markdown", "body": "# Report"},
    "ontology": {
        "name": "rt-ontology",
        "description": "d",
        "object_types": [
            {"name": "thing", "properties": [{"name": "id", "type": "string"}], "primary_key": "id"}
        ],
    },
}
_PLURAL = {"ontology": "ontologies"}


def _stored(client: TestClient) -> dict[str, str]:
    """The ids of the resources the sentinels stand for, stored on first use."""
    ids = {}
    for kind, doc in _REFERENCED.items():
        url = f"/api/v1/{_PLURAL.get(kind, kind + 's')}"
        found = client.get(url, params={"name": doc["name"]}).json()["data"]
        if found:
            ids[f"@{kind}"] = found[0]["id"]
        else:
            created = client.post(url, json=doc)
            assert created.status_code == 201, created.text
            ids[f"@{kind}"] = created.json()["id"]
    return ids


def _with_ids(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, dict):
        return {k: _with_ids(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_ids(v, ids) for v in value]
    return value
