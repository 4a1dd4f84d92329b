"""Properties of the stepper on random valid workflow graphs (hypothesis; DESIGN.md 3.2).

The graphs (tests/support/graphs.py) mix template, variable, if_else and code nodes with loops
and parallel nodes, conditional edges, if_else labels, fan-out and joins; nothing in them can
fail, so every run should complete. Each property is checked for a few values of the start
input ``n``, which the conditions read, so the same graph takes different paths.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from dhub.engine.expressions import Expressions
from dhub.engine.state import Complete, Fail
from dhub.engine.stepper import Stepper
from tests.support.driver import Driver, Run
from tests.support.graphs import (
    ThawingDriver,
    Workflow,
    expect,
    frame_of,
    key,
    observed_frames,
    raced_out,
    winners,
    workflows,
)

EXPRESSIONS = Expressions()
STEP_BUDGET = 1_000  # far more events than any of these graphs needs
ns = st.lists(st.integers(-12, 30), min_size=1, max_size=3, unique=True)
properties = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def document(workflow: Workflow) -> dict[str, Any]:
    doc = workflow.document()
    note(json.dumps(doc))  # printed with a failing example: paste it into a test to replay
    return doc


def driver(doc: dict[str, Any], kind: type[Driver] = Driver, **options: Any) -> Driver:
    """A driver whose stepper shares the process's expression cache, as an executor's would
    (compiling Jinja is most of the cost of these small runs)."""
    made = kind(doc, **options)
    made.stepper = Stepper(made.stepper.graph, EXPRESSIONS)
    return made


def run(driver: Driver, n: int) -> Run:
    note(f"n = {n}")
    return driver.run({"n": n}, max_steps=STEP_BUDGET)


def keyed(trace: list[dict[str, Any]], kind: str = "node.started") -> Counter[tuple[str, str]]:
    """How often each (frame, node id) has a ``kind`` event in the trace."""
    return Counter((frame_of(e), e["node_id"]) for e in trace if e["type"] == kind)


# -- 1. termination -----------------------------------------------------------------------------


@properties
@given(workflows(), ns)
def test_every_run_terminates(workflow: Workflow, inputs: list[int]) -> None:
    """The run ends (Complete or Fail, last) within the step budget, nothing left pending;
    Driver.run raises if it runs out of budget or gets stuck with nothing to do."""
    runner = driver(document(workflow))
    for n in inputs:
        result = run(runner, n)
        assert isinstance(result.outcome, Complete | Fail)
        assert not any(isinstance(c, Complete | Fail) for c in result.log[:-1])
        assert result.step.state.status in ("succeeded", "failed")
        assert result.step.state.pending == {}


# -- 2, 3. each node at most once per frame; skipped nodes never start ---------------------------


@properties
@given(workflows(), ns)
def test_a_node_starts_at_most_once_per_frame(workflow: Workflow, inputs: list[int]) -> None:
    runner = driver(document(workflow))
    for n in inputs:
        trace = run(runner, n).trace
        for kind in ("node.started", "node.succeeded", "node.skipped"):
            twice = [k for k, times in keyed(trace, kind).items() if times > 1]
            assert twice == [], kind


@properties
@given(workflows(), ns)
def test_a_skipped_node_never_starts(workflow: Workflow, inputs: list[int]) -> None:
    runner = driver(document(workflow))
    for n in inputs:
        trace = run(runner, n).trace
        both = set(keyed(trace)) & set(keyed(trace, "node.skipped"))
        assert both == set()
        # and whatever succeeded had started, in the same frame
        assert set(keyed(trace, "node.succeeded")) <= set(keyed(trace))


# -- 4. determinism -----------------------------------------------------------------------------


@properties
@given(workflows(), ns)
def test_runs_are_deterministic(workflow: Workflow, inputs: list[int]) -> None:
    """Same document, same inputs: the same outcome, trace, commands and final state, even
    from a separately compiled copy of the document."""
    doc = document(workflow)
    first, second = driver(doc), driver(copy.deepcopy(doc))
    for n in inputs:
        a, b = run(first, n), run(second, n)
        assert a.outcome == b.outcome
        assert a.trace == b.trace
        assert a.log == b.log
        assert a.step.state.to_dict() == b.step.state.to_dict()


# -- 5. joins and dead-path elimination against a reference interpreter -------------------------


@properties
@given(workflows(), ns)
def test_nodes_run_as_the_reference_interpreter_says(workflow: Workflow, inputs: list[int]) -> None:
    """In every frame, a node succeeds iff it is an entry or at least one incoming edge was
    taken, and is skipped otherwise (so a join runs once, not once per edge, and never when all
    its paths died). Exact for the top level, every loop iteration and every branch except those
    that lost an ``any`` race, where what ran is a part of what would have run. The variable
    nodes' trail counts how often each ran, over all frames; the outputs are those of the ends
    reached. And a join waits until all of its incoming edges are resolved."""
    runner = driver(document(workflow))
    for n in inputs:
        result = run(runner, n)
        expected = expect(workflow, n)
        assert result.outputs == expected.outputs
        observed = observed_frames(result.trace)
        assert observed[""] == expected.frames[""]  # the top level, by itself
        won = winners(workflow, result.trace)
        for frame, (ran, skipped) in expected.frames.items():
            if not raced_out(workflow, frame, won):
                assert observed.get(frame) == (ran, skipped), frame
            elif frame in observed:
                assert observed[frame][0] <= ran, frame
                assert observed[frame][1] <= skipped, frame
        assert set(observed) <= set(expected.frames)
        assert Counter(result.step.state.variables["trail"]) == expected.trail
        assert_joins_wait(workflow, result.trace)


def assert_joins_wait(workflow: Workflow, trace: list[dict[str, Any]]) -> None:
    """A node starts, or is skipped, only once every node with an edge into it (in the same
    frame: edges never cross one) has succeeded or been skipped."""
    before: dict[str, set[str]] = {}
    for edge in workflow.all_edges():
        before.setdefault(edge.target, set()).add(edge.source)
    done: set[tuple[str, str]] = set()
    for e in trace:
        frame, node_id = frame_of(e), e.get("node_id", "")
        if e["type"] in ("node.started", "node.skipped"):
            waiting = {p for p in before.get(node_id, ()) if (frame, p) not in done}
            assert waiting == set(), f"{e['type']} {frame}/{node_id} before {waiting} finished"
        if e["type"] in ("node.succeeded", "node.skipped"):
            done.add((frame, node_id))


# -- 6. what loops and parallel nodes produce ---------------------------------------------------


def written_keys(trace: list[dict[str, Any]], frame: str) -> set[str]:
    """Every output name the nodes of ``frame`` wrote."""
    return {
        name
        for e in trace
        if e["type"] == "node.succeeded" and frame_of(e) == frame
        for name in e["outputs"]
    }


@properties
@given(workflows(), ns)
def test_loops_and_parallels_produce_what_they_ran(workflow: Workflow, inputs: list[int]) -> None:
    """A loop's ``count`` is its number of iterations, one frame and one result (holding what
    the body wrote in it) each; ``all`` / ``all_settled`` give every branch under ``branches``,
    ``any`` the winner only; each branch's outputs are what its nodes wrote."""
    runner = driver(document(workflow))
    for n in inputs:
        result = run(runner, n)
        expected = expect(workflow, n)
        frames = {frame_of(e) for e in result.trace}
        for e in result.trace:
            if e["type"] != "node.succeeded":
                continue
            node, outputs = workflow.node(e["node_id"]), e["outputs"]
            here = key(frame_of(e), node.id)
            if node.loop is not None:
                count = outputs["count"]
                assert count == expected.loops[here]
                assert len(outputs["results"]) == count
                iterations = {f for f in frames if re.fullmatch(re.escape(here) + r"#\d+", f)}
                wanted = range(count) if node.loop.body.nodes else range(0)
                assert iterations == {f"{here}#{i}" for i in wanted}
                for i in wanted:
                    assert set(outputs["results"][i]) == written_keys(result.trace, f"{here}#{i}")
            if node.parallel is not None:
                ids = [b for b, _ in node.parallel.branches]
                branches = outputs["branches"]
                if node.parallel.strategy == "any":
                    assert outputs["winner"] in ids
                    assert list(branches) == [outputs["winner"]]
                else:
                    assert list(branches) == ids
                for b in branches:
                    assert set(branches[b]) == written_keys(result.trace, f"{here}@{b}")


