"""Distributed mode: the runs' inbox (answers, decisions and cancellations on their way to
the worker holding a run) and the workers' heartbeats.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_inbox",
        sa.Column(
            "run_id",
            sa.String(64),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("command_id", sa.String(200), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("queues", sa.JSON, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("live_runs", sa.Integer, nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger, nullable=False),
        sa.Column("stopping", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workers")
    op.drop_table("run_inbox")
