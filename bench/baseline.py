"""The naive serial pipeline every benchmark compares the agent with, on the same models.

ASR of the whole utterance, then the LLM streamed until its first clause, then TTS of that
clause: nothing overlapped, nothing speculative, nothing shared with another call. Its time
plus the profile's VAD hangover is what a plain script would give a caller; the agent must beat
it, and benchmarks print the ratio measured in the same run (the machines are shared and
noisy, so absolute figures from different runs do not compare).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from agent.turn.runner import Stages
from agent.turn.textsplit import ClauseSplitter, speakable
from dialplan.profile import Profile
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.llm.base import Message


@dataclass(frozen=True)
class SerialTurn:
    """One question answered by the naive serial pipeline (seconds)."""

    transcript: str
    first_clause: str
    asr_s: float
    llm_first_clause_s: float
    tts_s: float
    hangover_s: float

    @property
    def compute_s(self) -> float:
        return self.asr_s + self.llm_first_clause_s + self.tts_s

    @property
    def voice_to_voice_s(self) -> float:
        """End of speech to first audio: the hangover, then everything in series."""
        return self.hangover_s + self.compute_s


def serial_turn(audio: np.ndarray, rate: int, profile: Profile, stages: Stages) -> SerialTurn:
    """Answer one spoken question the naive way (the line's 8 kHz μ-law audio, 16 kHz to ASR).

    Args:
        audio: mono float32 question audio at ``rate`` (no long silences around it).
        rate: its sample rate.
        profile: prompt and options (the same profile the agent is measured with).
        stages: the same loaded models.
    """
    line = pcm16_to_float(through_phone_line(audio, rate))
    speech = resample(line, PHONE_RATE, ASR_RATE)
    t0 = time.monotonic()
    transcript = stages.asr.transcribe(speech).text
    t1 = time.monotonic()
    # The first clause, as the naive pipeline is defined: no opening word on its own, so the
    # ratios stay comparable whatever tts.first_chunk_opener says.
    splitter = ClauseSplitter(first_words=profile.tts.first_chunk_words)
    stream = stages.llm.stream([Message("system", profile.system_prompt),
                                Message("user", transcript)])
    clause = ""
    try:
        for piece in stream:
            chunks = [c for c in splitter.push(piece) if speakable(c)]
            if chunks:
                clause = chunks[0]
                break
        else:
            clause = " ".join(c for c in splitter.flush() if speakable(c))
    finally:
        stream.close()
    t2 = time.monotonic()
    if clause:
        stages.tts.synthesize(speakable(clause))
    t3 = time.monotonic()
    return SerialTurn(transcript=transcript, first_clause=clause, asr_s=t1 - t0,
                      llm_first_clause_s=t2 - t1, tts_s=t3 - t2,
                      hangover_s=profile.audio.endpoint_silence_s)
