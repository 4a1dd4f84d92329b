"""The pure stepper, driven by an in-process function port (an honest fake of the I/O seam)."""

from __future__ import annotations

import copy
from typing import Any

from dhub.engine.compile import compile_document
from dhub.engine.stepper import (
    CallFunction,
    CallModel,
    Complete,
    Done,
    Fail,
    SleepUntil,
    Step,
    Stepper,
    Woke,
)
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
    step = stepper.start(inputs, now=100.0)
    trace = list(step.events)
    while True:
        done = [c for c in step.commands if isinstance(c, Complete | Fail)]
        if done:
            return step, trace
        command = step.commands[0]
        result: Done | Woke
        if isinstance(command, CallFunction):
            result = call_in_process(command)
            result = Done(result.command_id, result.ok, result.value, result.error, step.state.now)
        elif isinstance(command, SleepUntil):
            trace.append({"type": "slept", "until": command.at})
            result = Woke(command.command_id, now=command.at)
        else:
            assert isinstance(command, CallModel)
            result = Done(command.command_id, True, model(command), now=step.state.now)
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


def guarded(on_error: str, backoff: str = "exponential") -> dict[str, Any]:
    """start -> flaky (always raises) -> end, flaky guarded with 2 retries (and a fallback)."""
    doc: dict[str, Any] = {
        "name": "guarded", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "flaky", "type": "code", "config": {
                "source": "def main():\n    raise RuntimeError('upstream unavailable')\n",
                "outputs": {"checked": {"type": "boolean"}}}},
            {"id": "guard", "type": "error_handler", "config": {
                "target_node_id": "flaky", "retry_count": 2, "retry_delay_seconds": 1,
                "retry_backoff": backoff, "on_error": on_error,
                **({"fallback_node_id": "note"} if on_error == "fallback" else {})}},
            {"id": "note", "type": "variable", "config": {"operations": [
                {"action": "set", "variable": "checked", "value": "{{ false }}"},
                {"action": "set", "variable": "why", "value": "{{ error.message }}"}]}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "checked", "type": "boolean", "value": "{{ checked }}"}]}},
        ],
        "edges": [
            {"source": "start", "target": "flaky"},
            {"source": "flaky", "target": "end"},
            {"source": "note", "target": "end"},
        ],
    }  # fmt: skip
    if on_error != "fallback":  # nothing falls back to the note then
        doc["nodes"] = [n for n in doc["nodes"] if n["id"] != "note"]
        doc["edges"] = doc["edges"][:2]
    return doc


def test_retries_with_backoff_then_fallback() -> None:
    step, trace = drive(guarded("fallback"), {})
    assert step.commands == [Complete({"checked": False})]
    assert [e["until"] for e in trace if e["type"] == "slept"] == [101.0, 103.0]  # 1 s, then 2 s
    assert [e["attempts"] for e in trace if e["type"] == "node.retrying"] == [1, 2]
    [failed] = [e for e in trace if e["type"] == "node.failed"]
    assert (failed["node_id"], failed["attempts"], failed["handled_by"]) == ("flaky", 3, "guard")
    assert step.state.variables["why"] == "upstream unavailable"
    assert step.state.nodes["end"] == "succeeded"  # joined once, over the fallback path


def test_retry_delays_of_each_backoff() -> None:
    for backoff, expected in (("fixed", [101.0, 102.0]), ("linear", [101.0, 103.0])):
        _, trace = drive(guarded("fallback", backoff), {})
        assert [e["until"] for e in trace if e["type"] == "slept"] == expected


def test_on_error_continue_and_fail() -> None:
    step, _ = drive(guarded("continue"), {})
    assert isinstance(step.commands[-1], Fail)  # end's 'checked' is null: not a boolean
    assert step.state.nodes["flaky"] == "succeeded"
    assert step.state.node_outputs["flaky"] == {"checked": None}
    assert "should be a boolean" in (step.state.error or {})["message"]
    step, _ = drive(guarded("fail"), {})
    assert isinstance(step.commands[-1], Fail)
    assert (step.state.error or {})["message"] == "upstream unavailable"
    assert step.state.attempts["flaky"] == 3
