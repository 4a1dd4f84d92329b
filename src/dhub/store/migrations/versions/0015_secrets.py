"""Secrets' values (services/secrets.py): encrypted, outside the secret's document and its
versions, one row per secret, deleted with it.

Revision ID: 0015
Revises: 0014 (ontologies, file 0014_ontologies.py)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secret_values",
        sa.Column(
            "secret_id",
            sa.String(64),
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("ciphertext", sa.Text, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("secret_values")
