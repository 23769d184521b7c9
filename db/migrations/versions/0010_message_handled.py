"""A caller's message can be marked handled: ``messages.handled_at``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

The web console (:mod:`agent.console`) lists the messages callers left; an operator who has
dealt with one marks it handled, and this is when (None: not yet, as for every message logged
before). Plain ``ALTER TABLE`` on SQLite and PostgreSQL alike; written out, not imported, so this
revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("handled_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE DROP COLUMN (see 0004): batch mode would rebuild the table.
    op.drop_column("messages", "handled_at")
