"""Format turn records for people (rich table) and machines (JSON lines)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime

from rich.table import Table

from db.records import TurnRecord

COLUMNS = (
    ("endpoint", "endpoint_ms"),
    ("ASR", "asr_ms"),
    ("LLM 1st tok", "llm_ttft_ms"),
    ("LLM total", "llm_total_ms"),
    ("TTS 1st audio", "tts_first_audio_ms"),
    ("voice-to-voice", "voice_to_voice_ms"),
)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def turns_table(turns: list[TurnRecord], title: str = "turns") -> Table:
    """Transcript, reply and stage ms per turn; RTFs at the end."""
    table = Table(title=title, show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("caller said", max_width=32)
    table.add_column("agent replied", max_width=40)
    for head, _ in COLUMNS:
        table.add_column(f"{head} ms", justify="right")
    table.add_column("ASR RTF", justify="right")
    table.add_column("TTS RTF", justify="right")
    for t in turns:
        # "TTS first audio" for people means time from first reply text to audio ready.
        table.add_row(
            str(t.index),
            t.transcript,
            t.reply_text,
            *(_ms(getattr(t, f)) for _, f in COLUMNS),
            "-" if t.asr_rtf is None else f"{t.asr_rtf:.2f}",
            "-" if t.tts_rtf is None else f"{t.tts_rtf:.2f}",
        )
    return table


def turn_json(turn: TurnRecord) -> str:
    d = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(turn).items()}
    return json.dumps(d)
