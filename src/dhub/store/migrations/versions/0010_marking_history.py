"""Every marking a resource ever carried, so its audit entries stay hidden from whoever does
not hold them: after an unmark and after the resource is deleted too.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "marking_history",
        sa.Column("resource_id", sa.String(64), primary_key=True),
        sa.Column("marking_id", sa.String(200), primary_key=True),
    )
    op.execute(
        "INSERT INTO marking_history (resource_id, marking_id) "
        "SELECT resource_id, marking_id FROM resource_markings"
    )


def downgrade() -> None:
    op.drop_table("marking_history")
