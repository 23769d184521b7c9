"""Turn timeline: stage durations from stamps add up; missing or reversed stamps give None."""

import pytest

from agent.turn.runner import TurnResult, turn_record
from agent.turn.timeline import TurnTimeline
from db.stages import STAGES

pytestmark = pytest.mark.unit


def timeline(**over) -> TurnTimeline:
    stamps = dict(
        speech_start_at=99.0,
        speech_end_at=100.0,
        endpoint_at=100.5,
        asr_done_at=100.8,
        llm_first_token_at=101.1,
        first_chunk_text_at=101.3,
        tts_first_audio_at=101.9,
        first_frame_out_at=101.92,
    )
    stamps.update(over)
    return TurnTimeline(**stamps)


def test_stages_add_up_to_voice_to_voice():
    t = timeline()
    s = t.stages_s()
    assert s["endpoint"] == pytest.approx(0.5) and s["asr"] == pytest.approx(0.3)
    assert s["playout"] == pytest.approx(0.02)
    assert sum(s.values()) == pytest.approx(t.voice_to_voice_s)
    assert t.voice_to_voice_s == pytest.approx(1.92)


def test_missing_or_reversed_stamp_is_none_not_made_up():
    t = timeline(llm_first_token_at=None)
    assert t.stage_s("llm_ttft") is None and t.stage_s("first_chunk") is None
    assert t.stage_s("asr") == pytest.approx(0.3)
    assert t.voice_to_voice_s is None
    t = timeline(asr_done_at=100.4)  # before the endpoint: out of order
    assert t.stage_s("asr") is None and t.voice_to_voice_s is None


def test_turn_record_carries_the_same_numbers():
    t = timeline()
    rec = turn_record("c1", 0, t, TurnResult(transcript="hi", reply_text="hello"), call_t0=90.0)
    parts = [
        rec.endpoint_s,
        rec.asr_s,
        rec.llm_ttft_s,
        rec.first_chunk_s,
        rec.tts_first_audio_s,
        rec.playout_s,
    ]
    assert len(parts) == len(STAGES)
    assert abs(sum(parts) - rec.voice_to_voice_s) < 1e-9
    assert rec.voice_to_voice_s == pytest.approx(1.92)  # seconds, like every duration field
    assert rec.speech_start_s == pytest.approx(9.0) and rec.speech_end_s == pytest.approx(10.0)
