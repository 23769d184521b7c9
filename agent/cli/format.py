"""Format turn records for people (rich table, ms) and machines (JSON lines, seconds)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime

from rich.markup import escape
from rich.table import Table

from db.records import TurnRecord
from db.stages import LABELS, column

SHOWN = ("endpoint", "asr", "llm_ttft", "llm_total", "tts_first_audio", "voice_to_voice")
"""The durations a person looks at first, by :mod:`db.stages` name."""


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _reply(turn: TurnRecord) -> str:
    # A turn the caller heard nothing of says why where its reply would be; text it got as far
    # as generating still shows, so a cut-off reply can be read.
    if not turn.unanswered:
        return turn.reply_text
    return f"(not heard: {escape(turn.unanswered)}) {turn.reply_text}".rstrip()


def turns_table(turns: list[TurnRecord], title: str = "turns") -> Table:
    """Transcript, reply (or why none was heard) and stage ms per turn; RTFs at the end."""
    table = Table(title=title, show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("caller said", max_width=32)
    table.add_column("agent replied", max_width=40)
    for name in SHOWN:
        table.add_column(f"{LABELS[name]} ms", justify="right")
    table.add_column("ASR RTF", justify="right")
    table.add_column("TTS RTF", justify="right")
    for t in turns:
        # "TTS first audio" for people means time from first reply text to audio ready.
        table.add_row(
            str(t.index),
            t.transcript,
            _reply(t),
            *(_ms(getattr(t, column(name))) for name in SHOWN),
            "-" if t.asr_rtf is None else f"{t.asr_rtf:.2f}",
            "-" if t.tts_rtf is None else f"{t.tts_rtf:.2f}",
        )
    return table


def turn_json(turn: TurnRecord) -> str:
    d = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(turn).items()}
    return json.dumps(d)
