"""Loops and parallel nodes: their frames, from opening to closing (DESIGN.md 3.2).

A loop runs its body once per iteration, one iteration after the other, each in its own frame
(``each#0``, ``each#1``, ...) binding the iterator and counter. A parallel node opens one frame
per branch (``agg@a``, ``agg@b``) at once, so their calls are all in flight together, and a
timer for its timeout. A frame closes when its last node is done (succeeded, skipped, or failed
and handled) or when a node in it fails unhandled; what the frame's nodes wrote becomes one
loop result or one branch's outputs. A frame that is no longer wanted (a lost ``any`` race, a
failed ``all`` sibling, a timeout) is cancelled: its pending commands are abandoned and its
nested frames dropped.
"""

from __future__ import annotations

from typing import Any

from dhub.domain.nodes import HumanInputWorkflowNode, LoopWorkflowNode, ParallelWorkflowNode
from dhub.engine import actions
from dhub.engine.actions import Evaluate, NodeFailure
from dhub.engine.state import node_key
from dhub.engine.values import field_defaults
from dhub.engine.walk_port import WalkPort


class Containers:
    def __init__(self, walk: WalkPort) -> None:
        self.walk = walk
        self.state = walk.state
        self.graph = walk.graph

    # -- frames -------------------------------------------------------------------------------

    def open_frame(self, path: str, scope_id: str, parent: str, owner: str, tag: Any) -> None:
        scope = self.graph.scopes[scope_id]
        self.state.frames[path] = {
            "scope": scope_id,
            "parent": parent,
            "owner": owner,
            "tag": tag,
            "vars": {},
            "nodes": {},
            "left": self.walk.stepper.scope_size[scope_id],
        }
        for node_id in scope.entries:
            self.walk.push(path, node_id)

    def close_frame(self, path: str, error: dict[str, Any] | None) -> None:
        """The frame is done: hand what it wrote (or its error) to its loop or parallel node."""
        if error is not None:
            self._cancel_inside(path)
        box = self.state.frames.pop(path)
        scope = self.graph.scopes[box["scope"]]
        written: dict[str, Any] = {}
        for node_id in scope.node_ids:
            written.update(box["nodes"].get(node_id, ()))
        self._forget(path, scope.node_ids)
        owner = self.graph.nodes[box["owner"]]
        if isinstance(owner, LoopWorkflowNode):
            self._iteration_done(box["parent"], owner, written, error)
        else:
            assert isinstance(owner, ParallelWorkflowNode)
            self._branch_done(box["parent"], owner, box["tag"], written, error)

    def _forget(self, path: str, node_ids: tuple[str, ...]) -> None:
        """Drop the per-node state of a closed frame: it lives on in the trace events."""
        state, prefix = self.state, path + "/"
        for node_id in node_ids:
            key = prefix + node_id
            state.nodes.pop(key, None)
            state.attempts.pop(key, None)
            for link_key in self.walk.stepper.out_keys[node_id]:
                state.links.pop(prefix + link_key, None)

    def _cancel_inside(self, path: str) -> None:
        """Abandon everything still going on in a frame and the frames nested in it."""
        state, prefix = self.state, path + "/"
        for command_id, key in list(state.pending.items()):
            if key.startswith(prefix):
                del state.pending[command_id]
                self.walk.cancelled.append(command_id)
        for table in (state.frames, state.loops, state.parallels, state.timers, state.asked):
            for key in [k for k in table if k.startswith(prefix)]:
                del table[key]
        for nested in (state.nodes, state.attempts, state.links):
            for key in [k for k in nested if k.startswith(prefix)]:
                del nested[key]

    def _cancel_frame(self, path: str) -> None:
        self._cancel_inside(path)
        del self.state.frames[path]

    # -- loops --------------------------------------------------------------------------------

    def run_loop(self, frame: str, node: LoopWorkflowNode, ev: Evaluate) -> None:
        count, items = actions.loop_items(ev, node, self.walk.scope(frame))
        self.walk.started_with({"count": count} if items is None else {"items": items})
        if count == 0 or self.walk.stepper.scope_size[node.id] == 0:
            results: list[dict[str, Any]] = [{} for _ in range(count)]
            self.walk.succeed(frame, node.id, {"results": results, "count": count})
            return
        key = node_key(frame, node.id)
        self.state.nodes[key] = "running"
        self.state.loops[key] = {"items": items, "count": count, "results": []}
        self._open_iteration(frame, node, 0)

    def _open_iteration(self, frame: str, node: LoopWorkflowNode, index: int) -> None:
        key = node_key(frame, node.id)
        path = f"{key}#{index}"
        self.open_frame(path, node.id, frame, node.id, index)
        bound = self.state.frames[path]["vars"]
        bound[node.config.counter] = index
        items = self.state.loops[key]["items"]
        if items is not None:
            bound[node.config.iterator] = items[index]

    def _iteration_done(
        self,
        frame: str,
        node: LoopWorkflowNode,
        written: dict[str, Any],
        error: dict[str, Any] | None,
    ) -> None:
        key = node_key(frame, node.id)
        progress = self.state.loops[key]
        index = len(progress["results"])
        if error is not None:
            del self.state.loops[key]
            message = f"iteration {index} failed at '{error['node_id']}': {error['message']}"
            self.walk.on_failure(frame, node.id, NodeFailure(message, error["kind"]))
            return
        progress["results"].append(written)
        if index + 1 < progress["count"]:
            self._open_iteration(frame, node, index + 1)
            return
        del self.state.loops[key]
        outputs = {"results": progress["results"], "count": progress["count"]}
        self.walk.succeed(frame, node.id, outputs)

    # -- parallel nodes -----------------------------------------------------------------------

    def run_parallel(self, frame: str, node: ParallelWorkflowNode) -> None:
        key = node_key(frame, node.id)
        branch_ids = [branch.id for branch in node.config.branches]
        self.state.nodes[key] = "running"
        self.state.parallels[key] = {"open": list(branch_ids), "done": {}, "failed": {}}
        self.walk.start_timer(frame, node.id, self.state.now + float(node.config.timeout))
        sizes = self.walk.stepper.scope_size
        for branch_id in branch_ids:
            scope_id = f"{node.id}/{branch_id}"
            if sizes[scope_id]:
                self.open_frame(f"{key}@{branch_id}", scope_id, frame, node.id, branch_id)
        for branch_id in branch_ids:  # empty branches are done at once, once all are open
            if not sizes[f"{node.id}/{branch_id}"] and key in self.state.parallels:
                self._branch_done(frame, node, branch_id, {}, None)

    def _branch_done(
        self,
        frame: str,
        node: ParallelWorkflowNode,
        branch_id: str,
        written: dict[str, Any],
        error: dict[str, Any] | None,
    ) -> None:
        key = node_key(frame, node.id)
        race = self.state.parallels[key]
        race["open"].remove(branch_id)
        if error is None:
            race["done"][branch_id] = written
        else:
            race["failed"][branch_id] = error
        strategy, still_open = node.config.join_strategy, bool(race["open"])
        if strategy == "any" and error is None:
            won = {"branches": {branch_id: written}, "winner": branch_id}
            self._settle_parallel(frame, node, won)
        elif strategy == "all" and error is not None:
            message = f"branch '{branch_id}' failed at '{error['node_id']}': {error['message']}"
            self._settle_parallel(frame, node, NodeFailure(message, error["kind"]))
        elif still_open:
            return
        elif strategy == "any":
            reasons = "; ".join(f"'{b}': {e['message']}" for b, e in race["failed"].items())
            self._settle_parallel(frame, node, NodeFailure(f"every branch failed ({reasons})"))
        else:
            self._settle_parallel(frame, node, {"branches": self._settled(node, race)})

    @staticmethod
    def _settled(node: ParallelWorkflowNode, race: dict[str, Any]) -> dict[str, Any]:
        """Every branch's outputs in declaration order; a failed one (all_settled) as
        ``{"error": ...}``."""
        result = {}
        for branch in node.config.branches:
            if branch.id in race["done"]:
                result[branch.id] = race["done"][branch.id]
            else:
                result[branch.id] = {"error": race["failed"][branch.id]}
        return result

    def _settle_parallel(
        self, frame: str, node: ParallelWorkflowNode, outcome: dict[str, Any] | NodeFailure
    ) -> None:
        key = node_key(frame, node.id)
        race = self.state.parallels.pop(key)
        for branch_id in race["open"]:
            if f"{key}@{branch_id}" in self.state.frames:  # an empty branch has no frame
                self._cancel_frame(f"{key}@{branch_id}")
            self.walk.trace("branch.cancelled", frame, node.id, branch=branch_id)
        self.walk.stop_timer(key)
        if isinstance(outcome, NodeFailure):
            self.walk.on_failure(frame, node.id, outcome)
        else:
            self.walk.succeed(frame, node.id, outcome)

    # -- timeouts -----------------------------------------------------------------------------

    def timed_out(self, frame: str, node_id: str) -> None:
        """A parallel node's or a human task's timeout fired (its timer is already gone)."""
        node = self.graph.nodes[node_id]
        key = node_key(frame, node_id)
        if isinstance(node, ParallelWorkflowNode):
            still = ", ".join(f"'{b}'" for b in self.state.parallels[key]["open"])
            failure = NodeFailure(
                f"timed out after {node.config.timeout:g}s with branch(es) {still} still "
                "running: raise timeout or make the branches faster",
                "timeout",
            )
            self._settle_parallel(frame, node, failure)
            return
        assert isinstance(node, HumanInputWorkflowNode)
        for command_id, waiting in list(self.state.pending.items()):
            if waiting == key:
                del self.state.pending[command_id]
                self.walk.cancelled.append(command_id)
        config = node.config
        self.walk.trace("input.timed_out", frame, node_id, on_timeout=config.on_timeout)
        if config.on_timeout == "error":
            message = f"no answer within {config.timeout:g}s (on_timeout is 'error')"
            self.walk.on_failure(frame, node_id, NodeFailure(message, "timeout"))
            return
        values = field_defaults(config.input_fields) if config.on_timeout == "default" else {}
        answer = {f.name: values.get(f.name) for f in config.input_fields}
        self.walk.succeed(frame, node_id, {**answer, "responded_by": None})
