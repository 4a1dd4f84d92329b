"""Coalescing a model's deltas for the event log: nothing lost, nothing reordered."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dhub.runtime.deltas import coalesce


def delta(text: str, kind: str = "text", call: str = "c1", node: str = "ask") -> dict[str, Any]:
    return {"type": "llm.delta", "node_id": node, "call": call, "kind": kind, "text": text}


def joined(found: list[dict[str, Any]], key: tuple[str, str]) -> str:
    return "".join(e["text"] for e in found if (e["call"], e["kind"]) == key)


def test_adjacent_deltas_of_one_call_and_kind_become_one() -> None:
    events = [delta("Disk "), delta("almost "), delta("hmm", "reasoning"), delta("full"),
              {"type": "node.succeeded", "node_id": "ask"}, delta("x", call="c2")]  # fmt: skip
    assert coalesce(events) == [
        delta("Disk almost "), delta("hmm", "reasoning"), delta("full"),
        {"type": "node.succeeded", "node_id": "ask"}, delta("x", call="c2"),
    ]  # fmt: skip


def test_tool_call_fragments_join_per_index() -> None:
    def frag(index: int, arguments: str) -> dict[str, Any]:
        return {"type": "llm.delta", "node_id": "ask", "call": "c1", "kind": "tool_call",
                "index": index, "arguments": arguments}  # fmt: skip

    assert coalesce([frag(0, '{"a"'), frag(0, ": 1}"), frag(1, "{}")]) == [
        frag(0, '{"a": 1}'), frag(1, "{}")
    ]  # fmt: skip


@given(st.lists(st.tuples(st.sampled_from(["c1", "c2"]), st.sampled_from(["text", "reasoning"]),
                          st.text(max_size=5))))  # fmt: skip
def test_each_streams_text_survives_whole_and_in_order(parts: list[tuple[str, str, str]]) -> None:
    events = [delta(text, kind, call) for call, kind, text in parts]
    merged = coalesce(events)
    assert len(merged) <= len(events)
    for key in [("c1", "text"), ("c1", "reasoning"), ("c2", "text"), ("c2", "reasoning")]:
        assert joined(merged, key) == joined(events, key)
    assert all(a != b for a, b in zip(
        [(e["call"], e["kind"]) for e in merged], [(e["call"], e["kind"]) for e in merged[1:]],
        strict=False,
    ))  # fmt: skip
