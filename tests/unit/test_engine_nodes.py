"""Every node type through the pure stepper: happy paths and error paths (DESIGN.md 3.2)."""

from __future__ import annotations

from typing import Any

import pytest

from dhub.engine.stepper import (
    AwaitConfirmation,
    CallFunction,
    CancelRun,
    Confirmed,
    Fail,
    SleepUntil,
    Stepper,
)
from tests.support.driver import Driver

# fmt: off


def doc(nodes: list[dict[str, Any]], edges: list[tuple[str, ...]]) -> dict[str, Any]:
    """A workflow document; edges as (source, target) or (source, target, condition)."""
    return {
        "name": "t", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [{"id": "start", "type": "start", "config": {"variables": [
            {"name": "n", "type": "number", "required": False, "default": 3}]}}, *nodes],
        "edges": [
            {"source": e[0], "target": e[1], **({"condition": e[2]} if len(e) > 2 else {})}
            for e in edges
        ],
    }


def node(node_id: str, kind: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "type": kind, "config": config}


def end(**outputs: tuple[str, str]) -> dict[str, Any]:
    return node("end", "end", outputs=[
        {"name": k, "type": t, "value": v} for k, (t, v) in outputs.items()])


def code(node_id: str, source: str, **mappings: str) -> dict[str, Any]:
    return node(node_id, "code", source=source, input_mappings=mappings)


def template(node_id: str, text: str, output: str = "text") -> dict[str, Any]:
    return node(node_id, "template", template=text, output=output)


# -- loops ---------------------------------------------------------------------------------------

def squares(source: str = "{{ [1, 2, 3] }}", **loop: Any) -> dict[str, Any]:
    return doc([
        node("each", "loop", source=source, body_node_ids=["sq", "line"], **loop),
        code("sq", "def main(x):\n    return {'sq': x * x}\n", x="{{ item }}"),
        template("line", "{{ index }}:{{ sq }}", "line"),
        end(results=("array", "{{ nodes.each.results }}"), count=("number", "{{ count }}")),
    ], [("start", "each"), ("sq", "line"), ("each", "end")])


def test_loop_over_a_list_collects_one_result_per_iteration() -> None:
    run = Driver(squares()).run({})
    assert run.outputs == {"count": 3, "results": [
        {"sq": 1, "line": "0:1"}, {"sq": 4, "line": "1:4"}, {"sq": 9, "line": "2:9"}]}
    assert run.ran()[1:4] == ["each#0/sq", "each#0/line", "each#1/sq"]
    assert not any(key.startswith("each#") for key in run.step.state.nodes)  # frames forgotten


def test_loop_in_count_mode_binds_the_counter() -> None:
    run = Driver(doc([
        node("rep", "loop", mode="count", count=4, counter="i", body_node_ids=["t"]),
        template("t", "{{ i * 10 }}"),
        end(r=("array", "{{ nodes.rep.results | map(attribute='text') | list }}")),
    ], [("start", "rep"), ("rep", "end")])).run({})
    assert run.outputs == {"r": ["0", "10", "20", "30"]}


def test_loop_over_an_empty_list_succeeds_with_no_results() -> None:
    assert Driver(squares("{{ [] }}")).run({}).outputs == {"results": [], "count": 0}


def test_loop_over_a_non_list_fails_naming_the_source() -> None:
    error = Driver(squares("{{ n }}")).run({}).error
    assert error["node_id"] == "each" and error["kind"] == "type"
    assert error["message"] == "source should give a list to iterate, got int 3"


def test_exceeding_max_iterations_fails_instead_of_truncating() -> None:
    run = Driver(squares("{{ range(5) | list }}", max_iterations=4)).run({})
    assert run.error["kind"] == "max_iterations"
    assert "5 iterations exceed max_iterations (4)" in run.error["message"]
    assert not [c for c in run.log if isinstance(c, CallFunction)]  # nothing ran


def test_a_failure_in_an_iteration_fails_the_loop_and_names_it() -> None:
    run = Driver(squares("{{ [1, 'x', 3] }}")).run({})
    assert run.error["node_id"] == "each"
    assert run.error["message"].startswith("iteration 1 failed at 'sq': ")
    assert "each#2/sq" not in run.ran("node.started")  # later iterations never start


