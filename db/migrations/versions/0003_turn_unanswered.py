"""Unanswered turns are data: ``turns.unanswered``, why the caller heard no reply ("" = answered).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

The column is NOT NULL with server default ``''``, so every turn logged before this revision
reads as answered (the agent of that time logged no reason; a turn nobody heard back then is
indistinguishable here). ``batch_alter_table`` keeps this working on SQLite, where the add is a
plain ``ALTER TABLE ADD COLUMN`` and the drop of ``downgrade`` rebuilds the table; on
PostgreSQL both are plain ``ALTER TABLE``. The column is written out, not imported, so this
revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("unanswered", sa.String(length=32), nullable=False,
                                   server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("unanswered")
