"""procrastinate's schema (its jobs, workers and events tables and functions), on PostgreSQL:
the queue of distributed mode (runtime/queue.py). The schema is the installed procrastinate
version's; pyproject pins that version, and upgrading it comes with a migration applying
procrastinate's own migration files.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return  # SQLite is the embedded mode: runs never leave the server process
    from procrastinate.schema import SchemaManager

    # The driver sees parameters markers in '%': escaped, as procrastinate itself does.
    bind.exec_driver_sql(SchemaManager.get_schema().replace("%", "%%"))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in ("procrastinate_events", "procrastinate_periodic_defers", "procrastinate_jobs",
                  "procrastinate_workers"):  # fmt: skip
        bind.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
    # This schema's routines only: another schema of the same database (another dhub, a test
    # session) keeps its own.
    bind.exec_driver_sql(
        "DO $$ DECLARE f record; BEGIN FOR f IN SELECT oid::regprocedure AS sig FROM pg_proc "
        "WHERE proname LIKE 'procrastinate%%' AND pronamespace = current_schema()::regnamespace "
        "LOOP EXECUTE 'DROP ROUTINE ' || f.sig || ' CASCADE'; END LOOP; END $$"
    )
    for kind in ("procrastinate_job_to_defer_v1", "procrastinate_job_event_type",
                 "procrastinate_job_status"):  # fmt: skip
        bind.exec_driver_sql(f"DROP TYPE IF EXISTS {kind} CASCADE")
