"""Stored commands come back as the same commands; a run's status follows its pending ones."""

from __future__ import annotations

import json

from dhub.engine.compile import compile_document
from dhub.engine.state import CallFunction, Command
from dhub.engine.stepper import Stepper
from dhub.runtime.journal import command_from, command_payload, due_at, kind_of, waiting
from tests.conftest import FIXTURES, load_json
from tests.support.driver import call_in_process


def test_commands_round_trip_through_json() -> None:
    stepper = Stepper(compile_document(load_json(FIXTURES / "valid" / "workflow_triage.json")))
    step = stepper.start({"ticket": "Total outage since 9am"}, now=50.0)
    [call] = step.commands
    assert isinstance(call, CallFunction)
    after = stepper.step(step.state, call_in_process(call, now=60.0))
    issued: list[Command] = [call, *after.commands]
    for command in issued:
        kind = kind_of(command)
        assert kind is not None
        stored = json.loads(json.dumps(command_payload(command)))
        assert command_from(kind, stored) == command
    assert sorted(str(kind_of(c)) for c in after.commands) == ["await_input", "sleep_until"]
    assert [due_at(c) for c in after.commands] == [3660.0, 3660.0]  # the input's timeout


def test_status_and_waiting_reason_follow_the_pending_commands() -> None:
    stepper = Stepper(compile_document(load_json(FIXTURES / "valid" / "workflow_triage.json")))
    step = stepper.start({"ticket": "Total outage since 9am"}, now=50.0)
    assert waiting(step.state, step.commands) == ("running", None)  # classify in flight
    [call] = step.commands
    assert isinstance(call, CallFunction)
    after = stepper.step(step.state, call_in_process(call, now=60.0))
    status, reason = waiting(after.state, after.commands)
    assert status == "waiting" and reason is not None
    assert (reason["for"], reason["node_id"]) == ("input", "approve")