# -- 7. the run state round-trips through JSON --------------------------------------------------


def same_run(a: Run, b: Run) -> None:
    assert a.outcome == b.outcome
    assert a.trace == b.trace
    assert a.log == b.log
    assert a.step.state.to_dict() == b.step.state.to_dict()


@properties
@given(workflows(), ns, st.data())
def test_state_round_trips_through_json_at_any_step(
    workflow: Workflow, inputs: list[int], data: st.DataObject
) -> None:
    """Every state is plain JSON data, and a run continued from its state read back from JSON
    (at one random step, or at every step while stepping in place) ends exactly as the run
    that kept its state in memory."""
    doc = document(workflow)
    for n in inputs:
        plain = driver(doc, ThawingDriver)
        assert isinstance(plain, ThawingDriver)
        base = run(plain, n)
        for state in plain.states:
            assert json.loads(json.dumps(state)) == state
        steps = len(plain.states) - 1  # events fed after start
        at = data.draw(st.integers(0, max(steps - 1, 0)), label="round trip before step")
        same_run(base, run(driver(doc, ThawingDriver, thaw_at=frozenset({at})), n))
        every = driver(doc, ThawingDriver, thaw_at=frozenset(range(steps)), in_place=True)
        same_run(base, run(every, n))


# -- regressions, minimised from the properties above -------------------------------------------


def test_any_parallel_with_two_empty_branches() -> None:
    """The first empty branch wins at once; the other one, empty too, has no frame to cancel
    (the stepper used to raise KeyError cancelling it)."""
    doc = {
        "name": "race", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "race", "type": "parallel", "config": {
                "join_strategy": "any",
                "branches": [{"id": "a", "node_ids": []}, {"id": "b", "node_ids": []}]}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"source": "start", "target": "race"}, {"source": "race", "target": "end"}],
    }  # fmt: skip
    result = Driver(doc).run({})
    assert result.outputs == {}
    [done] = [e for e in result.trace if e["type"] == "node.succeeded" and e["node_id"] == "race"]
    assert done["outputs"] == {"branches": {"a": {}}, "winner": "a"}
