"""Small typed results. Agents themselves stay plain JSON dicts: the server owns their shape,
and a dict round-trips through files and ``apply`` without losing fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dhub.client._exceptions import FieldError

Agent = dict[str, Any]
ApplyAction = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class AgentPage:
    """One page of ``GET /agents``; pass ``next_cursor`` back to get the next one."""

    data: list[Agent]
    next_cursor: str | None


@dataclass(frozen=True)
class ValidationResult:
    valid: bool
    errors: list[FieldError]


@dataclass(frozen=True)
class AgentVersion:
    version: int
    created_at: int
    created_by: str


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply_agent`` did; ``unchanged`` means the stored agent already matched."""

    action: ApplyAction
    agent: Agent