def test_nested_loops_see_both_iterators() -> None:
    run = Driver(doc([
        node("rows", "loop", source="{{ [1, 2] }}", iterator="r", body_node_ids=["cols"]),
        node("cols", "loop", source="{{ ['a', 'b'] }}", iterator="c", body_node_ids=["cell"]),
        template("cell", "{{ r }}{{ c }}", "cell"),
        end(grid=("array", "{{ nodes.rows.results }}")),
    ], [("start", "rows"), ("rows", "end")])).run({})
    cells = [[x["cell"] for x in row["results"]] for row in run.outputs["grid"]]
    assert cells == [["1a", "1b"], ["2a", "2b"]]
    assert "rows#1/cols#0/cell" in run.ran()


def test_a_variable_node_in_a_loop_accumulates_across_iterations() -> None:
    run = Driver(doc([
        node("each", "loop", source="{{ [2, 3, 4] }}", body_node_ids=["add"]),
        node("add", "variable", operations=[
            {"action": "increment", "variable": "total", "value": "{{ item }}"}]),
        end(total=("number", "{{ total }}")),
    ], [("start", "each"), ("each", "end")])).run({})
    assert run.outputs == {"total": 9}


# -- parallel ------------------------------------------------------------------------------------

def fork(strategy: str, b_source: str = "def main():\n    return {'b': 2}\n",
         **config: Any) -> dict[str, Any]:
    return doc([
        node("agg", "parallel", join_strategy=strategy, branches=[
            {"id": "a", "node_ids": ["a1"]}, {"id": "b", "node_ids": ["b1", "b2"]}], **config),
        code("a1", "def main():\n    return {'a': 1}\n"),
        code("b1", b_source),
        template("b2", "b={{ b }}", "b2"),
        end(out=("object", "{{ branches }}")),
    ], [("start", "agg"), ("b1", "b2"), ("agg", "end")])


def test_parallel_all_starts_every_branch_then_joins() -> None:
    step = Stepper(Driver(fork("all")).stepper.graph).start({})
    calls = [c.node_id for c in step.commands if isinstance(c, CallFunction)]
    assert calls == ["a1", "b1"]  # both branches in flight in the same step
    run = Driver(fork("all")).run({})
    assert run.outputs == {"out": {"a": {"a": 1}, "b": {"b": 2, "b2": "b=2"}}}


def test_parallel_any_takes_the_first_winner_and_cancels_the_rest() -> None:
    run = Driver(fork("any")).run({})
    assert run.outputs == {"out": {"a": {"a": 1}}}
    assert run.step.state.node_outputs["agg"]["winner"] == "a"
    [b1] = [c for c in run.log if isinstance(c, CallFunction) and c.node_id == "b1"]
    assert b1.command_id in run.cancelled
    assert "agg@b/b1" not in run.ran()
    assert {"type": "branch.cancelled", "node_id": "agg", "branch": "b"} in run.trace


def test_parallel_all_fails_when_a_branch_fails_and_cancels_the_others() -> None:
    boom = "def main():\n    raise ValueError('no b')\n"
    run = Driver(fork("all", boom)).run({})
    assert run.error["node_id"] == "agg"
    assert run.error["message"] == "branch 'b' failed at 'b1': no b"


def test_parallel_any_fails_only_when_every_branch_failed() -> None:
    boom = "def main():\n    raise ValueError('no b')\n"
    run = Driver(fork("any", boom)).run({})
    assert run.outputs == {"out": {"a": {"a": 1}}}


def test_parallel_all_settled_records_failures_and_goes_on() -> None:
    boom = "def main():\n    raise ValueError('no b')\n"
    run = Driver(fork("all_settled", boom)).run({})
    assert run.outputs["out"]["a"] == {"a": 1}
    assert run.outputs["out"]["b"] == {
        "error": {"node_id": "b1", "kind": "exception", "message": "no b"}}


def test_parallel_timeout_cancels_what_runs_and_fails_the_node_at_its_time() -> None:
    wait = doc([
        node("agg", "parallel", timeout=30, branches=[
            {"id": "a", "node_ids": ["a1"]}, {"id": "slow", "node_ids": ["ask"]}]),
        code("a1", "def main():\n    return {'a': 1}\n"),
        node("ask", "human_input", prompt="?", timeout=3600,
             input_fields=[{"name": "ok", "type": "boolean"}]),
        end(),
    ], [("start", "agg"), ("agg", "end")])
    run = Driver(wait).run({}, now=1000.0)
    assert run.error["kind"] == "timeout" and run.error["node_id"] == "agg"
    assert "timed out after 30s with branch(es) 'slow' still running" in run.error["message"]
    assert run.step.state.now == 1030.0
    assert len(run.cancelled) == 2  # the open task and its own timer


