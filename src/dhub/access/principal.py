"""Who is calling."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    is_admin: bool = False

    @property
    def principal_ids(self) -> tuple[str, ...]:
        """Every principal this caller acts as: itself and ``public.all`` (groups come with
        the access-model issue)."""
        return (self.user_id, "public.all")
