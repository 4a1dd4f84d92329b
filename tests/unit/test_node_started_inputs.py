"""What a node started with: the evaluated inputs on its ``node.started`` event (docs/workflows.md,
trace events), which the console's node panel shows."""

from __future__ import annotations

from typing import Any

from dhub.engine.stepper import Confirmed
from tests.support.driver import Driver, Run
from tests.unit.test_engine_nodes import code, doc, end, node, template

# fmt: off


def started(run: Run, key: str) -> list[dict[str, Any] | None]:
    """The ``inputs`` of each ``node.started`` of ``key`` (frame/node or node), in order."""
    return [
        e.get("inputs") for e in run.trace if e["type"] == "node.started"
        and (f"{e['frame']}/{e['node_id']}" if "frame" in e else e["node_id"]) == key
    ]


def test_start_code_if_else_and_loop_nodes_carry_their_evaluated_inputs() -> None:
    run = Driver(doc([
        code("double", "def main(x):\n    return {'d': x * 2}\n", x="{{ n + 1 }}"),
        node("big", "if_else", condition="d > 5"),
        node("each", "loop", source="{{ [d, d + 1] }}", body_node_ids=["sq"]),
        code("sq", "def main(x):\n    return {'sq': x * x}\n", x="{{ item }}"),
        template("small", "no"),
        end(),
    ], [("start", "double"), ("double", "big"), ("big", "each", "true"),
        ("big", "small", "false"), ("each", "end"), ("small", "end")])).run({"n": 3})
    assert started(run, "start") == [{"n": 3}]  # the run's inputs, defaults applied
    assert started(run, "double") == [{"x": 4}]
    assert started(run, "big") == [{"condition": True}]
    assert started(run, "each") == [{"items": [8, 9]}]
    assert started(run, "each#0/sq") == [{"x": 8}] and started(run, "each#1/sq") == [{"x": 9}]
    assert started(run, "small") == []  # skipped: never started
    assert started(run, "end") == [None]  # nothing evaluated before it ran: no inputs key


def test_a_count_loop_an_llm_and_a_human_input_carry_what_they_were_given() -> None:
    run = Driver(doc([
        node("rep", "loop", mode="count", count=2, body_node_ids=["t"]),
        template("t", "{{ index }}"),
        node("ask", "human_input", prompt="Ship {{ n }} units?", timeout=60,
             input_fields=[{"name": "ok", "type": "boolean"}]),
        node("say", "llm", model_provider="p", model="m", prompt="Tell {{ n }}",
             system_prompt="Be {{ 'brief' }}", output="said"),
        end(),
    ], [("start", "rep"), ("rep", "ask"), ("ask", "say"), ("say", "end")]),
        model=lambda call: f"{call.prompt}!", answers={"ask": {"ok": True}}).run({})
    assert started(run, "rep") == [{"count": 2}]
    assert started(run, "ask") == [{"prompt": "Ship 3 units?"}]
    assert started(run, "say") == [{"system_prompt": "Be brief", "prompt": "Tell 3"}]


def test_an_actor_starts_with_the_arguments_it_asks_about_not_the_edited_ones() -> None:
    actor = {"name": "refund", "confirmation_policy": "confirm", "function": {
        "source": "def refund(amount):\n    return {'refunded': amount}\n"}}
    run = Driver(doc([
        node("pay", "actor_call", actor=actor, input_mappings={"amount": "{{ n * 10 }}"}),
        template("after", "done"),
        end(),
    ], [("start", "pay"), ("pay", "after"), ("after", "end")]),
        decisions={"pay": Confirmed("", True, {"amount": 5}, by="ana")}).run({})
    assert started(run, "pay") == [{"amount": 30}]
    # The approved call (with the edited amount) writes into no other node's start.
    assert started(run, "after") == [None] and started(run, "end") == [None]


def test_a_retried_node_carries_its_inputs_at_each_start() -> None:
    run = Driver(doc([
        code("flaky", "def main(x):\n    raise ValueError(x)\n", x="{{ n * 2 }}"),
        node("guard", "error_handler", target_node_id="flaky", retry_count=1,
             retry_delay_seconds=0, on_error="continue"),
        end(),
    ], [("start", "flaky"), ("flaky", "end")])).run({})
    assert started(run, "flaky") == [{"x": 6}, {"x": 6}]
