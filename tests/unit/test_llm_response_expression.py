"""An llm node's ``response`` written as one ``{{ … }}`` expression (docs/workflows.md): the
schema is worked out for each run, checked to be a schema, shown on the node's start, and
sent to the model; anything else written as a string is refused at save time."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dhub.domain.errors import InvalidInput
from dhub.engine.stepper import CallModel, Complete, Fail
from dhub.engine.validate import collect_errors, validate_agent_document
from dhub.services.builtins import shipped
from tests.conftest import FIXTURES, load_json
from tests.support.driver import Driver

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def extractor(response: Any) -> dict[str, Any]:
    """The summarizer fixture turned into an extractor whose schema is an input."""
    doc = copy.deepcopy(load_json(FIXTURES / "valid" / "event_summarizer.json"))
    doc["nodes"][0]["config"]["variables"].append({"name": "schema", "type": "object"})
    doc["nodes"][1]["config"]["response"] = response
    doc["nodes"][2]["config"]["outputs"][0]["type"] = "object"
    return doc


def drive(doc: dict[str, Any], inputs: dict[str, Any], answer: Any) -> tuple[Any, list[Any]]:
    seen: list[CallModel] = []

    def model(command: CallModel) -> Any:
        seen.append(command)
        return answer

    run = Driver(doc, model=model).run(inputs)
    return run, seen


def test_the_schema_comes_from_the_run_and_reaches_the_model() -> None:
    run, seen = drive(extractor("{{ schema }}"), {"alert": {}, "schema": SCHEMA}, {"name": "x"})
    assert run.step.commands == [Complete({"headline": {"name": "x"}})]
    assert seen[0].response_schema == SCHEMA
    [started] = [
        e for e in run.trace if e["type"] == "node.started" and e["node_id"] == "summarize"
    ]
    assert started["inputs"]["response"] == SCHEMA


def test_a_written_schema_is_sent_as_written_and_not_repeated_on_the_start() -> None:
    run, seen = drive(extractor(SCHEMA), {"alert": {}, "schema": {}}, {"name": "x"})
    assert seen[0].response_schema == SCHEMA
    [started] = [
        e for e in run.trace if e["type"] == "node.started" and e["node_id"] == "summarize"
    ]
    assert "response" not in started["inputs"]


def test_an_expression_giving_nothing_asks_for_text() -> None:
    doc = extractor("{{ schema }}")
    doc["nodes"][2]["config"]["outputs"][0]["type"] = "string"
    _, seen = drive(doc, {"alert": {}, "schema": {}}, "plain text")
    assert seen[0].response_schema == {}


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ([1, 2], "response should give a JSON schema (an object, or {} for text), got list"),
        ({"type": "thing"}, "response gives an invalid JSON schema (at type)"),
        ({"properties": {"a": {"enum": 3}}}, "(at properties/a/enum)"),
    ],
)
def test_what_is_not_a_schema_fails_the_node_before_the_model_is_asked(
    schema: Any, says: str
) -> None:
    doc = extractor("{{ schema }}")
    doc["nodes"][0]["config"]["variables"][-1]["type"] = "object" if isinstance(
        schema, dict) else "array"  # fmt: skip
    run, seen = drive(doc, {"alert": {}, "schema": schema}, {"name": "x"})
    assert seen == []
    assert isinstance(run.step.commands[-1], Fail)
    error = run.step.state.error
    assert error is not None and error["node_id"] == "summarize"
    assert error["kind"] == "invalid_input" and says in error["message"], error


def test_an_undefined_name_in_the_expression_names_the_field() -> None:
    run, _ = drive(extractor("{{ nowhere }}"), {"alert": {}, "schema": SCHEMA}, {})
    error = run.step.state.error
    assert error is not None and error["kind"] == "expression"
    assert "field 'response'" in error["message"] and "nowhere" in error["message"]


@pytest.mark.parametrize("text", ["schema", "{{ schema }} and more", "", "{{ a }}{{ b }}"])
def test_a_response_string_that_is_not_one_expression_is_refused_at_save(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_agent_document(extractor(text))
    [error] = refused.value.errors
    assert (error.loc, error.code) == ("/nodes/1/config/response", "not_an_expression")
    assert "'{{ schema }}'" in error.message


def test_the_builtins_use_it_and_validate() -> None:
    for builtin in shipped():
        spec, errors = collect_errors(builtin.spec.model_dump(mode="json"))
        assert errors == [] and spec is not None


def test_the_classifier_holds_the_answer_to_the_runs_labels() -> None:
    [classifier] = [b for b in shipped() if b.id == "agent.builtin-classifier"]
    doc = classifier.spec.model_dump(mode="json")
    labels = ["billing", "bug"]
    run, seen = drive(doc, {"text": "x", "labels": labels}, {"label": "bug", "reason": "r"})
    assert run.outputs == {"label": "bug", "reason": "r"}
    assert seen[0].response_schema == {
        "type": "object",
        "additionalProperties": False,
        "required": ["label", "reason"],
        "properties": {"label": {"type": "string", "enum": labels},
                       "reason": {"type": "string"}},
    }  # fmt: skip
    assert '["billing", "bug"]' in seen[0].prompt and "How to choose" not in seen[0].prompt
    _, seen = drive(doc, {"text": "x", "labels": labels, "instructions": "Bugs first."},
                    {"label": "bug", "reason": "r"})  # fmt: skip
    assert "How to choose: Bugs first." in seen[0].prompt
