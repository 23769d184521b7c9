"""Turn durations in seconds: ``turns.<stage>_ms`` -> ``<stage>_s``, values divided by 1000.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

Records and columns use one unit, seconds; only what people read shows ms. Existing rows are
converted in the same transaction (NULL stays NULL). ``batch_alter_table`` rebuilds the table
on SQLite, which cannot alter columns in place, and is plain ``ALTER TABLE`` on PostgreSQL.
The column names are written out here, not imported, so this revision never changes meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_METRICS = (
    "endpoint", "asr", "llm_ttft", "first_chunk", "tts_first_audio", "playout",
    "voice_to_voice", "llm_total", "tts_total",
)


def _rename(old_suffix: str, new_suffix: str) -> None:
    with op.batch_alter_table("turns") as batch:
        for m in _METRICS:
            batch.alter_column(f"{m}{old_suffix}", new_column_name=f"{m}{new_suffix}",
                               existing_type=sa.Double(), existing_nullable=True)


def _turns_s() -> sa.TableClause:
    return sa.table("turns", *(sa.column(f"{m}_s", sa.Double()) for m in _METRICS))


def upgrade() -> None:
    _rename("_ms", "_s")
    turns = _turns_s()
    # Divide (not multiply by 0.001): 300 ms becomes exactly 0.3, as the agent would write it.
    op.execute(turns.update().values({c: c / 1000.0 for c in turns.c}))


def downgrade() -> None:
    turns = _turns_s()
    op.execute(turns.update().values({c: c * 1000.0 for c in turns.c}))
    _rename("_s", "_ms")