def test_a_loop_inside_a_parallel_branch() -> None:
    run = Driver(doc([
        node("agg", "parallel", branches=[{"id": "a", "node_ids": ["each"]}]),
        node("each", "loop", source="{{ [1, 2] }}", body_node_ids=["t"]),
        template("t", "{{ item }}"),
        end(out=("array", "{{ branches.a.results | map(attribute='text') | list }}")),
    ], [("start", "agg"), ("agg", "end")])).run({})
    assert run.outputs == {"out": ["1", "2"]}


# -- human input ---------------------------------------------------------------------------------

def asking(on_timeout: str = "error") -> dict[str, Any]:
    return doc([
        node("ask", "human_input", prompt="Ship {{ n }}?", timeout=60, on_timeout=on_timeout,
             input_fields=[
                 {"name": "ok", "type": "boolean"},
                 {"name": "size", "type": "string", "required": False,
                  "options": ["s", "m"], "default": "m"}]),
        end(ok=("string", "{{ ok }}/{{ size }}/{{ responded_by }}")),
    ], [("start", "ask"), ("ask", "end")])


def test_a_bad_answer_is_refused_and_the_task_stays_open() -> None:
    answers = [{"ok": "maybe"}, {"ok": True, "size": "xl"}, {"ok": "true", "color": 1},
               {"ok": "true"}]
    run = Driver(asking(), answers={"ask": answers}).run({})
    refused = [e["message"] for e in run.trace if e["type"] == "input.rejected"]
    assert refused == [
        "invalid answer: 'ok' should be a boolean, got 'maybe'",
        "invalid answer: 'size' should be one of ['s', 'm'], got 'xl'",
        "invalid answer: 'color' is not a field of this form",
    ]
    assert run.outputs == {"ok": "True/m/ana"}


@pytest.mark.parametrize(("on_timeout", "expected"), [
    ("skip", "None/None/None"), ("default", "None/m/None")])
def test_human_input_timeout_skip_and_default(on_timeout: str, expected: str) -> None:
    run = Driver(asking(on_timeout)).run({}, now=0.0)
    assert run.outputs == {"ok": expected}
    assert run.step.state.now == 60.0


def test_human_input_timeout_error_fails_the_node() -> None:
    run = Driver(asking("error")).run({})
    assert run.error == {"node_id": "ask", "kind": "timeout",
                         "message": "no answer within 60s (on_timeout is 'error')"}


# -- actors --------------------------------------------------------------------------------------

def acting(policy: str = "confirm") -> dict[str, Any]:
    actor = {"name": "refund", "confirmation_policy": policy, "function": {
        "source": "def refund(amount):\n    return {'refunded': amount}\n"}}
    return doc([
        node("pay", "actor_call", actor=actor, input_mappings={"amount": "{{ n * 10 }}"},
             outputs={"paid": "refunded"}),
        end(paid=("number", "{{ paid }}")),
    ], [("start", "pay"), ("pay", "end")])


def test_an_actor_waits_for_approval_and_may_run_with_edited_arguments() -> None:
    decision = Confirmed("", True, {"amount": 5}, by="ana")
    run = Driver(acting(), decisions={"pay": decision}).run({})
    [asked] = [c for c in run.log if isinstance(c, AwaitConfirmation)]
    assert (asked.actor, asked.arguments) == ("refund", {"amount": 30})
    assert run.outputs == {"paid": 5}


def test_a_rejected_actor_call_fails_with_the_reason() -> None:
    decision = Confirmed("", False, reason="too much", by="ana")
    run = Driver(acting(), decisions={"pay": decision}).run({})
    assert run.error == {"node_id": "pay", "kind": "rejected",
                         "message": "ana rejected the call: too much"}
    assert not [c for c in run.log if isinstance(c, CallFunction)]


def test_an_auto_actor_runs_without_asking() -> None:
    run = Driver(acting("auto")).run({})
    assert run.outputs == {"paid": 30}
    assert not [c for c in run.log if isinstance(c, AwaitConfirmation)]


