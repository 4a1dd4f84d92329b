"""Random valid workflow graphs for property tests, with a reference interpreter.

``workflows()`` draws a ``Workflow``: a DAG with a start node, template / variable / if_else /
code nodes, loops (count or list mode, a small body DAG inside) and parallel nodes (2-3 branches,
each a small DAG), and one or more end nodes. Edges only go forward, never cross a body or branch
boundary; if_else edges are labelled "true"/"false"; some plain edges carry conditions over the
start input ``n``, a loop's counter (inside its body) or the output a code node just wrote (on
its own outgoing edges). Nodes are listed in the document in topological or shuffled order.
``Workflow.document()`` is the agent document; it always passes ``compile_document``.

``expect(workflow, n)`` is an independent reference interpreter of DESIGN.md 3.2 for these
graphs: which nodes succeed and which are skipped in every frame, how many iterations every
loop makes, what the variable nodes append to ``trail`` and which ends are reached. It shares no
code with the engine.

``ThawingDriver`` is the synchronous test driver with two twists: it can round-trip the run
state through JSON before chosen steps, and it can step in place.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import strategies as st

from dhub.engine.state import RunState
from tests.support.driver import Driver, Run

MAX_DEPTH = 2  # containers nest at most this deep (a loop in a branch, not a loop in that)


@dataclass(frozen=True)
class Cond:
    """A condition over one integer name: ``n > a``, ``n < a``, ``n % a == b``, ``n % a != b``,
    written bare or inside ``{{ }}``."""

    var: str
    kind: str
    a: int
    b: int = 0
    braces: bool = False

    def text(self) -> str:
        expr = {
            "gt": f"{self.var} > {self.a}",
            "lt": f"{self.var} < {self.a}",
            "mod": f"{self.var} % {self.a} == {self.b}",
            "nmod": f"{self.var} % {self.a} != {self.b}",
        }[self.kind]
        return f"{{{{ {expr} }}}}" if self.braces else expr

    def holds(self, env: dict[str, int]) -> bool:
        v = env[self.var]
        if self.kind == "gt":
            return v > self.a
        if self.kind == "lt":
            return v < self.a
        if self.kind == "mod":
            return v % self.a == self.b
        return v % self.a != self.b


@dataclass
class Edge:
    source: str
    target: str
    cond: Cond | None = None
    label: str | None = None  # "true" / "false" on edges leaving an if_else


@dataclass
class Scope:
    nodes: list[Node]  # in a topological order
    edges: list[Edge]


@dataclass
class Loop:
    mode: str  # "count" or "list"
    count: int  # count mode: the count; list mode: the m of ``range(var % m)``
    var: str  # list mode: the name the source reads
    counter: str
    iterator: str
    body: Scope

    def iterations(self, env: dict[str, int]) -> int:
        return self.count if self.mode == "count" else env[self.var] % self.count

    def bind(self, env: dict[str, int], index: int) -> dict[str, int]:
        bound = {**env, self.counter: index}
        if self.mode == "list":
            bound[self.iterator] = index  # the source is range(...): item == index
        return bound


@dataclass
class Parallel:
    strategy: str  # all / any / all_settled
    branches: list[tuple[str, Scope]]


@dataclass
class Node:
    id: str
    kind: str  # start, end, template, variable, if_else, code, loop, parallel
    arg: str = "n"  # the name a template, code or variable node reads
    cond: Cond | None = None  # if_else
    trail: bool = False  # variable: append the node id to ``trail`` (else set a name of its own)
    outputs: bool = True  # end: has an output
    loop: Loop | None = None
    parallel: Parallel | None = None

    def config(self) -> dict[str, Any]:
        i, arg = self.id, self.arg
        if self.kind == "start":
            return {
                "variables": [
                    {"name": "n", "type": "number"},
                    {"name": "trail", "type": "array", "required": False, "default": []},
                ]
            }
        if self.kind == "end":
            outputs = [{"name": f"from_{i}", "type": "string", "value": "n={{ n }}"}]
            return {"outputs": outputs if self.outputs else []}
        if self.kind == "template":
            return {"template": f"{i}:{{{{ {arg} }}}}", "output": f"{i}_text"}
        if self.kind == "variable":
            if self.trail:
                op = {"action": "append", "variable": "trail", "value": i}
            else:
                op = {"action": "set", "variable": f"{i}_v", "value": f"{{{{ {arg} * 2 }}}}"}
            return {"operations": [op]}
        if self.kind == "if_else":
            assert self.cond is not None
            return {"condition": self.cond.text()}
        if self.kind == "code":
            return {
                "source": f"def main(x):\n    return {{'{i}_out': x + 1}}\n",
                "input_mappings": {"x": f"{{{{ {arg} }}}}"},
                "outputs": {f"{i}_out": {"type": "number"}},
            }
        if self.loop is not None:
            loop = self.loop
            config: dict[str, Any] = {
                "mode": loop.mode,
                "counter": loop.counter,
                "max_iterations": 10,
                "body_node_ids": [n.id for n in loop.body.nodes],
            }
            if loop.mode == "count":
                config["count"] = loop.count
            else:
                config["source"] = f"{{{{ range({loop.var} % {loop.count}) | list }}}}"
                config["iterator"] = loop.iterator
            return config
        assert self.parallel is not None
        return {
            "branches": [
                {"id": b, "node_ids": [n.id for n in scope.nodes]}
                for b, scope in self.parallel.branches
            ],
            "join_strategy": self.parallel.strategy,
            "timeout": 60,
        }

    def inner(self) -> list[Scope]:
        if self.loop is not None:
            return [self.loop.body]
        if self.parallel is not None:
            return [scope for _, scope in self.parallel.branches]
        return []


@dataclass
class Workflow:
    top: Scope
    permutation: list[int] | None = None  # the document lists the nodes in this order

    def all_nodes(self) -> list[Node]:
        """Every node, each container followed by its bodies' / branches' nodes."""
        out: list[Node] = []

        def visit(scope: Scope) -> None:
            for node in scope.nodes:
                out.append(node)
                for inner in node.inner():
                    visit(inner)

        visit(self.top)
        return out

    def all_edges(self) -> list[Edge]:
        out: list[Edge] = []

        def visit(scope: Scope) -> None:
            out.extend(scope.edges)
            for node in scope.nodes:
                for inner in node.inner():
                    visit(inner)

        visit(self.top)
        return out

    def node(self, node_id: str) -> Node:
        return next(n for n in self.all_nodes() if n.id == node_id)

    def document(self) -> dict[str, Any]:
        nodes = [{"id": n.id, "type": n.kind, "config": n.config()} for n in self.all_nodes()]
        if self.permutation is not None:
            nodes = [nodes[i] for i in self.permutation]
        edges = []
        for e in self.all_edges():
            edge: dict[str, Any] = {"source": e.source, "target": e.target}
            if e.label is not None:
                edge["condition"] = e.label
            elif e.cond is not None:
                edge["condition"] = e.cond.text()
            edges.append(edge)
        return {
            "name": "random-graph",
            "description": "",
            "mode": "workflow",
            "input_mode": "event",
            "nodes": nodes,
            "edges": edges,
        }


# -- the strategy -------------------------------------------------------------------------------
# Plain functions over ``draw`` and small integer draws (hypothesis caches those strategies), so
# a graph of a few dozen nodes takes milliseconds to draw, not tens of them.

# Repeats weight the choice; hypothesis shrinks towards the front of the list.
_INNER_KINDS = ("template",) * 4 + ("variable",) * 3 + ("if_else",) * 3 + ("code",) * 2
_CONTAINER_KINDS = ("loop", "parallel")
_TOP_KINDS = _INNER_KINDS * 2 + _CONTAINER_KINDS
_BODY_KINDS = _INNER_KINDS + ("code",) * 2 + _CONTAINER_KINDS  # calls keep frames open
_PREFIX = {
    "template": "t",
    "variable": "v",
    "if_else": "if",
    "code": "c",
    "loop": "L",
    "parallel": "P",
    "end": "e",
}
_T = TypeVar("_T")


def _pick(draw: st.DrawFn, options: Sequence[_T]) -> _T:
    return options[draw(st.integers(0, len(options) - 1))]


def _condition(draw: st.DrawFn, names: Sequence[str]) -> Cond:
    var = _pick(draw, names)
    kind = _pick(draw, ("gt", "mod", "lt", "nmod"))
    braces = draw(st.booleans())
    if kind in ("gt", "lt"):
        low, high = (-1, 4) if var.endswith(("_i", "_item")) else (-2, 12)
        return Cond(var, kind, draw(st.integers(low, high)), braces=braces)
    a = draw(st.integers(2, 4))
    return Cond(var, kind, a, draw(st.integers(0, a - 1)), braces)


class _Ids:
    def __init__(self) -> None:
        self.next = 0

    def new(self, prefix: str) -> str:
        self.next += 1
        return f"{prefix}{self.next}"


def _node(
    draw: st.DrawFn, ids: _Ids, kind: str, names: Sequence[str], depth: int, in_any: bool
) -> Node:
    node = Node(ids.new(_PREFIX[kind]), kind, arg=_pick(draw, names))
    if kind == "if_else":
        node.cond = _condition(draw, names)
    elif kind == "variable":
        # In an ``any`` race a losing branch may stop half-way: only unraced nodes leave a trail.
        node.trail = not in_any
    elif kind == "loop":
        mode = _pick(draw, ("count", "list"))
        counter, iterator = f"{node.id}_i", f"{node.id}_item"
        inner_names = [*names, counter] + ([iterator] if mode == "list" else [])
        body = _scope(draw, ids, inner_names, depth + 1, in_any, max_size=4)
        count = draw(st.integers(0, 4)) if mode == "count" else draw(st.integers(2, 6))
        node.loop = Loop(mode, count, _pick(draw, names), counter, iterator, body)
    elif kind == "parallel":
        strategy = _pick(draw, ("all", "any", "all_settled"))
        raced = in_any or strategy == "any"
        branches = [
            (f"b{k}", _scope(draw, ids, names, depth + 1, raced, max_size=3))
            for k in range(draw(st.integers(2, 3)))
        ]
        node.parallel = Parallel(strategy, branches)
    return node


def _incoming(
    draw: st.DrawFn, target: str, sources: list[Node], names: Sequence[str], most: int
) -> list[Edge]:
    """1..most edges into ``target`` from earlier nodes (now and then two from the same one).
    A condition on an edge leaving a code node may read the output it just wrote."""
    edges = []
    for _ in range(draw(st.integers(1, most))):
        source = _pick(draw, sources)
        if source.kind == "if_else":
            edges.append(Edge(source.id, target, label=_pick(draw, ("true", "false"))))
            continue
        cond = None
        if draw(st.integers(0, 2)) == 2:
            fresh = [f"{source.id}_out"] if source.kind == "code" else []
            cond = _condition(draw, [*names, *fresh])
        edges.append(Edge(source.id, target, cond=cond))
    return edges


def _scope(
    draw: st.DrawFn,
    ids: _Ids,
    names: Sequence[str],
    depth: int,
    in_any: bool,
    max_size: int,
) -> Scope:
    """A loop body or parallel branch: a small DAG whose first node is an entry; later nodes
    are entries too now and then, else joined from earlier ones."""
    kinds = _BODY_KINDS if depth < MAX_DEPTH else _INNER_KINDS
    nodes: list[Node] = []
    edges: list[Edge] = []
    for i in range(draw(st.integers(0, max_size))):
        node = _node(draw, ids, _pick(draw, kinds), names, depth, in_any)
        if i > 0 and draw(st.integers(0, 3)) != 0:
            edges += _incoming(draw, node.id, nodes, names, most=2)
        nodes.append(node)
    return Scope(nodes, edges)


@st.composite
def workflows(draw: st.DrawFn, max_inner: int = 25) -> Workflow:
    """A random valid workflow: start, 1..max_inner inner nodes, 1..3 end nodes, each inner
    and end node with 1..3 incoming edges from earlier nodes."""
    ids = _Ids()
    names = ("n",)
    nodes, edges = [Node("start", "start")], []
    for _ in range(draw(st.integers(1, max_inner))):
        node = _node(draw, ids, _pick(draw, _TOP_KINDS), names, 0, False)
        edges += _incoming(draw, node.id, nodes, names, most=3)
        nodes.append(node)
    sources = list(nodes)
    for _ in range(draw(st.integers(1, 3))):
        end = Node(ids.new("e"), "end", outputs=draw(st.integers(0, 3)) > 0)
        edges += _incoming(draw, end.id, sources, names, most=3)
        nodes.append(end)
    workflow = Workflow(Scope(nodes, edges))
    if draw(st.booleans()):  # the document lists the nodes in any order
        total = len(workflow.all_nodes())
        workflow.permutation = draw(st.permutations(range(total)))
    return workflow


# -- the reference interpreter ------------------------------------------------------------------


@dataclass
class Expected:
    frames: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)  # loop key -> iterations
    trail: Counter[str] = field(default_factory=Counter)
    outputs: dict[str, Any] = field(default_factory=dict)


def key(frame: str, node_id: str) -> str:
    return f"{frame}/{node_id}" if frame else node_id


def expect(workflow: Workflow, n: int) -> Expected:
    """What a run with input ``n`` does, per DESIGN.md 3.2: a node runs iff it has no incoming
    edge in its scope or at least one incoming edge was taken, and is skipped otherwise; an edge
    is taken iff its source ran and its condition (or if_else label) holds. Every branch of every
    parallel is run to the end (for ``any`` races the caller decides what to compare)."""
    out = Expected()

    def run(scope: Scope, frame: str, env: dict[str, int]) -> None:
        ran: set[str] = set()
        skipped: set[str] = set()
        taken: dict[int, bool] = {}
        for node in scope.nodes:
            incoming = [i for i, e in enumerate(scope.edges) if e.target == node.id]
            if incoming and not any(taken[i] for i in incoming):
                skipped.add(node.id)
                for i, e in enumerate(scope.edges):
                    if e.source == node.id:
                        taken[i] = False
                continue
            ran.add(node.id)
            here = key(frame, node.id)
            if node.kind == "variable" and node.trail:
                out.trail[node.id] += 1
            if node.kind == "end" and node.outputs:
                out.outputs[f"from_{node.id}"] = f"n={n}"
            if node.loop is not None:
                count = node.loop.iterations(env)
                out.loops[here] = count
                if node.loop.body.nodes:
                    for index in range(count):
                        run(node.loop.body, f"{here}#{index}", node.loop.bind(env, index))
            if node.parallel is not None:
                for branch_id, branch in node.parallel.branches:
                    if branch.nodes:
                        run(branch, f"{here}@{branch_id}", env)
            seen = {**env, f"{node.id}_out": env[node.arg] + 1} if node.kind == "code" else env
            for i, e in enumerate(scope.edges):
                if e.source != node.id:
                    continue
                if e.label is not None:
                    assert node.cond is not None
                    taken[i] = (e.label == "true") == node.cond.holds(env)
                else:
                    taken[i] = e.cond is None or e.cond.holds(seen)
        out.frames[frame] = (frozenset(ran), frozenset(skipped))

    run(workflow.top, "", {"n": n})
    return out


# -- reading a run ------------------------------------------------------------------------------


def frame_of(event: dict[str, Any]) -> str:
    return str(event.get("frame", ""))


def observed_frames(
    trace: list[dict[str, Any]],
) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Frame -> (nodes that succeeded, nodes that were skipped), from a trace."""
    ran: dict[str, set[str]] = {}
    skipped: dict[str, set[str]] = {}
    for e in trace:
        if e["type"] in ("node.started", "node.succeeded", "node.skipped"):
            ran.setdefault(frame_of(e), set())
            skipped.setdefault(frame_of(e), set())
        if e["type"] == "node.succeeded":
            ran[frame_of(e)].add(e["node_id"])
        elif e["type"] == "node.skipped":
            skipped[frame_of(e)].add(e["node_id"])
    return {f: (frozenset(ran[f]), frozenset(skipped[f])) for f in ran}


