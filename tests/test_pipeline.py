"""The whole speech loop on the real bundled models, through an 8 kHz μ-law line."""

import numpy as np
import pytest

from agent.simulate import simulate
from bench.scoring import wer
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample
from models.llm.base import Message
from testkit.samples import QUESTION

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def default_call(config, default_stages, question_audio):
    audio, rate = question_audio
    return simulate(audio, rate, config.profiles["default"], default_stages, fast=True)


@pytest.mark.tool
def test_question_is_transcribed_answered_and_spoken(default_call, default_stages):
    assert len(default_call.turns) == 1
    turn = default_call.turns[0]
    assert wer(QUESTION, turn.transcript) <= 0.25, turn.transcript
    assert len(turn.reply_text.split()) >= 3, turn.reply_text
    # The reply audio, as sent down the line at 8 kHz, says the reply text.
    reply = pcm16_to_float(default_call.reply_audio)
    assert len(reply) / PHONE_RATE >= 1.0 and np.abs(reply).max() > 0.05
    # The answer alone, after the silence that follows the greeting: Whisper on both at once
    # sometimes stopped at the gap ("Hello.").
    answer = reply[_after_last_gap(reply):]
    heard = default_stages.asr.transcribe(resample(answer, PHONE_RATE, ASR_RATE)).text
    assert wer(turn.reply_text, heard) <= 0.20, (turn.reply_text, heard)


def _after_last_gap(audio: np.ndarray, gap_s: float = 1.0, frame: int = 160) -> int:
    """Sample index where the audio resumes after its last silence of at least ``gap_s``."""
    loud = np.abs(audio[: len(audio) // frame * frame]).reshape(-1, frame).max(1) > 0.01
    need, quiet, start = int(gap_s * PHONE_RATE / frame), 0, 0
    for i, on in enumerate(loud):
        if on:
            if quiet >= need:
                start = i
            quiet = 0
        else:
            quiet += 1
    return max(0, start * frame - PHONE_RATE // 5)


@pytest.mark.tool
def test_turn_timings_present_and_consistent(default_call):
    t = default_call.turns[0]
    stages = [
        t.endpoint_s,
        t.asr_s,
        t.llm_ttft_s,
        t.first_chunk_s,
        t.tts_first_audio_s,
        t.playout_s,
    ]
    assert all(s is not None and s >= 0 for s in stages), stages
    assert abs(sum(stages) - t.voice_to_voice_s) < 0.005
    # Smart Turn ends a finished question at the 150 ms pause (+ VAD chunk, resampler release
    # and the model); the 500 ms hangover is the fallback, never exceeded by much.
    assert 0.15 <= t.endpoint_s <= 0.7
    assert t.llm_total_s >= t.llm_ttft_s and t.llm_tokens >= 3
    assert 0 < t.asr_rtf < 2 and 0 < t.tts_rtf < 3
    assert t.audio_in_s == pytest.approx(2.6, abs=0.8) and t.audio_out_s >= 1.0
    assert t.asr_backend == "faster-whisper" and t.asr_model == "base"


def test_kv_cache_reused_between_turns(config, default_stages):
    """The system prompt is evaluated once: later turns reuse its KV state."""
    llm = default_stages.llm
    prompt = config.profiles["default"].system_prompt
    system_tokens = llm.count_tokens(prompt)
    history = [Message("system", prompt), Message("user", "Are you open on Saturday?")]
    first = llm.stream(history)
    history.append(Message("assistant", "".join(first)))
    history.append(Message("user", "And on Sunday?"))
    second = llm.stream(history)
    reply = "".join(second)
    assert reply.strip()
    m = second.metrics
    assert m.prompt_tokens > system_tokens
    # Everything up to the new question came from the cache; only the new turn was evaluated.
    assert m.cached_tokens >= system_tokens
    assert m.prompt_tokens - m.cached_tokens < 30


def test_silence_gives_no_turn(config, fast_stages):
    silence = np.zeros(ASR_RATE * 2, np.float32)
    call = simulate(silence, ASR_RATE, config.profiles["fast"], fast_stages, fast=True)
    assert call.turns == []


@pytest.mark.tool
def test_fast_profile_replies(config, fast_stages, question_audio):
    call = simulate(*question_audio, config.profiles["fast"], fast_stages, fast=True)
    assert len(call.turns) == 1 and call.turns[0].reply_text
    assert call.turns[0].voice_to_voice_s is not None
