"""The access epoch: one counter bumped by every owner or grant change.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "access_epoch",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("epoch", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "epoch": 0}])


def downgrade() -> None:
    op.drop_table("access_epoch")
