"""A react agent's transcript on its conversation, so the next chat turn resumes it whole.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("transcript", sa.JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "transcript")
