"""Who is calling."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    is_admin: bool = False
    # Every principal this caller acts as: itself and ``public.all`` (groups come with the
    # access-model issue). Derived once: list pages test it against every agent's owners.
    principal_ids: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "principal_ids", frozenset((self.user_id, "public.all")))
