"""Triggers (issue 21, services/triggers.py): webhooks and schedules that start an agent's
runs as the user who made them, and their history (each delivery or tick, with its run or why
it was refused).

Revision ID: 0016
Revises: 0015 (secrets, file 0015_secrets.py)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "agent_id",
            sa.String(64),
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("document", sa.Text, nullable=False),  # the TriggerSpec as JSON
        sa.Column("secret", sa.Text),  # a webhook's, sealed (services/secret_vault.py)
        sa.Column("created_by", sa.String(200), nullable=False),  # whom its runs are for
        sa.Column("status", sa.String(20), nullable=False),  # active, stopped
        sa.Column("stopped_reason", sa.Text),
        sa.Column("next_fire_at", sa.BigInteger, index=True),  # a schedule's next tick (ms)
        sa.Column("last_fire_at", sa.BigInteger),  # the last tick handled (ms)
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "trigger_events",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "trigger_id",
            sa.String(64),
            sa.ForeignKey("triggers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("kind", sa.String(20), nullable=False),  # delivery, tick
        sa.Column("key", sa.String(200)),  # the delivery id, or the tick's instant
        sa.Column("status", sa.String(20), nullable=False),  # started, repeated, refused
        sa.Column("reason", sa.Text),
        sa.Column("run_id", sa.String(64)),
        sa.Column("at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_trigger_events_trigger", "trigger_events", ["trigger_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_trigger_events_trigger", "trigger_events")
    op.drop_table("trigger_events")
    op.drop_table("triggers")
