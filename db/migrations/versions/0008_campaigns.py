"""Call campaigns: ``campaigns``, ``campaign_rows`` and ``campaign_attempts``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

A campaign (``callagent campaign FILE.csv``) keeps its state here so a restart continues it:
each CSV row's status, outcome and next due time, and each attempt with the call it placed
(``call_id``, written before the INVITE). Columns are written out, not imported, so this
revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("name", sa.String(length=128), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=1024), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("profile", sa.String(length=64), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "campaign_rows",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("campaign", sa.String(length=128),
                  sa.ForeignKey("campaigns.name", ondelete="CASCADE"), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("uri", sa.String(length=255), nullable=False),
        sa.Column("tz", sa.String(length=64), nullable=False),
        sa.Column("variables", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("campaign", "line", name="uq_campaign_rows_line"),
    )
    op.create_index("ix_campaign_rows_due", "campaign_rows",
                    ["campaign", "status", "next_attempt_at"])
    op.create_table(
        "campaign_attempts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("row_id", sa.Integer(),
                  sa.ForeignKey("campaign_rows.id", ondelete="CASCADE"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_index("ix_campaign_attempts_row_id", "campaign_attempts", ["row_id"])
    op.create_index("ix_campaign_attempts_call_id", "campaign_attempts", ["call_id"])


def downgrade() -> None:
    op.drop_index("ix_campaign_attempts_call_id", table_name="campaign_attempts")
    op.drop_index("ix_campaign_attempts_row_id", table_name="campaign_attempts")
    op.drop_table("campaign_attempts")
    op.drop_index("ix_campaign_rows_due", table_name="campaign_rows")
    op.drop_table("campaign_rows")
    op.drop_table("campaigns")
