"""The pure stepper, driven by an in-process function port (an honest fake of the I/O seam)."""

from __future__ import annotations

import copy
from typing import Any

from dhub.engine.compile import compile_document
from dhub.engine.stepper import CallFunction, CallModel, Complete, Done, Fail, Step, Stepper
from tests.conftest import FIXTURES, load_json


def call_in_process(command: CallFunction) -> Done:
    namespace: dict[str, Any] = {}
    exec(compile(command.source, "<function>", "exec"), namespace)
    entry = namespace.get(command.entry or "") or namespace["main"]
    try:
        return Done(command.command_id, True, entry(**command.inputs))
    except Exception as exc:
        return Done(command.command_id, False, error={"kind": "exception", "message": str(exc)})


def drive(
    doc: dict[str, Any], inputs: dict[str, Any], model: Any = None
) -> tuple[Step, list[dict[str, Any]]]:
    stepper = Stepper(compile_document(doc))
    step = stepper.start(inputs)
    trace = list(step.events)
    while True:
        done = [c for c in step.commands if isinstance(c, Complete | Fail)]
        if done:
            return step, trace
        command = step.commands[0]
        if isinstance(command, CallFunction):
            result = call_in_process(command)
        else:
            assert isinstance(command, CallModel)
            result = Done(command.command_id, True, model(command))
        queued = step.commands[1:]
        step = stepper.step(step.state, result)
        step = Step(step.state, [*queued, *step.commands], step.events)
        trace += step.events


def test_triage_routine_ticket() -> None:
    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    step, trace = drive(doc, {"ticket": "Checkout page shows an error"})
    assert step.commands == [Complete({"category": "bug", "summary": "bug from anonymous"})]
    assert step.state.status == "succeeded"
    ran = [e["node_id"] for e in trace if e["type"] == "node.succeeded"]
    skipped = [e["node_id"] for e in trace if e["type"] == "node.skipped"]
    assert ran == ["start", "classify", "is_urgent", "normal_summary", "end"]
    assert skipped == ["approve", "urgent_summary"]  # dead path eliminated, end ran once


def test_missing_required_input_fails_before_anything_runs() -> None:
    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    step, _ = drive(doc, {})
    assert isinstance(step.commands[-1], Fail)
    assert step.state.error == {
        "node_id": "start",
        "kind": "invalid_input",
        "message": "invalid inputs: 'ticket' is required (string)",
    }


def test_llm_node_asks_the_model_with_rendered_prompts() -> None:
    doc = load_json(FIXTURES / "valid" / "event_summarizer.json")
    seen: list[CallModel] = []

    def model(command: CallModel) -> str:
        seen.append(command)
        return "Disk full on db-1"

    step, _ = drive(doc, {"alert": {"host": "db-1", "disk": "100%"}}, model)
    assert step.commands == [Complete({"headline": "Disk full on db-1"})]
    assert (
        seen[0].prompt
        == 'Write a one-line headline for this alert: {"host": "db-1", "disk": "100%"}'
    )
    assert seen[0].system_prompt == "You write terse incident headlines."


def test_a_failing_function_fails_the_run_with_its_message() -> None:
    doc = copy.deepcopy(load_json(FIXTURES / "valid" / "workflow_triage.json"))
    doc["nodes"][1]["config"]["source"] = "def main(text):\n    raise ValueError('bad ticket')\n"
    step, _ = drive(doc, {"ticket": "x"})
    assert isinstance(step.commands[-1], Fail)
    assert step.state.error is not None and step.state.error["message"] == "bad ticket"


def test_unsupported_nodes_fail_clearly_for_now() -> None:
    step, _ = drive(load_json(FIXTURES / "valid" / "workflow_batch.json"), {"numbers": [1, 2]})
    assert step.state.error is not None
    assert step.state.error["kind"] == "unsupported" and step.state.error["node_id"] == "each"


def test_state_round_trips_as_plain_data() -> None:
    import json

    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    stepper = Stepper(compile_document(doc))
    first = stepper.start({"ticket": "hello"})
    data = json.loads(json.dumps(first.state.to_dict()))
    command = first.commands[0]
    assert isinstance(command, CallFunction)
    again = stepper.step(type(first.state).from_dict(data), call_in_process(command))
    assert again.state.variables["category"] == "question"
