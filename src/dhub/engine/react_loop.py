"""One react loop being stepped (react.py): the top loop of an agent node or a delegate's,
seen through its JSON in the run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dhub.engine.react_config import AgentNode, ReactConfig
from dhub.engine.walk_port import WalkPort


@dataclass
class Loop:
    """One loop being stepped: the top one (``path`` "") or a delegate's. ``data`` is its
    JSON in the run state."""

    walk: WalkPort
    frame: str
    node: AgentNode
    top: dict[str, Any]
    path: str
    data: dict[str, Any]
    config: ReactConfig

    def issue(self, mark: str = "running") -> str:
        """A new command id for this loop, routed back to it."""
        command_id = self.walk.wait_on(self.frame, self.node.id, mark)
        self.top["routes"][command_id] = self.path
        return command_id

    def trace(self, kind: str, **detail: Any) -> None:
        if self.path:
            detail["delegate"] = self.path
        self.walk.trace(kind, self.frame, self.node.id, **detail)

    def parent(self) -> Loop:
        path, _, _ = self.path.rpartition("/")
        return loop_at(self.walk, self.frame, self.node, self.top, path)


def new_loop(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "iteration": 0, "calls": [], "asking": None,
            "repaired": False, "usage": {}, "subs": {}, **extra}  # fmt: skip


def loop_at(walk: WalkPort, frame: str, node: AgentNode, top: dict[str, Any], path: str) -> Loop:
    data, config = top, node.config
    for call_id in path.split("/") if path else ():
        data = data["subs"][call_id]
        config = config.role(data["role"])
    return Loop(walk, frame, node, top, path, data, config)
