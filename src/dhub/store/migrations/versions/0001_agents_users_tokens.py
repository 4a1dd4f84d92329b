"""Agents with versions, tags and owners; users and their API tokens.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(320)),
        sa.Column("avatar_url", sa.Text),
        sa.Column("avatar_config", sa.JSON),
        sa.Column("is_admin", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "user_id", sa.String(200), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger),
        sa.Column("revoked_at", sa.BigInteger),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("folder_key", sa.String(200), nullable=False),
        sa.Column("folder_id", sa.String(200)),
        sa.Column("collection_id", sa.String(200)),
        sa.Column("alias", sa.Text),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("type", sa.String(200)),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("input_mode", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("is_builtin", sa.Boolean, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("folder_key", "name", name="uq_agents_folder_name"),
    )
    op.create_table(
        "agent_versions",
        sa.Column(
            "agent_id",
            sa.String(64),
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "resource_tags",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("tag", sa.String(200), primary_key=True),
    )
    op.create_index("ix_resource_tags_tag", "resource_tags", ["tag", "resource_id"])
    op.create_table(
        "resource_owners",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("principal_id", sa.String(200), primary_key=True),
    )
    op.create_index(
        "ix_resource_owners_principal", "resource_owners", ["principal_id", "resource_id"]
    )


def downgrade() -> None:
    for index, table in (
        ("ix_resource_owners_principal", "resource_owners"),
        ("ix_resource_tags_tag", "resource_tags"),
    ):
        op.drop_index(index, table_name=table)
    for table in ("resource_owners", "resource_tags", "agent_versions", "agents", "tokens"):
        op.drop_table(table)
    op.drop_table("users")
