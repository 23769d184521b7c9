"""Run one simulated call from a WAV file through the whole speech loop, as a phone line would.

The file is converted to 8 kHz μ-law first (what a G.711 call carries), then fed in 20 ms
frames through the same resampler, segmenter and :class:`~agent.pipeline.TurnRunner` a real
call uses; only SIP is missing. Frames are paced in real time unless ``fast`` is set.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from agent.pipeline import Stages, TurnResult, TurnRunner, turn_record
from agent.turn import TurnTimeline
from db.records import CallEnded, CallLog, CallStarted, TurnRecord
from dialplan.options import Profile
from models.audio import ASR_RATE, PHONE_RATE, StreamResampler, pcm16_to_float, through_phone_line
from models.vad.segmenter import (
    Segmenter,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    Utterance,
)

FRAME = PHONE_RATE // 50  # 20 ms at 8 kHz
TRAILING_SILENCE_S = 1.5  # a caller who stops talking waits; lets the endpoint fire


@dataclass
class SimulatedCall:
    """Result of a simulation: one record per turn and the agent's audio at 8 kHz."""

    call_id: str
    turns: list[TurnRecord] = field(default_factory=list)
    reply_audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))


def simulate(
    audio: np.ndarray,
    rate: int,
    profile: Profile,
    stages: Stages,
    call_log: CallLog | None = None,
    fast: bool = False,
    law: str = "ulaw",
    source: str = "simulate",
) -> SimulatedCall:
    """Feed caller audio through the pipeline and answer every utterance in it.

    Args:
        audio: mono float32 caller audio at ``rate``.
        rate: its sample rate (any).
        profile: the agent profile (prompt, stage options).
        stages: loaded models for that profile.
        call_log: where call/turn records go (None: nowhere).
        fast: do not pace frames in real time.
        law: G.711 variant the simulated line uses.
        source: recorded in the call log.

    Returns:
        The per-turn records and the agent's reply audio.
    """
    call = SimulatedCall(call_id=f"sim-{uuid.uuid4().hex[:12]}")
    line = through_phone_line(audio, rate, law)
    line = np.concatenate([line, np.zeros(int(TRAILING_SILENCE_S * PHONE_RATE), np.int16)])
    started = datetime.now(UTC)
    if call_log is not None:
        call_log.put(
            CallStarted(
                call_id=call.call_id,
                started_at=started,
                answered_at=started,
                source=source,
                caller_uri=f"file:{source}",
                called_extension="",
                profile=profile.name,
                asr_backend=stages.asr.backend,
                asr_model=stages.asr.model_name,
                llm_model=stages.llm.model_name,
                tts_voice=stages.tts.voice,
                codec="PCMU" if law == "ulaw" else "PCMA",
            )
        )
    runner = TurnRunner(stages, profile, out_rate=PHONE_RATE)
    runner.prime()  # a real call primes while the greeting plays
    segmenter = Segmenter(stages.vad.new_stream(), profile.audio, stages.vad.model_name)
    upsample = StreamResampler(PHONE_RATE, ASR_RATE)
    history: list = []
    replies: list[np.ndarray] = []
    t0 = time.monotonic()
    next_due = t0
    speech_start_at: float | None = None
    pending: _Turn | None = None
    end_reason = "caller-bye"
    try:
        for i in range(0, len(line), FRAME):
            # While a speculative turn runs, the hangover must pass in real time even in fast
            # mode: overlapping it is the whole point of speculation.
            if not fast or pending is not None:
                next_due += FRAME / PHONE_RATE
                time.sleep(max(0.0, next_due - time.monotonic()))
            else:
                next_due = time.monotonic()
            frame16 = upsample.process(pcm16_to_float(line[i : i + FRAME]))
            for ev in segmenter.feed(frame16):
                now = time.monotonic()
                if isinstance(ev, SpeechStarted):
                    speech_start_at = now - (ev.at_s - ev.start_s)
                elif isinstance(ev, SpeechPaused):
                    pending = _Turn(
                        runner, ev, history, speech_start_at, now - (ev.at_s - ev.end_s)
                    )
                elif isinstance(ev, SpeechResumed) and pending is not None:
                    pending.drop()
                    pending = None
                elif isinstance(ev, Utterance):
                    if pending is None or pending.end_s != ev.end_s:
                        if pending is not None:
                            pending.drop()
                        speech_end_at = now - (ev.endpoint_s - ev.end_s)
                        pending = _Turn(
                            runner, ev, history, speech_start_at, speech_end_at, speculative=False
                        )
                    pending.commit(endpoint_at=now)
                    record = turn_record(
                        call.call_id, len(call.turns), pending.timeline, pending.result, call_t0=t0
                    )
                    call.turns.append(record)
                    replies.append(pending.audio())
                    pending = None
                    if call_log is not None:
                        call_log.put(record)
                    next_due = time.monotonic()  # the caller waited for the reply
    except Exception:
        end_reason = "error"
        raise
    finally:
        if call_log is not None:
            call_log.put(
                CallEnded(
                    call_id=call.call_id,
                    ended_at=datetime.now(UTC),
                    end_reason=end_reason,
                    turns=len(call.turns),
                )
            )
    gap = np.zeros(PHONE_RATE // 2, np.int16)
    call.reply_audio = np.concatenate([x for r in replies for x in (r, gap)]) if replies else gap
    return call


class _Turn:
    """One turn on a worker thread; speculative (audio held) until :meth:`commit`."""

    def __init__(
        self,
        runner: TurnRunner,
        speech: SpeechPaused | Utterance,
        history: list,
        speech_start_at: float | None,
        speech_end_at: float,
        speculative: bool = True,
    ):
        self.end_s = speech.end_s
        self.timeline = TurnTimeline(speech_start_at=speech_start_at, speech_end_at=speech_end_at)
        self.cancel = threading.Event()
        self.gate = threading.Event()
        self.result: TurnResult | None = None
        self._out: list[np.ndarray] = []
        self._args = (runner, speech, history)
        self._speculative = speculative
        self._thread = threading.Thread(
            target=self._run, args=self._args, daemon=True, name="sim-turn"
        )
        if speculative:
            self._thread.start()

    def _run(self, runner: TurnRunner, speech, history: list) -> None:
        self.result = runner.run(speech, self.timeline, history, self._emit, self.cancel, self.gate)

    def _emit(self, pcm: np.ndarray) -> None:
        # No line to pace against: the first chunk is "on the wire" when it is emitted.
        if self.timeline.first_frame_out_at is None:
            self.timeline.first_frame_out_at = time.monotonic()
        self._out.append(pcm)

    def commit(self, endpoint_at: float) -> None:
        """The endpoint confirmed the turn: let its audio out and wait for the reply."""
        self.timeline.endpoint_at = endpoint_at
        self.gate.set()
        if self._speculative:
            self._thread.join()
        else:
            self._run(*self._args)

    def drop(self) -> None:
        """The caller resumed: stop the speculative work; it leaves no trace in the call."""
        self.cancel.set()
        self._thread.join()

    def audio(self) -> np.ndarray:
        return np.concatenate(self._out) if self._out else np.zeros(0, np.int16)
