"""Where a call ran: ``calls.worker`` (the cluster worker id) and ``calls.host`` (hostname).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Both nullable: calls logged before this revision have neither, and a ``serve`` outside a
cluster has no worker id. With several agent processes (and machines) writing one call log,
they let a dead worker's open calls be closed as ``lost`` without touching its neighbours',
and ``callagent report --by worker|host`` group the latency report. Adding and dropping are
plain ``ALTER TABLE`` on SQLite and PostgreSQL alike; the columns are written out, not
imported, so this revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("worker", sa.String(length=64), nullable=True))
    op.add_column("calls", sa.Column("host", sa.String(length=255), nullable=True))


def downgrade() -> None:
    # Not batch_alter_table: on SQLite it rebuilds ``calls``, and dropping the old table with
    # foreign keys on (the engine's pragma) cascades into every turn and event. A plain
    # ALTER TABLE DROP COLUMN (SQLite >= 3.35, PostgreSQL) keeps the rows.
    op.drop_column("calls", "host")
    op.drop_column("calls", "worker")
