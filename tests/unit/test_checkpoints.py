"""State patches: replaying them rebuilds the state exactly, and they hold only what changed."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dhub.engine import checkpoints
from dhub.engine.checkpoints import apply, diff, snapshot
from dhub.engine.compile import compile_document
from dhub.engine.stepper import Complete, Stepper

keys = st.sampled_from(["a", "b", "c", "variables", "x", "results"])
leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
states = st.dictionaries(keys, json_values, max_size=5)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (True is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@given(states, states)
@settings(max_examples=300, deadline=None)
def test_applying_the_diff_rebuilds_the_new_state(before: Any, after: Any) -> None:
    patch = diff(before, after)
    rebuilt = apply(copy.deepcopy(before), json.loads(json.dumps(patch)))
    assert same(rebuilt, after)
    assert diff(after, after) == []


@given(states, st.lists(json_values, min_size=1, max_size=3))
def test_a_list_that_grew_stores_only_its_new_items(state: Any, more: list[Any]) -> None:
    before = {**state, "results": [1, 2]}
    after = {**state, "results": [1, 2, *more]}
    assert diff(before, after) == [["extend", ["results"], more]]


def test_a_big_unchanged_value_is_never_written_again() -> None:
    """A run whose state holds a 100 kB input: 1,000 steps that each change one counter
    write about 40 bytes each, far below one copy of the state per step (100 MB)."""
    big = "x" * 100_000
    doc = {
        "name": "big", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "blob", "type": "string"}]}},
            {"id": "each", "type": "loop", "config": {
                "mode": "count", "count": 1000, "max_iterations": 1000,
                "body_node_ids": ["tick"]}},
            {"id": "tick", "type": "variable", "config": {"operations": [
                {"action": "increment", "variable": "n"}]}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "n", "type": "number", "value": "{{ n }}"}]}},
        ],
        "edges": [{"source": "start", "target": "each"}, {"source": "each", "target": "end"}],
    }  # fmt: skip
    step = Stepper(compile_document(doc)).start({"blob": big})
    assert step.commands == [Complete({"n": 1000})]
    first = snapshot(step.state.to_dict())
    assert len(json.dumps(first)) > 100_000
    written = 0
    state = first
    for i in range(1000):
        after = snapshot(state)
        after["variables"]["n"] = i
        written += len(json.dumps(diff(state, after)))
        state = after
    assert written < 50_000  # about 40 bytes a step; a full copy each would be 100 MB


def test_a_value_that_changes_type_but_not_equality_is_saved() -> None:
    # False == 0 and 1 == 1.0 in Python; as JSON they differ, and a resumed run must see them.
    before = {"a": [False, True, 1], "b": {"x": 1}}
    after = {"a": [False, True, 1.0], "b": {"x": True}}
    patch, snapshot = checkpoints.advance(before, after)
    assert patch and snapshot == after
    rebuilt = checkpoints.apply(copy.deepcopy(before), patch)
    assert [type(v) for v in rebuilt["a"]] == [bool, bool, float]
    assert type(rebuilt["b"]["x"]) is bool


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


@given(st.lists(states, min_size=2, max_size=5))
@settings(max_examples=300, deadline=None)
def test_advancing_step_by_step_replays_and_never_shares_the_live_state(
    sequence: list[Any],
) -> None:
    """What the run writer does: each step's patch against the last snapshot; replaying the
    patches gives every state, and the snapshot owns its containers (the engine mutates the
    live state in place, and that must never change what the next diff compares against)."""
    replayed: dict[str, Any] = {}
    before: dict[str, Any] = {}
    for state in sequence:
        live = copy.deepcopy(state)
        patch, before = checkpoints.advance(before, live)
        replayed = apply(replayed, json.loads(json.dumps(patch)))
        assert same(replayed, state) and same(before, state)
        live_ids = {id(c) for c in _containers(live)}
        assert not live_ids & {id(c) for c in _containers(before)}
