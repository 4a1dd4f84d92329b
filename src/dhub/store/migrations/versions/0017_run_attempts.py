"""A run's executions that saved no step (issue 23): ``attempts`` counts the executions that
took the run up since its last saved step, ``attempt_error`` says how the last one failed; a
run at the bound (DHUB_RUN_MAX_ATTEMPTS) fails instead of being taken up again.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "runs", sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.add_column("runs", sa.Column("attempt_error", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "attempt_error")
    op.drop_column("runs", "attempts")
