"""Groups, grants, markings and the audit log.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("markings", sa.Text, nullable=False, server_default="[]"))
    op.create_table(
        "groups",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "group_members",
        sa.Column("group_id", sa.String(200), primary_key=True),
        sa.Column("member_id", sa.String(200), primary_key=True),
    )
    op.create_index("ix_group_members_member", "group_members", ["member_id", "group_id"])
    op.create_table(
        "resource_grants",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("principal_id", sa.String(200), primary_key=True),
        sa.Column("scope", sa.String(16), nullable=False),
    )
    op.create_index(
        "ix_resource_grants_principal", "resource_grants", ["principal_id", "resource_id"]
    )
    op.create_table(
        "markings",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "marking_members",
        sa.Column("marking_id", sa.String(200), primary_key=True),
        sa.Column("principal_id", sa.String(200), primary_key=True),
    )
    op.create_index(
        "ix_marking_members_principal", "marking_members", ["principal_id", "marking_id"]
    )
    op.create_table(
        "resource_markings",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("marking_id", sa.String(200), primary_key=True),
    )
    op.create_index(
        "ix_resource_markings_marking", "resource_markings", ["marking_id", "resource_id"]
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("actor_id", sa.String(200), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_id", sa.String(200), nullable=False),
        sa.Column("before", sa.JSON),
        sa.Column("after", sa.JSON),
    )
    op.create_index("ix_audit_log_target", "audit_log", ["target_id", "id"])
    op.create_index("ix_audit_log_actor", "audit_log", ["actor_id", "id"])


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("resource_markings")
    op.drop_table("marking_members")
    op.drop_table("markings")
    op.drop_table("resource_grants")
    op.drop_table("group_members")
    op.drop_table("groups")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("markings")
