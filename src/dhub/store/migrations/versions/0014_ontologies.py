"""Ontologies' objects and links (knowledge/ontology_schema.py holds the schema, which is the
ontology resource's document). Keys compare byte for byte on PostgreSQL (collation "C"), as
they do on SQLite, so pages and ranges agree on both.

Revision ID: 0014
Revises: 0013 (run artifacts, file 0013_run_artifacts.py)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    collation = "C" if op.get_bind().dialect.name == "postgresql" else None
    op.create_table(
        "ontology_objects",
        sa.Column(
            "ontology_id",
            sa.String(64),
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("type", sa.String(64, collation=collation), primary_key=True),
        sa.Column("key", sa.String(200, collation=collation), primary_key=True),
        sa.Column("properties", sa.JSON, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("search_text", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "ontology_links",
        sa.Column(
            "ontology_id",
            sa.String(64),
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("link_type", sa.String(64, collation=collation), primary_key=True),
        sa.Column("from_key", sa.String(200, collation=collation), primary_key=True),
        sa.Column("to_key", sa.String(200, collation=collation), primary_key=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    # Following links backwards: by the "to" end.
    op.create_index(
        "ix_ontology_links_to", "ontology_links", ["ontology_id", "link_type", "to_key", "from_key"]
    )


def downgrade() -> None:
    op.drop_index("ix_ontology_links_to", table_name="ontology_links")
    op.drop_table("ontology_links")
    op.drop_table("ontology_objects")
