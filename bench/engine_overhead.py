"""Engine overhead per node: dhub's stepper against LangGraph, in the same process.

Trivial nodes, no persistence on either side, so what is measured is each engine's own cost of
walking a graph: a chain of 10/100/1000 nodes, a fan-out/fan-in of 10/100 branches and a
1000-iteration loop over a one-node body (LangGraph: a node with a conditional edge back to
itself). Prints seconds per node (per iteration for the loop) and the ratio, and writes
bench/results/engine_overhead-<time>.json.

    .venv/bin/python bench/engine_overhead.py      # needs the bench group: make bench
"""

from __future__ import annotations

import itertools
import json
import operator
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from dhub.engine.compile import compile_document
from dhub.engine.stepper import Complete, Stepper

RESULTS = Path(__file__).parent / "results"


def _node(node_id: str) -> dict[str, Any]:
    # A literal value: no expression to evaluate, so only the engine's walk is measured.
    return {"id": node_id, "type": "variable",
            "config": {"operations": [{"action": "set", "variable": "x", "value": 1}]}}  # fmt: skip


def _doc(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "name": "bench", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [{"id": "start", "type": "start", "config": {}}, *nodes,
                  {"id": "end", "type": "end", "config": {}}],
        "edges": [{"source": s, "target": t} for s, t in edges],
    }  # fmt: skip


def dhub_chain(n: int) -> Callable[[], None]:
    ids = [f"n{i}" for i in range(n)]
    chain = ["start", *ids, "end"]
    stepper = Stepper(
        compile_document(_doc([_node(i) for i in ids], list(itertools.pairwise(chain))))
    )
    return lambda: _check(stepper.start({}).commands)


def dhub_fan(n: int) -> Callable[[], None]:
    ids = [f"b{i}" for i in range(n)]
    edges = [("start", i) for i in ids] + [(i, "end") for i in ids]
    stepper = Stepper(compile_document(_doc([_node(i) for i in ids], edges)))
    return lambda: _check(stepper.start({}).commands)


def dhub_loop(n: int) -> Callable[[], None]:
    loop = {"id": "loop", "type": "loop", "config": {
        "mode": "count", "count": n, "max_iterations": n, "body_node_ids": ["body"]}}  # fmt: skip
    doc = _doc([loop, _node("body")], [("start", "loop"), ("loop", "end")])
    stepper = Stepper(compile_document(doc))
    return lambda: _check(stepper.start({}).commands)


def _check(commands: list[Any]) -> None:
    assert isinstance(commands[-1], Complete), commands


class _State(TypedDict):
    x: Annotated[int, operator.add]


def _lg_node(_: _State) -> dict[str, int]:
    return {"x": 1}


def langgraph_chain(n: int) -> Callable[[], None]:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(_State)
    ids = [f"n{i}" for i in range(n)]
    for i in ids:
        graph.add_node(i, _lg_node)
    chain = [START, *ids, END]
    for a, b in itertools.pairwise(chain):
        graph.add_edge(a, b)
    app = graph.compile()
    return lambda: _lg_check(app.invoke({"x": 0}, {"recursion_limit": n + 10}), n)


def langgraph_fan(n: int) -> Callable[[], None]:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(_State)
    graph.add_node("join", lambda s: {"x": 0})
    for i in range(n):
        graph.add_node(f"b{i}", _lg_node)
        graph.add_edge(START, f"b{i}")
    graph.add_edge([f"b{i}" for i in range(n)], "join")
    graph.add_edge("join", END)
    app = graph.compile()
    return lambda: _lg_check(app.invoke({"x": 0}), n)


def langgraph_loop(n: int) -> Callable[[], None]:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(_State)
    graph.add_node("body", _lg_node)
    graph.add_edge(START, "body")
    graph.add_conditional_edges("body", lambda s: "body" if s["x"] < n else END)
    app = graph.compile()
    return lambda: _lg_check(app.invoke({"x": 0}, {"recursion_limit": n + 10}), n)


def _lg_check(result: dict[str, Any], n: int) -> None:
    assert result["x"] == n, result


def per_node(run: Callable[[], None], nodes: int, budget: float = 2.0) -> float:
    """Median seconds per node over repeated runs (at least 3, within about ``budget`` s)."""
    run()  # warm up
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        if len(times) >= 200:
            break
    return statistics.median(times) / nodes


SHAPES: list[
    tuple[str, int, Callable[[int], Callable[[], None]], Callable[[int], Callable[[], None]]]
] = [
    ("chain", 10, dhub_chain, langgraph_chain),
    ("chain", 100, dhub_chain, langgraph_chain),
    ("chain", 1000, dhub_chain, langgraph_chain),
    ("fan-out/fan-in", 10, dhub_fan, langgraph_fan),
    ("fan-out/fan-in", 100, dhub_fan, langgraph_fan),
    ("loop", 1000, dhub_loop, langgraph_loop),
]


def main() -> None:
    rows = []
    print(f"{'shape':16} {'nodes':>6} {'dhub us/node':>14} {'langgraph us/node':>18} {'ratio':>8}")
    for shape, n, ours, theirs in SHAPES:
        d = per_node(ours(n), n)
        lg = per_node(theirs(n), n)
        rows.append({"shape": shape, "nodes": n, "dhub_s_per_node": d, "langgraph_s_per_node": lg,
                     "langgraph_over_dhub": lg / d})  # fmt: skip
        print(f"{shape:16} {n:>6} {d * 1e6:>14.1f} {lg * 1e6:>18.1f} {lg / d:>7.1f}x")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"engine_overhead-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"ratio = LangGraph's time per node / dhub's (goal: >= 10x). results: {out}")


if __name__ == "__main__":
    main()
