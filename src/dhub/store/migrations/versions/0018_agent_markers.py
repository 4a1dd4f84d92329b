"""What a list page of agents reads first (issue 23): each agent's id, version and update time
(its Marker, store/agents.py), from an index that holds them, without reading the
rows and their documents; the rendered agents come from the server's cache.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_agents_markers", "agents", ["id", "version", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_agents_markers", table_name="agents")
