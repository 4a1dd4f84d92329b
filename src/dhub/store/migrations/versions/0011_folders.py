"""Folders and collections (DESIGN.md 2.2): the ``resource_ancestors`` closure table, a home
folder for every user, and every resource that sat at the top level (no folder, no
collection) moved into its creator's home folder, so names no longer collide across users.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import json
import os
import time

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def _ulid(ms: int) -> str:
    # Its own copy: a migration must not change with the application's code.
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def home_document(display_name: str) -> str:
    """A home folder's document, as the application writes it (domain/resources.FolderSpec)."""
    return _dumps(
        {
            "name": "home",
            "alias": f"{display_name}'s home",
            "category": "folder",
            "type": "home",
            "collection_id": None,
            "folder_id": None,
            "tags": None,
            "description": "",
        }
    )


def upgrade() -> None:
    op.create_table(
        "resource_ancestors",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("ancestor_id", sa.String(64), primary_key=True),
        sa.Column("depth", sa.Integer, nullable=False),
    )
    op.create_index(
        "ix_resource_ancestors_ancestor",
        "resource_ancestors",
        ["ancestor_id", "depth", "resource_id"],
    )
    conn = op.get_bind()
    now = int(time.time() * 1000)
    homes: dict[str, str] = {}
    for user_id, display_name in conn.execute(sa.text("SELECT id, display_name FROM users")):
        folder_id = f"folder.{_ulid(now)}"
        homes[user_id] = folder_id
        document = home_document(display_name)
        conn.execute(
            sa.text(
                "INSERT INTO resources (id, category, name, folder_key, folder_id, collection_id,"
                " alias, description, type, version, document, is_builtin, markings, created_by,"
                " created_at, updated_at) VALUES (:id, 'folder', 'home', :key, NULL, NULL,"
                " :alias, '', 'home', 1, :doc, false, '[]', :user, :now, :now)"
            ),
            {
                "id": folder_id,
                "key": f"home:{user_id}",
                "alias": f"{display_name}'s home",
                "doc": document,
                "user": user_id,
                "now": now,
            },
        )
        conn.execute(
            sa.text(
                "INSERT INTO resource_versions (resource_id, version, document, created_by,"
                " created_at) VALUES (:id, 1, :doc, :user, :now)"
            ),
            {"id": folder_id, "doc": document, "user": user_id, "now": now},
        )
        conn.execute(
            sa.text("INSERT INTO resource_owners (resource_id, principal_id) VALUES (:id, :user)"),
            {"id": folder_id, "user": user_id},
        )
    for table in ("agents", "resources"):
        _move_home(conn, table, homes)
    conn.execute(sa.text("UPDATE access_epoch SET epoch = epoch + 1 WHERE id = 1"))


def _move_home(conn: sa.Connection, table: str, homes: dict[str, str]) -> None:
    """Every top-level row of ``table`` into its creator's home folder (a home folder passes
    nothing down, so it is no one's ancestor in resource_ancestors)."""
    where = "folder_key = '' AND collection_id IS NULL"
    if table == "resources":
        where += " AND category NOT IN ('folder', 'collection')"
    rows = conn.execute(sa.text(f"SELECT id, document, created_by FROM {table} WHERE {where}"))
    for resource_id, document, created_by in list(rows):
        home = homes.get(created_by)
        if home is None:
            continue  # its creator is gone: it stays where it is
        doc = json.loads(document)
        doc["folder_id"] = home
        conn.execute(
            sa.text(
                f"UPDATE {table} SET folder_id = :home, folder_key = :home, document = :doc "
                "WHERE id = :id"
            ),
            {"home": home, "doc": _dumps(doc), "id": resource_id},
        )


def downgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("DELETE FROM resource_ancestors"))
    op.drop_index("ix_resource_ancestors_ancestor", "resource_ancestors")
    op.drop_table("resource_ancestors")
