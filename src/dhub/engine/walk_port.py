"""What the engine's layers see of each other (issue 24): the node kinds (react, containers)
see a walk through ``WalkPort``, and a walk sees the stepper that made it through
``StepperPort``, so imports run one way: stepper -> walk -> node kinds, and nothing back.
``Walk`` (walk.py) and ``Stepper`` (stepper.py) are the implementations; mypy checks that they
fit where they are passed."""

from __future__ import annotations

from typing import Any, Protocol

from dhub.engine.actions import NodeFailure, Scope
from dhub.engine.compile import CompiledGraph
from dhub.engine.expressions import Expressions
from dhub.engine.state import Command, RunState


class StepperPort(Protocol):
    """The graph a walk runs and the stepper's lookup tables of it."""

    @property
    def graph(self) -> CompiledGraph: ...
    @property
    def ex(self) -> Expressions: ...
    @property
    def position(self) -> dict[str, int]: ...
    @property
    def targets(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def out_keys(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def in_keys(self) -> dict[str, tuple[str, ...] | None]: ...
    @property
    def scope_size(self) -> dict[str, int]: ...


class WalkPort(Protocol):
    """One stepper call over a run's state, as a node kind drives it: the state, the commands
    it collects, and what a node may do (succeed, fail, wait, trace)."""

    @property
    def stepper(self) -> StepperPort: ...
    @property
    def graph(self) -> CompiledGraph: ...
    @property
    def state(self) -> RunState: ...
    @property
    def commands(self) -> list[Command]: ...
    @property
    def cancelled(self) -> list[str]: ...

    def push(self, frame: str, node_id: str) -> None: ...

    def succeed(
        self,
        frame: str,
        node_id: str,
        produced: dict[str, Any],
        *,
        branch: bool | None = None,
        publish: bool = True,
        usage: dict[str, Any] | None = None,
    ) -> None: ...

    def on_failure(self, frame: str, node_id: str, failure: NodeFailure) -> None: ...
    def wait_on(self, frame: str, node_id: str, mark: Any) -> str: ...
    def start_timer(self, frame: str, node_id: str, at: float) -> None: ...
    def stop_timer(self, key: str) -> None: ...
    def scope(self, frame: str) -> Scope: ...
    def started_with(self, inputs: dict[str, Any]) -> None: ...
    def trace(self, kind: str, frame: str, node_id: str, **detail: Any) -> None: ...
