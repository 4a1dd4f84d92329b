"""Structural checks of a workflow graph (DESIGN.md 3.2), run on the raw document.

They work on plain JSON rather than parsed models so that graph problems are reported together
with type errors elsewhere in the same document: a user sees every error at once. Parts that are
malformed (a node without an id, an edge whose source is not a string) are skipped here; the
schema validation reports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dhub.domain.errors import FieldError
from dhub.domain.pointers import join

_CONTAINED_FORBIDDEN = ("start", "end")


@dataclass
class _Graph:
    """What the checks need to know, gathered in one pass over nodes and edges."""

    index: dict[str, int] = field(default_factory=dict)  # node id -> position in nodes
    types: dict[str, str] = field(default_factory=dict)
    container: dict[str, str] = field(default_factory=dict)  # node id -> loop/parallel id
    children: dict[str, list[str]] = field(default_factory=dict)  # container -> node ids
    handlers: dict[str, list[str]] = field(default_factory=dict)  # target -> handler ids
    fallbacks: dict[str, str] = field(default_factory=dict)  # handler -> fallback node
    edges: list[tuple[int, str, str]] = field(default_factory=list)  # (position, src, dst)


def _dicts(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                yield i, item


def _strings(value: Any) -> Iterator[tuple[int, str]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str):
                yield i, item


def check_workflow(doc: dict[str, Any]) -> list[FieldError]:
    """Every graph problem of a workflow document, each located by a JSON pointer."""
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        return []  # the schema and mode checks report missing, mistyped or empty ``nodes``
    errors: list[FieldError] = []
    graph = _Graph()
    _collect_nodes(nodes, graph, errors)
    starts = _check_start_and_end(nodes, graph, errors)
    _collect_containers(nodes, graph, errors)
    _collect_handlers(nodes, graph, errors)
    _check_handler_scopes(nodes, graph, errors)
    _collect_edges(doc.get("edges"), graph, errors)
    if len(starts) == 1:
        _check_cycles(starts[0], graph, errors)
        _check_reachable(starts[0], graph, errors)
    return errors


def _collect_nodes(nodes: list[Any], graph: _Graph, errors: list[FieldError]) -> None:
    for i, node in _dicts(nodes):
        node_id, node_type = node.get("id"), node.get("type")
        if not isinstance(node_id, str):
            continue
        if node_id in graph.index:
            first = graph.index[node_id]
            errors.append(
                FieldError(
                    join("nodes", i, "id"),
                    f"Node id '{node_id}' is already used by /nodes/{first}: "
                    "give every node a unique id.",
                    "duplicate_node_id",
                )
            )
            continue
        graph.index[node_id] = i
        graph.types[node_id] = node_type if isinstance(node_type, str) else ""


def _check_start_and_end(nodes: list[Any], graph: _Graph, errors: list[FieldError]) -> list[str]:
    starts = [n for n, t in graph.types.items() if t == "start"]
    if not starts:
        errors.append(
            FieldError(
                "/nodes",
                "A workflow needs exactly one start node: add a node with type 'start'.",
                "no_start_node",
            )
        )
    for extra in starts[1:]:
        errors.append(
            FieldError(
                join("nodes", graph.index[extra], "type"),
                f"A workflow has exactly one start node, and '{starts[0]}' is already one: "
                f"change the type of '{extra}' or remove it.",
                "multiple_start_nodes",
            )
        )
    if nodes and "end" not in graph.types.values():
        errors.append(
            FieldError(
                "/nodes",
                "A workflow needs at least one end node: add a node with type 'end'.",
                "no_end_node",
            )
        )
    return starts


def _unknown(node_id: str, where: str, code: str = "unknown_node") -> FieldError:
    return FieldError(
        where, f"No node has the id '{node_id}': use the id of a node in /nodes.", code
    )


def _collect_containers(nodes: list[Any], graph: _Graph, errors: list[FieldError]) -> None:
    for i, node in _dicts(nodes):
        node_id, config = node.get("id"), node.get("config")
        if not isinstance(node_id, str) or graph.index.get(node_id) != i:
            continue
        if not isinstance(config, dict):
            continue
        if node.get("type") == "loop":
            members = [
                (m, join("nodes", i, "config", "body_node_ids", k))
                for k, m in _strings(config.get("body_node_ids"))
            ]
        elif node.get("type") == "parallel":
            members = _branch_members(i, config, errors)
        else:
            continue
        graph.children[node_id] = []
        for member, where in members:
            _add_member(node_id, member, where, graph, errors)


def _branch_members(
    i: int, config: dict[str, Any], errors: list[FieldError]
) -> list[tuple[str, str]]:
    members: list[tuple[str, str]] = []
    branch_ids: set[str] = set()
    branches = list(_dicts(config.get("branches")))
    if isinstance(config.get("branches"), list) and not config["branches"]:
        errors.append(
            FieldError(
                join("nodes", i, "config", "branches"),
                "A parallel node needs at least one branch: add one with an id and node_ids.",
                "no_branches",
            )
        )
    for b, branch in branches:
        branch_id = branch.get("id")
        if isinstance(branch_id, str):
            if branch_id in branch_ids:
                errors.append(
                    FieldError(
                        join("nodes", i, "config", "branches", b, "id"),
                        f"Branch id '{branch_id}' is used twice: give each branch its own id.",
                        "duplicate_branch_id",
                    )
                )
            branch_ids.add(branch_id)
        for k, member in _strings(branch.get("node_ids")):
            members.append((member, join("nodes", i, "config", "branches", b, "node_ids", k)))
    return members


def _add_member(
    owner: str, member: str, where: str, graph: _Graph, errors: list[FieldError]
) -> None:
    if member not in graph.index:
        errors.append(_unknown(member, where))
    elif member == owner:
        errors.append(
            FieldError(where, f"Node '{owner}' cannot contain itself.", "self_containment")
        )
    elif member in graph.container:
        errors.append(
            FieldError(
                where,
                f"Node '{member}' already belongs to '{graph.container[member]}': a node can be "
                "in one loop body or parallel branch only.",
                "node_in_two_containers",
            )
        )
    elif graph.types[member] in _CONTAINED_FORBIDDEN:
        errors.append(
            FieldError(
                where,
                f"A {graph.types[member]} node cannot be inside a loop body or parallel branch.",
                "invalid_container_member",
            )
        )
    else:
        graph.container[member] = owner
        graph.children[owner].append(member)


def _collect_handlers(nodes: list[Any], graph: _Graph, errors: list[FieldError]) -> None:
    for i, node in _dicts(nodes):
        node_id, config = node.get("id"), node.get("config")
        if node.get("type") != "error_handler" or not isinstance(config, dict):
            continue
        if not isinstance(node_id, str) or graph.index.get(node_id) != i:
            continue
        _check_handler_target(i, node_id, config, graph, errors)
        _check_handler_fallback(i, node_id, config, graph, errors)


def _check_handler_target(
    i: int, node_id: str, config: dict[str, Any], graph: _Graph, errors: list[FieldError]
) -> None:
    target = config.get("target_node_id")
    if not isinstance(target, str):
        return
    where = join("nodes", i, "config", "target_node_id")
    if target not in graph.index:
        errors.append(_unknown(target, where))
    elif graph.types[target] in ("start", "end", "error_handler"):
        errors.append(
            FieldError(
                where,
                f"An error handler cannot guard a {graph.types[target]} node: "
                "target a node that does work.",
                "invalid_handler_target",
            )
        )
    elif graph.handlers.get(target):
        errors.append(
            FieldError(
                where,
                f"Node '{target}' is already guarded by '{graph.handlers[target][0]}': "
                "use one error handler per node.",
                "duplicate_handler",
            )
        )
    else:
        graph.handlers.setdefault(target, []).append(node_id)


def _check_handler_fallback(
    i: int, node_id: str, config: dict[str, Any], graph: _Graph, errors: list[FieldError]
) -> None:
    fallback = config.get("fallback_node_id")
    where = join("nodes", i, "config", "fallback_node_id")
    if config.get("on_error", "fallback") == "fallback" and fallback is None:
        errors.append(
            FieldError(
                where,
                "on_error 'fallback' needs fallback_node_id: name the node to continue at, "
                "or choose on_error 'continue' or 'fail'.",
                "missing_fallback",
            )
        )
    elif isinstance(fallback, str):
        if fallback not in graph.index:
            errors.append(_unknown(fallback, where))
        elif graph.types[fallback] in ("start", "error_handler") or fallback == node_id:
            errors.append(
                FieldError(
                    where,
                    f"A fallback cannot be a {graph.types[fallback]} node.",
                    "invalid_fallback",
                )
            )
        else:
            graph.fallbacks[node_id] = fallback


def _check_handler_scopes(nodes: list[Any], graph: _Graph, errors: list[FieldError]) -> None:
    """A handler, its target and its fallback live in the same scope (top level, loop body or
    parallel branch): a failure cannot jump into or out of one."""
    for handler, fallback in graph.fallbacks.items():
        target = next((t for t, hs in graph.handlers.items() if handler in hs), None)
        if target is not None and graph.container.get(fallback) != graph.container.get(target):
            errors.append(
                FieldError(
                    join("nodes", graph.index[handler], "config", "fallback_node_id"),
                    f"The fallback '{fallback}' must be in the same loop body or parallel branch "
                    f"as '{target}', the node it stands in for.",
                    "fallback_crosses_container",
                )
            )
    for target, handlers in graph.handlers.items():
        for handler in handlers:
            if graph.container.get(handler) != graph.container.get(target):
                where = graph.container.get(target) or "the top level"
                errors.append(
                    FieldError(
                        join("nodes", graph.index[handler], "config", "target_node_id"),
                        f"An error handler sits where its target is: list '{handler}' in "
                        f"{where!r} too, beside '{target}'.",
                        "handler_crosses_container",
                    )
                )


def _collect_edges(edges: Any, graph: _Graph, errors: list[FieldError]) -> None:
    for e, edge in _dicts(edges):
        src, dst = edge.get("source"), edge.get("target")
        ok = True
        for key, node_id in (("source", src), ("target", dst)):
            if isinstance(node_id, str) and node_id not in graph.index:
                errors.append(_unknown(node_id, join("edges", e, key)))
                ok = False
            elif isinstance(node_id, str) and graph.types[node_id] == "error_handler":
                errors.append(
                    FieldError(
                        join("edges", e, key),
                        "Error handlers sit beside the flow, not on it: remove this edge and "
                        "use target_node_id / fallback_node_id instead.",
                        "edge_on_error_handler",
                    )
                )
                ok = False
        if not (ok and isinstance(src, str) and isinstance(dst, str)):
            continue
        if not _check_edge_rules(e, edge, src, dst, graph, errors):
            continue
        graph.edges.append((e, src, dst))


def _check_edge_rules(
    e: int, edge: dict[str, Any], src: str, dst: str, graph: _Graph, errors: list[FieldError]
) -> bool:
    if graph.types[dst] == "start":
        errors.append(
            FieldError(
                join("edges", e, "target"),
                "No edge may lead into the start node.",
                "edge_into_start",
            )
        )
        return False
    if graph.types[src] == "end":
        errors.append(
            FieldError(
                join("edges", e, "source"), "No edge may leave an end node.", "edge_from_end"
            )
        )
        return False
    src_box, dst_box = graph.container.get(src), graph.container.get(dst)
    if src_box != dst_box:
        inner, key = (dst, "target") if dst_box is not None else (src, "source")
        box = graph.container[inner]
        errors.append(
            FieldError(
                join("edges", e, key),
                f"This edge crosses the boundary of '{box}' ('{inner}' is inside it): "
                f"connect nodes inside '{box}' only to each other, and '{box}' itself to "
                "the rest of the graph.",
                "edge_crosses_container",
            )
        )
        return False
    if graph.types[src] == "if_else" and edge.get("condition") not in ("true", "false"):
        errors.append(
            FieldError(
                join("edges", e, "condition"),
                f"Edges leaving the if_else node '{src}' must have condition 'true' or 'false'.",
                "if_else_edge_unlabelled",
            )
        )
    return True


def _check_cycles(start: str, graph: _Graph, errors: list[FieldError]) -> None:
    """Depth-first from start (then from any node not yet seen), edges in document order;
    the edge that closes a cycle is the one reported. Iterative, so a long chain cannot
    exhaust the interpreter's stack."""
    out: dict[str, list[tuple[int, str]]] = {}
    for e, src, dst in graph.edges:
        out.setdefault(src, []).append((e, dst))
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    roots = [start, *(n for n in graph.index if n != start)]
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack: list[tuple[str, Iterator[tuple[int, str]]]] = [(root, iter(out.get(root, [])))]
        while stack:
            node, it = stack[-1]
            step = next(it, None)
            if step is None:
                state[node] = 2
                stack.pop()
                continue
            e, dst = step
            if state.get(dst) == 1:
                errors.append(
                    FieldError(
                        join("edges", e),
                        f"This edge from '{node}' back to '{dst}' closes a cycle: repeat work "
                        "with a loop node instead.",
                        "cycle",
                    )
                )
            elif dst not in state:
                state[dst] = 1
                stack.append((dst, iter(out.get(dst, []))))


def _check_reachable(start: str, graph: _Graph, errors: list[FieldError]) -> None:
    """Reached: along edges, into the bodies/branches of reached containers, to the handlers
    of reached nodes and on to their fallbacks."""
    out: dict[str, list[str]] = {}
    for _, src, dst in graph.edges:
        out.setdefault(src, []).append(dst)
    seen = {start}
    todo = [start]
    while todo:
        node = todo.pop()
        nxt = [*out.get(node, []), *graph.children.get(node, []), *graph.handlers.get(node, [])]
        if node in graph.fallbacks:
            nxt.append(graph.fallbacks[node])
        for n in nxt:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    for node_id, i in graph.index.items():
        if node_id not in seen:
            errors.append(
                FieldError(
                    join("nodes", i),
                    f"Node '{node_id}' cannot be reached from the start node: connect it with "
                    "an edge (or list it in a loop body, parallel branch or error handler), "
                    "or remove it.",
                    "unreachable_node",
                )
            )
