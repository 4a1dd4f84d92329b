"""The document validator, pure: schema errors as JSON pointers, bounds, modes and graph rules."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.domain.errors import InvalidInput
from dhub.domain.merge_patch import merge_patch
from dhub.domain.pointers import join
from dhub.engine.actions import MAX_RETRY_DELAY, backoff
from dhub.engine.validate import collect_errors, validate_agent_document
from tests.conftest import FIXTURES, load_json


def batch() -> dict[str, Any]:
    return copy.deepcopy(load_json(FIXTURES / "valid" / "workflow_batch.json"))


def triage() -> dict[str, Any]:
    return copy.deepcopy(load_json(FIXTURES / "valid" / "workflow_triage.json"))


def errors_of(doc: Any) -> dict[str, str]:
    spec, errors = collect_errors(doc)
    assert (spec is None) == bool(errors)
    found = {e.loc: e.code for e in errors}
    assert len(found) == len(errors), f"two errors at one location: {errors}"
    return found


def node_index(doc: dict[str, Any], node_id: str) -> int:
    return next(i for i, n in enumerate(doc["nodes"]) if n["id"] == node_id)


def test_fixtures_are_valid() -> None:
    for name in ("workflow_batch", "workflow_triage", "react_support", "event_summarizer"):
        assert errors_of(load_json(FIXTURES / "valid" / f"{name}.json")) == {}


def test_validate_raises_with_every_error() -> None:
    doc = triage()
    doc["nodes"][1]["config"]["timeout"] = -1
    doc["edges"][0]["target"] = "nowhere"
    with pytest.raises(InvalidInput) as caught:
        validate_agent_document(doc)
    assert {e.loc for e in caught.value.errors} >= {"/nodes/1/config/timeout", "/edges/0/target"}
    assert "problems" in caught.value.detail


def test_edge_into_a_loop_body_from_outside_is_invalid() -> None:
    doc = batch()
    doc["edges"].append({"source": "start", "target": "square"})
    assert errors_of(doc) == {f"/edges/{len(doc['edges']) - 1}/target": "edge_crosses_container"}


def test_edge_out_of_a_parallel_branch_is_invalid() -> None:
    doc = batch()
    doc["edges"].append({"source": "join_lines", "target": "end"})
    assert errors_of(doc) == {f"/edges/{len(doc['edges']) - 1}/source": "edge_crosses_container"}


def test_node_in_two_containers() -> None:
    doc = batch()
    aggregate = node_index(doc, "aggregate")
    doc["nodes"][aggregate]["config"]["branches"][0]["node_ids"].append("label")
    loc = f"/nodes/{aggregate}/config/branches/0/node_ids/1"
    assert errors_of(doc) == {loc: "node_in_two_containers"}


def test_error_handler_rules() -> None:
    doc = batch()
    guard = node_index(doc, "guard")
    doc["nodes"][guard]["config"]["target_node_id"] = "ghost"
    doc["nodes"][guard]["config"]["fallback_node_id"] = "start"
    doc["edges"].append({"source": "guard", "target": "end"})
    found = errors_of(doc)
    assert found[f"/nodes/{guard}/config/target_node_id"] == "unknown_node"
    assert found[f"/nodes/{guard}/config/fallback_node_id"] == "invalid_fallback"
    assert found[f"/edges/{len(doc['edges']) - 1}/source"] == "edge_on_error_handler"


def test_unreachable_node_and_second_start() -> None:
    doc = triage()
    doc["nodes"].append({"id": "orphan", "type": "template", "config": {"template": "x"}})
    assert errors_of(doc) == {f"/nodes/{len(doc['nodes']) - 1}": "unreachable_node"}
    doc["nodes"][-1] = {"id": "start2", "type": "start", "config": {}}
    assert errors_of(doc) == {f"/nodes/{len(doc['nodes']) - 1}/type": "multiple_start_nodes"}


def test_if_else_edges_must_say_true_or_false() -> None:
    doc = triage()
    doc["edges"][3]["condition"] = "maybe"
    assert errors_of(doc) == {"/edges/3/condition": "if_else_edge_unlabelled"}


def test_loop_mode_needs_its_field() -> None:
    doc = batch()
    each = node_index(doc, "each")
    doc["nodes"][each]["config"]["mode"] = "count"
    assert errors_of(doc) == {f"/nodes/{each}/config/count": "missing"}


def test_no_end_node_and_empty_workflow() -> None:
    doc = triage()
    doc["nodes"] = [n for n in doc["nodes"] if n["type"] != "end"]
    doc["edges"] = [e for e in doc["edges"] if e["target"] != "end"]
    assert errors_of(doc) == {"/nodes": "no_end_node"}
    assert errors_of({**doc, "nodes": [], "edges": []}) == {"/nodes": "workflow_needs_nodes"}


def test_a_long_chain_is_checked_without_recursion() -> None:
    n = 5000
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start", "config": {}}]
    nodes += [{"id": f"t{i}", "type": "template", "config": {"template": "x"}} for i in range(n)]
    nodes.append({"id": "end", "type": "end", "config": {}})
    ids = [x["id"] for x in nodes]
    edges = [{"source": a, "target": b} for a, b in itertools.pairwise(ids)]
    edges.append({"source": f"t{n - 1}", "target": "t0"})
    doc = {"name": "long", "description": "", "mode": "workflow", "nodes": nodes, "edges": edges}
    assert errors_of(doc) == {f"/edges/{len(edges) - 1}": "cycle"}


def test_schema_errors_point_into_unions() -> None:
    doc = load_json(FIXTURES / "valid" / "react_support.json")
    doc["agent"]["tools"][0]["function"]["sourcee"] = "typo"
    doc["agent"]["tools"].append({"id": "tool.x"})
    doc["agent"]["actors"][0]["confirmation_policy"] = "sometimes"
    doc["agent"]["actors"][0]["function"]["decorators"] = [{"decorator": "memo", "name": "f"}]
    assert errors_of(doc) == {
        "/agent/tools/0/function/sourcee": "extra_forbidden",
        "/agent/tools/1/name": "missing",
        "/agent/actors/0/confirmation_policy": "literal_error",
        "/agent/actors/0/function/decorators/0/decorator": "unknown_decorator",
    }


def test_timeouts_accept_int_or_float_but_not_text() -> None:
    doc = triage()
    doc["nodes"][1]["config"]["timeout"] = 2.5
    assert errors_of(doc) == {}
    for wrong in ("soon", "5", True):
        doc["nodes"][1]["config"]["timeout"] = wrong
        assert errors_of(doc) == {"/nodes/1/config/timeout": "float_type"}


def test_waits_are_bounded_so_every_timer_fits_the_stores() -> None:
    doc = triage()
    ask = node_index(doc, "approve")
    doc["nodes"][ask]["config"]["timeout"] = 366 * 86_400
    assert errors_of(doc) == {}
    doc["nodes"][ask]["config"]["timeout"] = 1e308
    assert errors_of(doc) == {f"/nodes/{ask}/config/timeout": "out_of_range"}
    doc = batch()
    guard = node_index(doc, "guard")
    doc["nodes"][guard]["config"].update(retry_count=101, retry_delay_seconds=86_401)
    assert errors_of(doc) == {
        f"/nodes/{guard}/config/retry_count": "out_of_range",
        f"/nodes/{guard}/config/retry_delay_seconds": "out_of_range",
    }
    # The longest allowed exponential backoff saturates at a week instead of overflowing.
    assert backoff("exponential", 86_400, 100) == MAX_RETRY_DELAY == 7 * 86_400
    assert backoff("linear", 2, 3) == 6 and backoff("exponential", 2, 3) == 8


def test_numbers_must_be_json_numbers() -> None:
    doc = load_json(FIXTURES / "valid" / "react_support.json")
    doc["agent"]["max_iterations"] = "0"
    doc["agent"]["max_input_tokens"] = True
    assert errors_of(doc) == {
        "/agent/max_iterations": "int_type",
        "/agent/max_input_tokens": "int_type",
    }


def test_mode_and_fields_agree() -> None:
    react = load_json(FIXTURES / "valid" / "react_support.json")
    react["nodes"] = triage()["nodes"]
    assert errors_of(react) == {"/nodes": "react_has_nodes"}
    workflow = triage()
    workflow["agent"] = react["agent"]
    assert errors_of(workflow) == {"/agent": "workflow_has_agent"}


def test_envelope_text_limits() -> None:
    doc = triage()
    doc["tags"] = ["ok", "x" * 201]
    doc["description"] = "nul\x00byte"
    assert errors_of(doc) == {"/tags/1": "too_long", "/description": "nul"}


def test_pointer_escaping() -> None:
    assert join("a/b", "c~d", 0) == "/a~1b/c~0d/0"
    doc = triage()
    doc["nodes"][1]["config"]["input_mappings"] = {"a/b": 1}
    assert errors_of(doc) == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=10,
)


@given(json_values, json_values)
def test_merge_patch_is_rfc7396(target: Any, patch: Any) -> None:
    result = merge_patch(target, patch)
    if not isinstance(patch, dict):
        assert result == patch
        return
    for key, value in patch.items():
        if value is None:
            assert key not in result
        elif not isinstance(value, dict):
            assert result[key] == value
    untouched = target if isinstance(target, dict) else {}
    for key, value in untouched.items():
        if key not in patch:
            assert result[key] == value
    assert merge_patch(result, patch) == result  # applying twice changes nothing more


@given(st.dictionaries(st.text(max_size=3), json_values))
def test_validator_never_crashes_on_arbitrary_json(doc: dict[str, Any]) -> None:
    collect_errors(doc)
    collect_errors({**doc, "mode": "workflow", "nodes": [doc], "edges": [doc]})
