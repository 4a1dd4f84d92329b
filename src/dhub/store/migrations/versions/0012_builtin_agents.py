"""The built-in agents (services/builtins.py): an index to find them, since every caller's
reach (store/sharing.py) includes them.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_agents_builtin", "agents", ["is_builtin", "id"])


def downgrade() -> None:
    op.drop_index("ix_agents_builtin", table_name="agents")
