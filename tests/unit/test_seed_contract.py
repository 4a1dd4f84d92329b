"""The published AgentResponse schema (copied into tests/fixtures/seed) is the contract: these
tables are copied from the seed text, field by field, and checked against the models and the
served OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from dhub.api.app import create_app
from dhub.domain.agent import AgentResponse
from dhub.settings import Settings
from tests.conftest import SEED, load_json

REQ, OPT = True, False
NO_DEFAULT = object()

# (field, required, enum or None, default or NO_DEFAULT, nullable)
AGENT_RESPONSE: list[tuple[str, bool, list[str] | None, Any, bool]] = [
    ("id", REQ, None, NO_DEFAULT, False),
    ("name", REQ, None, NO_DEFAULT, False),
    ("alias", OPT, None, NO_DEFAULT, True),
    ("category", REQ, None, NO_DEFAULT, False),
    ("type", OPT, None, NO_DEFAULT, True),
    ("collection_id", OPT, None, NO_DEFAULT, True),
    ("folder_id", OPT, None, NO_DEFAULT, True),
    ("tags", OPT, None, NO_DEFAULT, True),
    ("description", REQ, None, NO_DEFAULT, False),
    ("markings", OPT, None, [], False),
    ("created_at", OPT, None, NO_DEFAULT, True),
    ("updated_at", OPT, None, NO_DEFAULT, True),
    ("owners", OPT, None, NO_DEFAULT, False),
    ("my_share_scope", OPT, ["owner", "grant", "admin"], NO_DEFAULT, True),
    ("input_mode", OPT, ["chat", "event"], "chat", False),
    ("mode", OPT, ["react", "workflow"], "react", False),
    ("agent", OPT, None, NO_DEFAULT, True),
    ("nodes", OPT, None, NO_DEFAULT, False),
    ("edges", OPT, None, NO_DEFAULT, False),
    ("tables", OPT, None, [], False),
    ("templates", OPT, None, [], False),
    ("ontologies", OPT, None, [], False),
    ("conversations", OPT, None, NO_DEFAULT, False),
    ("options", OPT, None, NO_DEFAULT, True),
    ("is_builtin", OPT, None, False, False),
    ("item", REQ, None, NO_DEFAULT, False),
]

OWNER = [
    ("id", REQ, None, NO_DEFAULT, False),
    ("type", REQ, ["user", "group", "public"], NO_DEFAULT, False),
    ("display_name", REQ, None, NO_DEFAULT, False),
    ("avatar_url", OPT, None, NO_DEFAULT, True),
    ("avatar_config", OPT, None, NO_DEFAULT, True),
    ("email", OPT, None, NO_DEFAULT, True),
]

AGENT_NODE_CONFIG = [
    ("instructions", REQ, None, NO_DEFAULT, False),
    ("prompts", OPT, None, NO_DEFAULT, False),
    ("model_provider", REQ, None, NO_DEFAULT, False),
    ("model", REQ, None, NO_DEFAULT, False),
    ("tools", OPT, None, NO_DEFAULT, False),
    ("actors", OPT, None, NO_DEFAULT, False),
    ("roles", OPT, None, NO_DEFAULT, False),
    ("outputs", OPT, None, NO_DEFAULT, True),
    ("max_iterations", OPT, None, 50, False),
    ("max_input_tokens", OPT, None, NO_DEFAULT, True),
    ("compaction", OPT, None, NO_DEFAULT, True),
    ("options", OPT, None, NO_DEFAULT, True),
    (
        "reasoning_effort",
        OPT,
        ["none", "minimal", "low", "medium", "high", "xhigh", "max"],
        NO_DEFAULT,
        True,
    ),
]

PROMPT_REF = [
    ("prompt_id", REQ, None, NO_DEFAULT, False),
    ("variables", OPT, None, NO_DEFAULT, True),
]

COMPACTION = [
    ("enabled", OPT, None, NO_DEFAULT, True),
    ("trigger_ratio", OPT, None, NO_DEFAULT, True),
    ("target_ratio", OPT, None, NO_DEFAULT, True),
    ("summary_max_tokens", OPT, None, NO_DEFAULT, True),
]

START_VARIABLE = [
    ("name", REQ, None, NO_DEFAULT, False),
    ("type", REQ, ["string", "number", "boolean", "object", "array"], NO_DEFAULT, False),
    ("required", OPT, None, True, False),
    ("default", OPT, None, NO_DEFAULT, False),
    ("description", OPT, None, "", False),
]

EDGE = [
    ("source", REQ, None, NO_DEFAULT, False),
    ("target", REQ, None, NO_DEFAULT, False),
    ("condition", OPT, None, NO_DEFAULT, True),
]

CONVERSATION = [
    ("name", REQ, None, NO_DEFAULT, False),
    ("type", REQ, ["string", "number", "boolean", "array", "object"], NO_DEFAULT, False),
    ("description", REQ, None, NO_DEFAULT, False),
    ("default", OPT, None, NO_DEFAULT, False),
]

START_NODE = [
    ("id", REQ, None, NO_DEFAULT, False),
    ("type", REQ, ["start"], NO_DEFAULT, False),
    ("config", REQ, None, NO_DEFAULT, False),
    ("metadata", OPT, None, {}, False),
]

# Numeric bounds the seed states ("Possible values: >= 1", "> 0 and < 1", ...).
BOUNDS = {
    ("AgentNodeConfig", "max_input_tokens"): {"minimum": 1},
    ("AgentCompaction", "trigger_ratio"): {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ("AgentCompaction", "target_ratio"): {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ("AgentCompaction", "summary_max_tokens"): {"minimum": 128, "maximum": 8192},
}

TABLES = {
    "AgentResponse": AGENT_RESPONSE,
    "Owner": OWNER,
    "AgentNodeConfig": AGENT_NODE_CONFIG,
    "PromptRef": PROMPT_REF,
    "AgentCompaction": COMPACTION,
    "StartVariable": START_VARIABLE,
    "Edge": EDGE,
    "ConversationVariable": CONVERSATION,
    "StartWorkflowNode": START_NODE,
}


@pytest.fixture(scope="module")
def components(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = tmp_path_factory.mktemp("openapi")
    app = create_app(Settings(data_dir=data, database_url=f"sqlite:///{data / 'x.db'}"))
    schemas: dict[str, Any] = app.openapi()["components"]["schemas"]
    return schemas


def _branches(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return list(prop.get("anyOf", [prop]))


def test_seed_example_round_trips() -> None:
    example = load_json(SEED / "AgentResponse.example.json")
    expected = {**example, "item": example["id"]}
    parsed = AgentResponse.model_validate(expected)
    dumped = parsed.model_dump(mode="json", exclude={"version", "effective_markings"})
    assert dumped == expected


def test_seed_nodes_parse_to_their_types() -> None:
    example = load_json(SEED / "AgentResponse.example.json")
    parsed = AgentResponse.model_validate({**example, "item": example["id"]})
    assert [type(n).__name__.removesuffix("WorkflowNode") for n in parsed.nodes] == [
        "Start", "End", "LLM", "ToolCall", "ActorCall", "IfElse", "Loop",
        "Parallel", "HumanInput", "ErrorHandler", "Code", "Template", "Variable",
    ]  # fmt: skip
    tools = parsed.agent.tools if parsed.agent else []
    assert [type(t).__name__ for t in tools] == [
        "str",
        "AgentResourceRef",
        "AgentToolConfig",
        "dict",
    ]


@pytest.mark.parametrize(
    ("model", "field", "required", "enum", "default", "nullable"),
    [(m, *row) for m, rows in TABLES.items() for row in rows],
)
def test_openapi_field_matches_seed(
    components: dict[str, Any],
    model: str,
    field: str,
    required: bool,
    enum: list[str] | None,
    default: Any,
    nullable: bool,
) -> None:
    schema = components[model]
    assert field in schema["properties"], f"{model}.{field} missing from the OpenAPI schema"
    assert (field in schema.get("required", [])) is required
    prop = schema["properties"][field]
    branches = _branches(prop)
    assert any(b.get("type") == "null" for b in branches) is nullable
    if enum is not None:
        found = [b.get("enum") or ([b["const"]] if "const" in b else None) for b in branches]
        assert sorted(enum) in [sorted(e) for e in found if e]
    if default is not NO_DEFAULT:
        assert prop.get("default") == default


@pytest.mark.parametrize(("where", "bounds"), list(BOUNDS.items()))
def test_openapi_bounds_match_seed(
    components: dict[str, Any], where: tuple[str, str], bounds: dict[str, int]
) -> None:
    model, field = where
    branches = _branches(components[model]["properties"][field])
    number = next(b for b in branches if b.get("type") in ("integer", "number"))
    assert {k: number[k] for k in bounds} == bounds


def test_response_has_every_seed_field_and_nothing_unexpected(components: dict[str, Any]) -> None:
    fields = set(components["AgentResponse"]["properties"])
    # Beyond the seed: the version (every update adds one) and effective_markings (issue 18).
    assert fields == {row[0] for row in AGENT_RESPONSE} | {"version", "effective_markings"}
    assert components["AgentResponse"]["properties"]["item"].get("deprecated") is True
