"""Prompts, tools, actors and roles: one table for the four kinds, and their versions.

Owners, grants, markings and tags live in the generic resource_* tables, keyed by id.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resources",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("folder_key", sa.String(200), nullable=False),
        sa.Column("folder_id", sa.String(200)),
        sa.Column("collection_id", sa.String(200)),
        sa.Column("alias", sa.Text),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("type", sa.String(200)),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("is_builtin", sa.Boolean, nullable=False),
        sa.Column("markings", sa.Text, nullable=False, server_default="[]"),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint(
            "category", "folder_key", "name", name="uq_resources_category_folder_name"
        ),
    )
    op.create_index("ix_resources_category", "resources", ["category", "id"])
    op.create_table(
        "resource_versions",
        sa.Column(
            "resource_id",
            sa.String(64),
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("resource_versions")
    op.drop_index("ix_resources_category", table_name="resources")
    op.drop_table("resources")