def winners(workflow: Workflow, trace: list[dict[str, Any]]) -> dict[str, str]:
    """Key of every ``any`` parallel that succeeded -> its winning branch."""
    out = {}
    for e in trace:
        if e["type"] != "node.succeeded":
            continue
        parallel = workflow.node(e["node_id"]).parallel
        if parallel is not None and parallel.strategy == "any":
            out[key(frame_of(e), e["node_id"])] = e["outputs"]["winner"]
    return out


def raced_out(workflow: Workflow, frame: str, won: dict[str, str]) -> bool:
    """Whether ``frame`` lies in a branch that lost an ``any`` race (or in one that never ran
    to the end because an enclosing branch lost)."""
    parts = frame.split("/") if frame else []
    for k, part in enumerate(parts):
        if "@" not in part:
            continue
        parallel_id, branch_id = part.split("@")
        node = workflow.node(parallel_id)
        assert node.parallel is not None
        if node.parallel.strategy != "any":
            continue
        parallel_key = "/".join([*parts[:k], parallel_id])
        if won.get(parallel_key) != branch_id:
            return True
    return False


# -- driving with JSON round trips --------------------------------------------------------------


def thaw(state: RunState) -> RunState:
    """The state as an executor would read it back from its database."""
    return RunState.from_dict(json.loads(json.dumps(state.to_dict())))


@dataclass
class ThawingDriver(Driver):
    """``Driver`` that round-trips the state through JSON before the steps numbered in
    ``thaw_at`` (0 is the first event after ``start``), optionally steps in place, and keeps
    every state it saw (as dicts) in ``states``."""

    thaw_at: frozenset[int] = frozenset()
    in_place: bool = False
    states: list[dict[str, Any]] = field(default_factory=list)

    def run(self, inputs: dict[str, Any], now: float = 100.0, max_steps: int = 10_000) -> Run:
        step = self.stepper.start(inputs, now=now)
        run = Run(step, list(step.events))
        outstanding: dict[str, Any] = {}
        for index in range(max_steps):
            self.states.append(step.state.to_dict())
            if self._take(run, step.commands, outstanding):
                run.step = step
                return run
            state = thaw(step.state) if index in self.thaw_at else step.state
            event = self._next_event(state.now, outstanding)
            step = self.stepper.step(state, event, in_place=self.in_place)
            run.trace += step.events
        raise AssertionError("the run did not end")
