"""Durable runs: the run rows, their step patches, events, commands and task assignees.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _run_fk() -> sa.Column[str]:
    return sa.Column(
        "run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "agent_id",
            sa.String(64),
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("agent_version", sa.Integer, nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("waiting", sa.JSON),
        sa.Column("inputs", sa.JSON, nullable=False),
        sa.Column("outputs", sa.JSON),
        sa.Column("error", sa.JSON),
        sa.Column("usage", sa.JSON, nullable=False),
        sa.Column("conversation_id", sa.String(64)),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("step_count", sa.Integer, nullable=False),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("started_at", sa.BigInteger),
        sa.Column("finished_at", sa.BigInteger),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("lease_owner", sa.String(200)),
        sa.Column("lease_expires_at", sa.BigInteger),
        sa.UniqueConstraint("agent_id", "idempotency_key", name="uq_runs_agent_idempotency"),
    )
    op.create_index("ix_runs_agent", "runs", ["agent_id", "id"])
    op.create_index("ix_runs_user", "runs", ["user_id", "id"])
    op.create_index("ix_runs_status", "runs", ["status", "id"])
    op.create_index("ix_runs_lease", "runs", ["lease_expires_at"])
    op.create_table(
        "run_steps",
        _run_fk(),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("patch", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "run_events",
        _run_fk(),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("node_id", sa.String(200)),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "run_commands",
        _run_fk(),
        sa.Column("command_id", sa.String(200), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("node_id", sa.String(200), nullable=False),
        sa.Column("frame", sa.String(200), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("due_at", sa.Float),
        sa.Column("assignees", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("closed_at", sa.BigInteger),
    )
    op.create_index("ix_run_commands_due", "run_commands", ["status", "kind", "due_at"])
    op.create_table(
        "run_task_assignees",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("command_id", sa.String(200), primary_key=True),
        sa.Column("principal_id", sa.String(200), primary_key=True),
        sa.ForeignKeyConstraint(
            ["run_id", "command_id"],
            ["run_commands.run_id", "run_commands.command_id"],
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_run_task_assignees_principal",
        "run_task_assignees",
        ["principal_id", "run_id", "command_id"],
    )


def downgrade() -> None:
    # Dropping a table drops its indexes on both backends.
    for table in ("run_task_assignees", "run_commands", "run_events", "run_steps", "runs"):
        op.drop_table(table)
