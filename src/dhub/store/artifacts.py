"""Run artifacts (tables.run_artifacts): the documents a run made. Repositories flush, never
commit; access is the run's, checked by the caller (services/artifacts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select

from dhub.store.db import Conn
from dhub.store.tables import run_artifacts

INSERT = insert(run_artifacts)  # constant: also one statement of a step's plan (step_batch.py)
_LISTED = [c for c in run_artifacts.c if c.name != "content"]
_LISTED_NAMES = [c.name for c in _LISTED]
_ALL_NAMES = [c.name for c in run_artifacts.c]


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    id: str
    run_id: str
    name: str
    media_type: str
    format: str | None
    size: int
    node_id: str | None
    template_id: str | None
    template_version: int | None
    created_at: int
    created_by: str
    content: bytes | None = None  # only when one artifact is read

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "name": self.name,
            "media_type": self.media_type,
            "format": self.format,
            "size": self.size,
            "node_id": self.node_id,
            "template_id": self.template_id,
            "template_version": self.template_version,
            "created_at": self.created_at,
            "created_by": self.created_by,
        }


def _record(columns: list[str], row: Any) -> ArtifactRecord:
    found = dict(zip(columns, row, strict=True))
    return ArtifactRecord(
        id=found["id"],
        run_id=found["run_id"],
        name=found["name"],
        media_type=found["media_type"],
        format=found["format"],
        size=found["size"],
        node_id=found["node_id"],
        template_id=found["template_id"],
        template_version=found["template_version"],
        created_at=found["created_at"],
        created_by=found["created_by"],
        content=bytes(found["content"]) if "content" in found else None,
    )


def row_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """A complete row for INSERT (optional columns None)."""
    row = {c.name: None for c in run_artifacts.c}
    row.update(values)
    return row


async def insert_artifact(conn: Conn, values: Mapping[str, Any]) -> None:
    await conn.execute(INSERT, row_of(values))


async def list_artifacts(conn: Conn, run_id: str) -> list[ArtifactRecord]:
    statement = (
        select(*_LISTED)
        .where(run_artifacts.c.run_id == run_id)
        .order_by(run_artifacts.c.created_at, run_artifacts.c.id)
    )
    return [_record(_LISTED_NAMES, r) for r in await conn.execute(statement)]


async def get_artifact(conn: Conn, run_id: str, artifact_id: str) -> ArtifactRecord | None:
    statement = select(run_artifacts).where(
        run_artifacts.c.run_id == run_id, run_artifacts.c.id == artifact_id
    )
    row = (await conn.execute(statement)).first()
    return _record(_ALL_NAMES, row) if row is not None else None
