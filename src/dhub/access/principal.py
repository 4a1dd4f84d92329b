"""Who is calling, with everything access decisions need, resolved once per token check."""

from __future__ import annotations

from dataclasses import dataclass, field

from dhub.domain.ids import PUBLIC

__all__ = ["PUBLIC", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    is_admin: bool = False
    groups: frozenset[str] = frozenset()  # every group the user is in, through nesting too
    markings: frozenset[str] = frozenset()  # markings held directly or through a group
    # Every principal this caller acts as: itself, its groups and ``public.all``. Derived
    # once: list pages test it against every agent's owners.
    principal_ids: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "principal_ids", frozenset((self.user_id, PUBLIC, *self.groups)))
