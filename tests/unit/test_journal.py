"""Stored commands come back as the same commands; a run's status follows its pending ones."""

from __future__ import annotations

import json

import pytest

from dhub.engine import compaction
from dhub.engine.compile import compile_document
from dhub.engine.journal import command_from, command_payload, due_at, kind_of, waiting
from dhub.engine.state import CallChat, CallFunction, Command, Step
from dhub.engine.stepper import Stepper
from tests.conftest import FIXTURES, load_json
from tests.support.driver import call_in_process
from tests.unit.test_react_compaction import Conversation, support


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


class Stored(Conversation):
    """The conversation of test_react_compaction, each model call put through the journal as
    a run's row and its saved state would be, and rebuilt."""

    rebuilt = 0

    def _answer(self, step: Step, n: int) -> Step:
        state = json.loads(json.dumps(vars(step.state), default=list))
        for call in step.commands:
            if isinstance(call, CallChat):
                stored = json.loads(json.dumps(command_payload(call)))
                assert stored["messages"] == "$state"  # not the transcript a second time
                assert command_from("call_chat", stored, state) == call
                self.rebuilt += 1
        return super()._answer(step, n)


def test_a_model_call_is_stored_without_its_transcript_and_rebuilt_from_the_state() -> None:
    chat = Stored(support(1500, summary_max_tokens=128), 1500)
    for n in range(40):
        chat.turn(n)
    summaries = [c for c in chat.calls if c.system == compaction.SUMMARY_SYSTEM]
    assert summaries and chat.rebuilt == len(chat.calls)  # the summary requests too
    [call, *_] = chat.calls
    stored = json.loads(json.dumps(command_payload(call)))
    # A row stored before (its messages in it) comes back as it was.
    assert command_from("call_chat", {**stored, "messages": call.messages}) == call
    # A call the state does not know cannot be rebuilt: said, not guessed.
    with pytest.raises(ValueError, match="not in the state"):
        command_from("call_chat", stored, {"agents": {}})
