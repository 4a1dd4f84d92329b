"""Run artifacts: the documents a run made (rendered templates), kept with the run.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_artifacts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("format", sa.String(16)),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("node_id", sa.String(200)),
        sa.Column("template_id", sa.String(64)),
        sa.Column("template_version", sa.Integer),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
    )
    op.create_index("ix_run_artifacts_run", "run_artifacts", ["run_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_run_artifacts_run", table_name="run_artifacts")
    op.drop_table("run_artifacts")
