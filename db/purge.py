"""Forgetting what callers said once it is old: ``callagent db purge --older-than DAYS``.

For the calls started before the cutoff this deletes the call's stereo recording and the audio
of the messages callers left, and blanks what was said (``turns.transcript``,
``turns.reply_text``, ``messages.text``), and deletes their webhook deliveries that are over
(``webhook_outbox`` bodies hold the same words; a pending one is still owed to its receiver).
Everything else stays: the calls, their turns' timings, events and tool calls, so the latency
reports over old calls still work; only the words and the audio go.

Files go first, then the rows, in one transaction per batch of calls: a failure between the two
leaves a row naming a file that is gone (counted as missing next time, harmless), never a file
that no row names any more (which no later purge could find). A file that cannot be deleted
keeps its path in the log, so the next purge tries it again. Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, exists, func, or_, select, update
from sqlalchemy.orm import Session

from db.schema import Call, CallerMessage, Turn, WebhookDelivery

BATCH = 500
"""Calls per transaction: bounded ``IN`` lists and short write locks on a large log."""
_DAY_DIR = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class PurgeResult:
    """What a purge did (or, dry, would do)."""

    cutoff: datetime
    """Calls started before this were purged."""
    dry_run: bool = False
    calls: int = 0
    """Calls that had something to purge (a call purged before is not counted again)."""
    turns: int = 0
    """Turns whose transcript or reply was blanked."""
    messages: int = 0
    """Caller messages whose text or audio was removed."""
    deliveries: int = 0
    """Webhook deliveries deleted (delivered or failed)."""
    files: int = 0
    """Files deleted."""
    bytes: int = 0
    """Their size."""
    missing: int = 0
    """Files the log named that were gone already."""
    failed: list[str] = field(default_factory=list)
    """``path: error`` of the files that could not be deleted (still named in the log)."""


def purge(engine: Engine, older_than: timedelta, now: datetime | None = None,
          dry_run: bool = False) -> PurgeResult:
    """Delete the recordings and message audio and blank the words of the calls before a cutoff.

    Args:
        engine: Call-log engine.
        older_than: Calls started longer ago than this are purged.
        now: Where ``older_than`` counts back from (default: the current time).
        dry_run: Count what would go; delete and change nothing.

    Returns:
        The counts.

    Raises:
        ValueError: ``older_than`` is negative.
    """
    if older_than < timedelta(0):
        raise ValueError("older_than must not be negative")
    result = PurgeResult(cutoff=(now or datetime.now(UTC)) - older_than, dry_run=dry_run)
    said = or_(Turn.transcript != "", Turn.reply_text != "")
    left = or_(CallerMessage.text != "", CallerMessage.audio_path.is_not(None))
    q = (select(Call.id).where(
        Call.started_at < result.cutoff,
        or_(Call.recording_path.is_not(None),
            exists().where(Turn.call_id == Call.id, said),
            exists().where(CallerMessage.call_id == Call.id, left)))
         .order_by(Call.started_at, Call.id))
    with Session(engine) as s:
        ids = list(s.scalars(q))
    for i in range(0, len(ids), BATCH):
        _purge_batch(engine, ids[i:i + BATCH], result)
    return result


def _purge_batch(engine: Engine, ids: list[str], result: PurgeResult) -> None:
    with Session(engine) as s, s.begin():
        recordings = s.execute(select(Call.id, Call.recording_path).where(
            Call.id.in_(ids), Call.recording_path.is_not(None))).all()
        messages = s.execute(select(CallerMessage.id, CallerMessage.audio_path).where(
            CallerMessage.call_id.in_(ids),
            or_(CallerMessage.text != "", CallerMessage.audio_path.is_not(None)))).all()
        kept_calls = [cid for cid, path in recordings if not _delete(path, result)]
        kept_audio = [mid for mid, path in messages if path and not _delete(path, result)]
        said = or_(Turn.transcript != "", Turn.reply_text != "")
        over = (WebhookDelivery.call_id.in_(ids), WebhookDelivery.status != "pending")
        result.calls += len(ids)
        result.messages += len(messages)
        if result.dry_run:
            result.turns += s.execute(select(func.count()).select_from(Turn).where(
                Turn.call_id.in_(ids), said)).scalar_one()
            result.deliveries += s.execute(select(func.count()).select_from(WebhookDelivery)
                                           .where(*over)).scalar_one()
            return
        result.deliveries += s.execute(delete(WebhookDelivery).where(*over)).rowcount
        result.turns += s.execute(update(Turn).where(Turn.call_id.in_(ids), said)
                                  .values(transcript="", reply_text="")).rowcount
        s.execute(update(Call).where(Call.id.in_(ids), Call.id.not_in(kept_calls))
                  .values(recording_path=None, recording_s=None))
        s.execute(update(CallerMessage).where(CallerMessage.id.in_([m for m, _ in messages]))
                  .values(text=""))
        s.execute(update(CallerMessage).where(CallerMessage.id.in_([m for m, _ in messages]),
                                              CallerMessage.id.not_in(kept_audio))
                  .values(audio_path=None))


def _delete(path: str, result: PurgeResult) -> bool:
    """Delete one file (dry: only measure it); False if it is still there afterwards."""
    try:
        size = os.stat(path).st_size
        if not result.dry_run:
            os.remove(path)
    except FileNotFoundError:
        result.missing += 1
        return True
    except OSError as e:
        result.failed.append(f"{path}: {e.strerror or e}")
        return False
    result.files += 1
    result.bytes += size
    if not result.dry_run:
        _remove_empty_day(os.path.dirname(path))
    return True


def _remove_empty_day(folder: str) -> None:
    # The recorder files recordings by day (``<media_dir>/<YYYY-MM-DD>/``); an emptied day goes
    # too. Only such a folder: media_dir itself, or a folder of the user's, is never removed.
    if _DAY_DIR.fullmatch(os.path.basename(folder)):
        try:
            os.rmdir(folder)
        except OSError:
            pass  # not empty yet (or not ours to remove)
