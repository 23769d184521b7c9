"""A started action's own row: ``tool_calls.seq``, updated until the action has an outcome.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

A transfer's row used to be written only once its REFER's final NOTIFY came, so a call whose
caller dropped after the REFER had no row for it. Now the row is written when the REFER goes
out (outcome ``pending``) and later records with the same ``(call_id, seq)`` update it. Rows
logged before have no ``seq`` (NULL, never equal in the unique index) and stay as they were.
Plain ``ALTER TABLE`` and ``CREATE INDEX`` on SQLite and PostgreSQL alike; written out, not
imported, so this revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tool_calls", sa.Column("seq", sa.Integer(), nullable=True))
    op.create_index("uq_tool_calls_call_id_seq", "tool_calls", ["call_id", "seq"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_tool_calls_call_id_seq", table_name="tool_calls")
    # Plain ALTER TABLE DROP COLUMN (see 0004): batch mode would rebuild the table.
    op.drop_column("tool_calls", "seq")
