"""Budgets and compaction of the react loop, driven through the pure stepper: a scripted
conversation of 200 turns, each a run that starts from the last one's transcript and summary
(as a chat's turns do)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.engine import compaction
from dhub.engine.compile import compile_spec
from dhub.engine.react_build import react_config
from dhub.engine.state import CallChat, CallFunction, Done, Step
from dhub.engine.stepper import Stepper
from dhub.engine.validate import validate_agent_document

FILLER = "The customer asked about their order status and the delivery window again. " * 3
SOURCE = "def lookup(order_id: str) -> dict:\n    return {}\n"


def support(budget: int, **compacting: Any) -> Stepper:
    spec = validate_agent_document({
        "name": "support", "description": "", "mode": "react", "input_mode": "chat",
        "agent": {"instructions": "You help customers.", "model_provider": "openai",
                  "model": "gpt-4o-mini", "compaction": compacting or None,
                  "tools": [{"name": "lookup", "function": {"source": SOURCE}}]},
    })  # fmt: skip
    return Stepper(compile_spec(spec, react_config(spec, budget=budget)))


class Conversation:
    """Plays the model: every third turn looks an order up first; summaries are short."""

    def __init__(self, stepper: Stepper, budget: int) -> None:
        self.stepper, self.budget = stepper, budget
        self.history: list[dict[str, Any]] = []
        self.summary: str | None = None
        self.calls: list[CallChat] = []
        self.events: list[dict[str, Any]] = []

    def turn(self, n: int) -> None:
        context = {"message": f"Turn {n}: {FILLER}", "history": self.history,
                   "summary": self.summary}  # fmt: skip
        step = self.stepper.start({}, context=context)
        while not any(type(c).__name__ == "Complete" for c in step.commands):
            step = self._answer(step, n)
            assert step.state.status == "running" or step.state.status == "succeeded", step
        self.events += step.events
        loop = step.state.agents["agent"]
        self.history, self.summary = loop["messages"], loop.get("summary")

    def _answer(self, step: Step, n: int) -> Step:
        self.events += step.events
        [command] = [c for c in step.commands if isinstance(c, CallChat | CallFunction)]
        if isinstance(command, CallFunction):
            result = {"order_id": command.inputs["order_id"], "status": "shipped"}
            return self.stepper.step(step.state, Done(command.command_id, True, result))
        self.calls.append(command)
        if command.system == compaction.SUMMARY_SYSTEM:
            summary = {"content": f"Summary up to turn {n}."}
            return self.stepper.step(step.state, Done(command.command_id, True, summary))
        size = compaction.count_request(command.system, command.messages, command.tools)
        assert size <= self.budget, (n, size)
        asked_lookup = any(m.get("tool_calls") for m in command.messages[-2:])
        if n % 3 == 0 and not asked_lookup and command.messages[-1]["role"] == "user":
            call = {"id": f"c{n}", "name": "lookup", "arguments": {"order_id": f"A-{n}"}}
            value: dict[str, Any] = {"content": "", "tool_calls": [call]}
        else:
            value = {"content": f"Answer {n}: {FILLER}", "tool_calls": []}
        return self.stepper.step(step.state, Done(command.command_id, True, value))


def test_a_200_turn_conversation_stays_within_its_budget() -> None:
    chat = Conversation(support(1500, summary_max_tokens=128), 1500)
    for n in range(200):
        chat.turn(n)
    applied = [e for e in chat.events if e["type"] == "compaction.applied"]
    assert len(applied) > 10 and all(e["mode"] == "summarized" for e in applied)
    assert all(e["after"] < e["before"] and e["after"] <= 0.5 * 1500 for e in applied)
    summaries = [c for c in chat.calls if c.system == compaction.SUMMARY_SYSTEM]
    assert len(summaries) == len(applied)
    assert {c.max_output_tokens for c in summaries} == {128}  # summary_max_tokens
    assert all(c.tools == [] for c in summaries)
    # The transcript never starts inside a turn, and every tool call has its result.
    assert chat.history[0]["role"] == "user"
    assert_pairs_whole(chat.history)
    assert chat.summary is not None and chat.summary.startswith("Summary up to turn")


def test_without_compaction_whole_turns_are_dropped() -> None:
    chat = Conversation(support(1500, enabled=False), 1500)
    for n in range(60):
        chat.turn(n)
    applied = [e for e in chat.events if e["type"] == "compaction.applied"]
    assert applied and all(e["mode"] == "dropped" for e in applied)
    assert not [c for c in chat.calls if c.system == compaction.SUMMARY_SYSTEM]
    assert chat.history[0]["role"] == "user" and chat.summary is None
    assert_pairs_whole(chat.history)


def test_a_turn_that_alone_exceeds_the_budget_fails_clearly() -> None:
    stepper = support(200)
    step = stepper.start({}, context={"message": FILLER * 10})
    assert step.state.status == "failed" and step.state.error is not None
    assert step.state.error["kind"] == "budget_exceeded"
    assert "raise max_input_tokens" in step.state.error["message"]


def assert_pairs_whole(messages: list[dict[str, Any]]) -> None:
    asked = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert asked == answered


# A transcript: turns of a user message, maybe an assistant tool call with its results, and
# an assistant answer.
turns = st.lists(
    st.tuples(st.integers(1, 400), st.integers(0, 3), st.integers(1, 400)), min_size=1,
    max_size=30,
)  # fmt: skip


@given(turns, st.integers(300, 5000), st.booleans())
def test_a_cut_is_always_at_a_turn_and_never_takes_the_last(
    shape: list[tuple[int, int, int]], budget: int, enabled: bool
) -> None:
    messages: list[dict[str, Any]] = []
    for i, (ask, calls, answer) in enumerate(shape):
        messages.append({"role": "user", "content": "w " * ask})
        if calls:
            ids = [f"{i}-{k}" for k in range(calls)]
            calls_made = [{"id": c, "name": "t", "arguments": {}} for c in ids]
            messages.append({"role": "assistant", "content": "", "tool_calls": calls_made})
            messages += [{"role": "tool", "tool_call_id": c, "content": "r " * 20} for c in ids]
        messages.append({"role": "assistant", "content": "a " * answer})
    settings = compaction.Settings(budget, enabled=enabled, summary_max_tokens=128)
    cut = compaction.plan("system", messages, [], settings)
    if cut is None:
        return
    starts = compaction.turn_starts(messages)
    assert cut.count in starts[1:]  # at a turn, never the first (nothing) nor past the last
    assert_pairs_whole(messages[cut.count :])
    target = settings.target_ratio * budget - (128 + compaction.MESSAGE_OVERHEAD if enabled else 0)
    assert cut.after <= target or cut.count == starts[-1]


@pytest.mark.parametrize("enabled", [True, False])
def test_under_the_trigger_nothing_is_compacted(enabled: bool) -> None:
    settings = compaction.Settings(10_000, enabled=enabled)
    assert compaction.plan("s", [{"role": "user", "content": "hi"}], [], settings) is None
