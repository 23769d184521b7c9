"""The webhooks' outbox: one row per event and receiver, with its delivery state.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

``webhook_outbox`` holds each call-log event queued for a ``[[webhooks]]`` receiver (the body
as it is POSTed, every try), whether it was delivered or given up, how many tries it took and
the receiver's last status. Columns are written out, not imported, so this revision never
changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_outbox",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=255), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("event_id", "url", name="uq_webhook_outbox_event_id_url"),
    )
    op.create_index("ix_webhook_outbox_due", "webhook_outbox",
                    ["url", "status", "next_attempt_at"])
    op.create_index("ix_webhook_outbox_call_id", "webhook_outbox", ["call_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_outbox_call_id", table_name="webhook_outbox")
    op.drop_index("ix_webhook_outbox_due", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
