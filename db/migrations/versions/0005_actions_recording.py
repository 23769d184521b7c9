"""What the agent does on a call: tool calls, callers' messages, recordings, direction.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28

``tool_calls`` holds every action the agent took or tried (a transfer, a hang-up, an HTTP
tool, a keypad mapping) with its outcome and latency; ``messages`` the messages callers left;
``calls`` gains the call's direction (``inbound`` for every call logged before, as they were)
and its stereo recording's path and length. Columns are written out, not imported, so this
revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("calls", sa.Column("direction", sa.String(length=16), nullable=False,
                                     server_default="inbound"))
    op.add_column("calls", sa.Column("recording_path", sa.String(length=1024), nullable=True))
    op.add_column("calls", sa.Column("recording_s", sa.Double(), nullable=True))
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("call_id", sa.String(length=128),
                  sa.ForeignKey("calls.id", ondelete="CASCADE"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("latency_s", sa.Double(), nullable=True),
    )
    op.create_index("ix_tool_calls_call_id", "tool_calls", ["call_id"])
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("call_id", sa.String(length=128),
                  sa.ForeignKey("calls.id", ondelete="CASCADE"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("caller_uri", sa.String(length=255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("audio_path", sa.String(length=1024), nullable=True),
        sa.Column("duration_s", sa.Double(), nullable=True),
    )
    op.create_index("ix_messages_call_id", "messages", ["call_id"])


def downgrade() -> None:
    op.drop_index("ix_messages_call_id", table_name="messages")
    op.drop_table("messages")
    op.drop_index("ix_tool_calls_call_id", table_name="tool_calls")
    op.drop_table("tool_calls")
    # Plain ALTER TABLE DROP COLUMN (see 0004): batch mode would rebuild ``calls`` and cascade.
    op.drop_column("calls", "recording_s")
    op.drop_column("calls", "recording_path")
    op.drop_column("calls", "direction")
