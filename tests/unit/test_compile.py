"""Compiling agent documents into graphs, pure."""

from __future__ import annotations

import copy

import pytest

from dhub.domain.errors import InvalidInput
from dhub.engine.compile import ROOT, Link, compile_document
from dhub.engine.validate import collect_errors
from tests.conftest import FIXTURES, load_json


def test_batch_workflow_scopes_links_and_handlers() -> None:
    graph = compile_document(load_json(FIXTURES / "valid" / "workflow_batch.json"))
    assert graph.start == "start" and graph.ends == ("end",)
    assert graph.scopes[ROOT].node_ids == (
        "start", "each", "aggregate", "flaky", "guard", "note_failure", "end",
    )  # fmt: skip
    assert graph.scopes[ROOT].entries == ("start",)
    assert graph.body_scope("each").node_ids == ("square", "label")
    assert graph.body_scope("each").entries == ("square",)
    assert graph.branch_scope("aggregate", "total").entries == ("sum_squares",)
    assert graph.branch_scope("aggregate", "report").entries == ("join_lines",)
    assert graph.scope_of["label"] == "each"
    assert graph.handler_of == {"flaky": "guard"}
    assert Link("flaky", "note_failure", "failure") in graph.outgoing["flaky"]
    assert [(link.source, link.kind) for link in graph.incoming["end"]] == [
        ("flaky", "edge"),
        ("note_failure", "edge"),
    ]
    assert graph.incoming["note_failure"] == (Link("flaky", "note_failure", "failure"),)


def test_triage_conditions_are_kept() -> None:
    graph = compile_document(load_json(FIXTURES / "valid" / "workflow_triage.json"))
    conditions = {(link.target, link.condition) for link in graph.outgoing["is_urgent"]}
    assert conditions == {("approve", "true"), ("normal_summary", "false")}
    assert graph.outgoing["is_urgent"][0].index == 2


def test_invalid_documents_and_react_agents_do_not_compile() -> None:
    bad = load_json(FIXTURES / "invalid" / "cycle_outside_loop.json")["document"]
    with pytest.raises(InvalidInput) as caught:
        compile_document(bad)
    assert caught.value.errors[0].loc == "/edges/7"
    with pytest.raises(ValueError, match="react"):
        compile_document(load_json(FIXTURES / "valid" / "react_support.json"))


def test_handlers_and_fallbacks_stay_in_their_scope() -> None:
    doc = copy.deepcopy(load_json(FIXTURES / "valid" / "workflow_batch.json"))
    guard = next(i for i, n in enumerate(doc["nodes"]) if n["id"] == "guard")
    doc["nodes"][guard]["config"]["target_node_id"] = "square"  # inside the loop body
    doc["nodes"][guard]["config"]["fallback_node_id"] = "label"
    errors = {e.loc: e.code for e in collect_errors(doc)[1]}
    assert errors[f"/nodes/{guard}/config/target_node_id"] == "handler_crosses_container"
    doc["nodes"][1]["config"]["body_node_ids"].append("guard")  # beside its target: fine
    note_failure = next(i for i, n in enumerate(doc["nodes"]) if n["id"] == "note_failure")
    errors = {e.loc: e.code for e in collect_errors(doc)[1]}
    assert errors == {f"/nodes/{note_failure}": "unreachable_node"}  # nothing falls back to it
    doc["nodes"][guard]["config"]["fallback_node_id"] = "note_failure"
    errors = {e.loc: e.code for e in collect_errors(doc)[1]}
    assert errors == {f"/nodes/{guard}/config/fallback_node_id": "fallback_crosses_container"}
