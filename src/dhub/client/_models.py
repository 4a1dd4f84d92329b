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


# Identity and sharing: plain JSON dicts too, named for what they hold. ``User`` carries
# ``id`` (user.<name>), ``display_name``, ``email``, ``is_admin``; ``me`` adds ``groups`` and
# ``markings``. ``Group`` and ``Marking`` carry ``members`` when fetched one at a time. A
# ``Token`` carries its secret under ``token`` only in the response that created it.
User = dict[str, Any]
Group = dict[str, Any]
Marking = dict[str, Any]
Token = dict[str, Any]
Grant = dict[str, Any]
AuditEntry = dict[str, Any]
ShareScope = Literal["viewer", "runner", "editor"]


@dataclass(frozen=True)
class AuditPage:
    """One page of ``GET /audit``, newest first; pass ``next_cursor`` back for older entries."""

    data: list[AuditEntry]
    next_cursor: str | None
