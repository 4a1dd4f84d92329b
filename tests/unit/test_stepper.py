"""The pure stepper, driven by an in-process function port (an honest fake of the I/O seam)."""

from __future__ import annotations

import copy
from typing import Any

from dhub.engine.compile import compile_document
from dhub.engine.stepper import (
    AwaitInput,
    CallFunction,
    CallModel,
    Complete,
    Fail,
    SleepUntil,
    Step,
    Stepper,
)
from tests.conftest import FIXTURES, load_json
from tests.support.driver import Driver, call_in_process


def drive(
    doc: dict[str, Any], inputs: dict[str, Any], model: Any = None
) -> tuple[Step, list[dict[str, Any]]]:
    """The outcome and the trace, with each sleep noted as a ``slept`` event."""
    run = Driver(doc, model=model).run(inputs)
    slept = iter(c.at for c in run.log if isinstance(c, SleepUntil))
    trace = []
    for event in run.trace:
        if event["type"] == "node.retrying" and event["delay"] > 0:
            trace.append({"type": "slept", "until": next(slept)})
        trace.append(event)
    return run.step, trace


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


def test_batch_fixture_gives_the_documented_result() -> None:
    doc = load_json(FIXTURES / "valid" / "workflow_batch.json")
    run = Driver(doc).run({"numbers": [1, 2, 3]})
    assert run.outputs == {"total": 14, "report": "#0: 1\n#1: 4\n#2: 9\n", "checked": False}
    flaky = [e for e in run.trace if e.get("node_id") == "flaky" and e["type"] != "node.started"]
    assert [e["type"] for e in flaky] == ["node.retrying", "node.retrying", "node.failed"]
    assert run.step.state.variables["failure"] == "upstream unavailable"
    assert run.ran()[:4] == ["start", "each#0/square", "each#0/label", "each#1/square"]


def test_triage_fixture_waits_for_a_person_then_finishes() -> None:
    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    driver = Driver(doc, answers={"approve": {"escalate": True}})
    run = driver.run({"ticket": "Total outage since 9am", "customer": "acme"})
    assert run.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    [ask] = [c for c in run.log if isinstance(c, AwaitInput)]
    assert ask.prompt == "Escalate ticket from acme: Total outage since 9am?"
    assert [f["name"] for f in ask.fields] == ["escalate", "note"]
    assert ask.timeout_at == 100.0 + 3600
    [timer] = [c for c in run.log if isinstance(c, SleepUntil)]
    assert timer.command_id in run.cancelled  # answered: the timeout is dropped
    assert run.step.state.node_outputs["approve"] == {
        "escalate": True, "note": None, "responded_by": "ana"
    }  # fmt: skip


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
