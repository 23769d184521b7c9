"""Post-call summary and extraction: the summary, the extracted fields and the job's state.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

A profile with ``summary = true`` (or an ``extract`` table) has its calls summarized after the
hang-up by a background job. ``summary_state`` is the job's state (None: none asked, as for
every call logged before; ``pending``, ``done`` or ``failed``), kept in the row so a pending job
survives a restart; ``summary`` is the two-sentence summary, ``extracted`` the fields as JSON
text (one object, field -> string or null), ``summary_detail`` why a job failed, ``summary_at``
when it finished, ``summary_s`` how long the LLM took and ``summary_attempts`` how many tries
it took. Columns are written out, not imported, so this revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("summary_state", sa.String(length=16), nullable=True))
    op.add_column("calls", sa.Column("summary", sa.Text(), nullable=True))
    op.add_column("calls", sa.Column("extracted", sa.Text(), nullable=True))
    op.add_column("calls", sa.Column("summary_detail", sa.Text(), nullable=True))
    op.add_column("calls", sa.Column("summary_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("calls", sa.Column("summary_s", sa.Double(), nullable=True))
    op.add_column("calls", sa.Column("summary_attempts", sa.Integer(), nullable=False,
                                     server_default="0"))
    op.create_index("ix_calls_summary_state", "calls", ["summary_state"])


def downgrade() -> None:
    op.drop_index("ix_calls_summary_state", table_name="calls")
    # Plain ALTER TABLE DROP COLUMN (see 0004): batch mode would rebuild ``calls`` and cascade.
    op.drop_column("calls", "summary_attempts")
    op.drop_column("calls", "summary_s")
    op.drop_column("calls", "summary_at")
    op.drop_column("calls", "summary_detail")
    op.drop_column("calls", "extracted")
    op.drop_column("calls", "summary")
    op.drop_column("calls", "summary_state")