# -- expressions, types, variables, cancellation ------------------------------------------------

def test_an_undefined_name_names_the_node_field_and_name() -> None:
    run = Driver(doc([template("t", "Hi {{ nobody }}"), end()],
                     [("start", "t"), ("t", "end")])).run({})
    assert run.error["node_id"] == "t" and run.error["kind"] == "expression"
    assert "'nobody'" in run.error["message"] and "template" in run.error["message"]


def test_an_edge_condition_error_fails_its_source_node() -> None:
    run = Driver(doc([template("t", "x"), end()],
                     [("start", "t"), ("t", "end", "{{ ghost > 1 }}")])).run({})
    assert run.error["node_id"] == "t" and "edges.1" in run.error["message"]


def test_start_input_and_end_output_types_are_checked() -> None:
    typed = doc([end(out=("number", "{{ n | string }}"))], [("start", "end")])
    assert Driver(typed).run({"n": "four"}).error["kind"] == "invalid_input"
    assert Driver(typed).run({"n": "4"}).error == {
        "node_id": "end", "kind": "invalid_output",
        "message": "end output 'out' should be a number, got str '4'"}


def test_every_variable_operation() -> None:
    ops = [("set", "xs", "{{ [1, 2] }}"), ("append", "xs", "{{ 3 }}"),
           ("extend", "xs", "{{ [4, 1] }}"), ("remove", "xs", "{{ 1 }}"),
           ("set", "c", "{{ 5 }}"), ("increment", "c", "{{ 2 }}"), ("decrement", "c", None),
           ("set", "o", "{{ {'a': 1} }}"), ("merge", "o", "{{ {'b': 2} }}"),
           ("set", "gone", "text"), ("clear", "gone", None),
           ("set", "conversation.topic", "billing")]
    operations = [{"action": a, "variable": v, **({"value": x} if x else {})} for a, v, x in ops]
    run = Driver(doc([node("v", "variable", operations=operations),
                      end(all=("object", "{{ {'xs': xs, 'c': c, 'o': o, 'gone': gone} }}"))],
                     [("start", "v"), ("v", "end")])).run({})
    assert run.outputs == {"all": {"xs": [2, 3, 4], "c": 6, "o": {"a": 1, "b": 2}, "gone": ""}}
    assert run.step.state.conversation == {"topic": "billing"}


def test_a_bad_variable_operation_fails_naming_it() -> None:
    operations = [{"action": "increment", "variable": "s", "value": "{{ 'a' }}"}]
    run = Driver(doc([node("v", "variable", operations=operations), end()],
                     [("start", "v"), ("v", "end")])).run({})
    assert run.error["message"].startswith("operations.0 (increment s): increment needs numbers")


def test_sys_and_conversation_are_in_scope() -> None:
    typed = doc([end(out=("string", "{{ sys.run_id }} {{ conversation.lang }} {{ sys.now }}"))],
                [("start", "end")])
    stepper = Driver(typed).stepper
    step = stepper.start({}, now=0.0, context={"run_id": "r1"}, conversation={"lang": "fr"})
    assert step.state.outputs == {"out": "r1 fr 1970-01-01T00:00:00+00:00"}


def test_cancelling_a_run_abandons_what_is_pending() -> None:
    stepper = Driver(fork("all")).stepper
    step = stepper.start({})
    pending = sorted(step.state.pending)
    cancelled = stepper.step(step.state, CancelRun("user asked"))
    assert cancelled.state.status == "cancelled"
    assert sorted(cancelled.commands[0].command_ids) == pending  # type: ignore[union-attr]
    assert {"type": "run.cancelled", "reason": "user asked"} in cancelled.events
    assert not [c for c in cancelled.commands if isinstance(c, Fail | SleepUntil)]


def test_a_loop_node_can_be_retried_as_a_whole_by_its_handler() -> None:
    flaky = doc([
        node("each", "loop", source="{{ [1] }}", body_node_ids=["boom"]),
        code("boom", "def main():\n    raise ValueError('nope')\n"),
        node("guard", "error_handler", target_node_id="each", retry_count=1,
             retry_delay_seconds=0, on_error="continue"),
        end(r=("string", "r={{ results }}")),
    ], [("start", "each"), ("each", "end")])
    run = Driver(flaky).run({})
    assert run.ran("node.started").count("each#0/boom") == 2
    assert run.outputs == {"r": "r=None"}
