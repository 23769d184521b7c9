"""A transcript cannot run away: Whisper's token budget follows the utterance's length.

Greedy tiny.en looped on this voice and question in ``bench wer`` ("I lost my car, I knew I knew
I knew..." to Whisper's 448-token limit, 4.3 s of decoding for 2.6 s of speech), when the
window after the speech held zero features; with silence there (``whisper_batch.padded``) it
no longer loops, and the budget still bounds whatever it decodes.
"""

from __future__ import annotations

import time

import pytest

from agent.turn.doubt import doubtful, looped
from bench.wer.questions import NAMES, QUESTIONS
from dialplan.options import ASROptions
from models.asr.base import Transcript
from models.asr.faster_whisper import max_tokens
from models.asr.whisper_batch import padded
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.metrics import ASRMetrics
from testkit.samples import spoken

LOOPED = ("I lost my card, how do I get a new one?", "en-gb-scotland+Alicia", 190)


@pytest.mark.unit
def test_the_budget_covers_fast_speech_and_no_more():
    assert max_tokens(2.6) == 32  # 11 words of fast speech need ~14 tokens
    assert max_tokens(2.01) == max_tokens(3.0)  # started seconds, as the encoder's window
    assert max_tokens(20.0) == 168 < 448  # Whisper's own limit, reached by loops
    assert max_tokens(60.0) == 200  # leaves room for a prompt in the 448-token window


@pytest.mark.model
@pytest.mark.tool
def test_the_utterance_that_looped_is_heard_within_its_budget(stage_cache):
    text, voice, wpm = LOOPED
    audio, rate = spoken(text, voice=voice, wpm=wpm)
    line = resample(pcm16_to_float(through_phone_line(audio, rate)), PHONE_RATE, ASR_RATE)
    # The full 30 s window, where it looped.
    asr = stage_cache.models.asr(ASROptions(model="tiny.en", window_margin_s=-1))
    t0 = time.monotonic()
    heard = asr.transcribe(line).text
    spent = time.monotonic() - t0
    words = heard.split()
    assert words[:3] == ["I", "lost", "my"], heard
    # ~1 token a word: the budget allows 32 tokens for these 2.6 s, not 448.
    assert len(words) <= 32, heard
    assert spent < 10.0
    assert not looped(heard), heard
    # Whatever the audio, decoding stops at the budget it is given.
    short = asr._decode(asr._model, padded(line, None), asr.options, 6).text
    assert short.split()[:2] == ["I", "lost"] and len(short.split()) <= 6, short


@pytest.mark.unit
def test_only_a_phrase_said_four_times_in_a_row_is_a_loop():
    assert looped("I lost my car, I knew I knew I knew I knew")
    assert looped("My phone number is 077 0 0 0 0 0")
    assert not looped("My number is 0 7 7 0 0, 9 0 0, 4 6 1.")
    assert not looped("No, no, no, that is not what I meant.")


@pytest.mark.unit
def test_two_words_alternating_in_no_order_are_a_loop_but_no_real_question_is():
    # Whisper base on "My phone number is 0 7 7 0 0, 9 0 0, 4 6 1" in a 4-at-once bench call.
    assert looped("My own number is Nielo Pemment Pemment Nielo Nielo Pemment Pemment Nielo "
                  "Pemment Nielo P")
    assert not looped("My number is zero seven seven zero zero nine zero zero four six one")
    assert not looped("Yes, yes, I know, I know, yes I know that.")
    assert not any(looped(q) for q in QUESTIONS + NAMES)
    # Confident nonsense (Whisper is sure of its loop): the turn asks the caller to repeat.
    heard = Transcript("My own number is Nielo Pemment Pemment Nielo Nielo Pemment Pemment Nielo",
                       ASRMetrics("base", 0.0, 0.3, 3.0), avg_logprob=-0.3)
    assert doubtful(heard, min_avg_logprob=-1.0) == "decoding-loop"
