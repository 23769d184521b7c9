"""The caller's audio on its way in: line frames to turn-taking's events, and barge-in.

Each frame of the line is brought to 16 kHz, fed to the VAD segmenter, and what the segmenter
finds (speech started, paused, resumed, an utterance) goes to
:class:`~agent.call.turntaking.TurnTaking`, stamped on the call's clock. While the agent talks,
the :class:`~agent.call.bargein.BargeInGate` decides whether the caller is interrupting it; a
:class:`~agent.call.bargein.PausedReply` may hold the reply, and the caller's sound's events,
until its words are known. The call session owns one and hands it frames; it keeps what the
call does about them (its state, records, the reply it stops). Runs on the session's thread
only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from agent.call.bargein import BargeInGate, PausedReply
from agent.call.overlap import RESUMED_GRACE_S
from agent.call.playout import Playout
from agent.call.turntaking import TurnTaking
from dialplan.options import AudioOptions
from models.audio import line_resampler, pcm16_to_float, rms
from models.vad.base import VAD
from models.vad.segmenter import (
    Segmenter,
    SpeechPaused,
    SpeechResumed,
    SpeechSoFar,
    SpeechStarted,
    Utterance,
)


class Inbound:
    """One call's inbound audio path; see the module docstring.

    Args:
        options: the profile's VAD, endpointing and barge-in settings.
        vad: the shared VAD model (the call gets its own stream of it).
        rate: sample rate of the line's frames.
        turntaking: where the segmenter's events go.
        playout: the reply being played (its level is the echo the gate allows for).
        on_speech: the caller began to speak (clock stamp of the frame that showed it).
        on_barge_in: the caller is talking over the agent's reply (same stamp).
        paused: pauses the reply at a barge-in until its words are known (None: drop it).
    """

    def __init__(self, options: AudioOptions, vad: VAD, rate: int, turntaking: TurnTaking,
                 playout: Playout, on_speech: Callable[[float], None],
                 on_barge_in: Callable[[float], None], paused: PausedReply | None = None):
        self._segmenter = Segmenter(vad.new_stream(), options, model=vad.model_name)
        self._to16k = line_resampler(rate)
        self._gate = BargeInGate(options)
        self._rate = rate
        self._turntaking = turntaking
        self._playout = playout
        self._on_speech = on_speech
        self._on_barge_in = on_barge_in
        self._paused = paused
        self._line_s = 0.0  # seconds of inbound audio fed to the segmenter

    @property
    def in_speech(self) -> bool:
        """The segmenter is inside an utterance (confirmed speech, not yet ended)."""
        return self._segmenter.in_speech

    @property
    def speaking(self) -> bool:
        """The caller may be speaking now: speech began and has not paused."""
        return self._segmenter.speech_start_s is not None

    def feed(self, at: float, data: bytes, talking: bool, closing: bool) -> None:
        """One line frame that arrived on the call's clock.

        Args:
            at: clock time the frame arrived.
            data: the frame, int16 PCM at the line's rate.
            talking: the agent is speaking a reply or greeting the caller may interrupt.
            closing: the call is ending (goodbye queued): what the caller says is not a turn.
        """
        level = rms(data)
        events = self._segmenter.feed(self._to16k.process(pcm16_to_float(data)))
        if talking and self._playout.busy and not self._playout.paused:
            if self._gate.update(self._segmenter.last_probability, level, self._playout.level):
                self._interrupted(at)
        self._line_s += len(data) / 2 / self._rate
        if self._paused is not None:
            self._paused.tick(self._line_s, self.speaking)
        tt = self._turntaking
        tt.caller_speaking(self.speaking)
        for ev in events:
            if isinstance(ev, SpeechStarted):
                self._on_speech(at)
                self._to_turntaking(partial(self._started, self.stamp(ev.start_s, at)))
            elif isinstance(ev, SpeechPaused):
                self._to_turntaking(partial(tt.speech_paused, ev, self.stamp(ev.end_s, at),
                                            closing), audio=ev.audio)
            elif isinstance(ev, SpeechResumed):
                self._to_turntaking(tt.speech_resumed, resumed=True)
            elif isinstance(ev, SpeechSoFar):
                tt.speech_so_far(ev)
            elif isinstance(ev, Utterance):
                self._to_turntaking(partial(tt.utterance, ev, self.stamp(ev.end_s, at), at,
                                            closing), audio=ev.audio)

    def _started(self, start_at: float) -> None:
        if self._turntaking.speech_started(start_at):
            self.stop_reply()  # it began over the caller's turn

    def _to_turntaking(self, event: Callable[[], None], audio=None, resumed=False) -> None:
        """A segmenter event to turn-taking now, or held while a paused reply waits for words."""
        if self._paused is not None and self._paused.active:
            self._paused.hold(event, audio, resumed)
        else:
            event()

    def stamp(self, audio_s: float, at: float) -> float:
        """Clock stamp of a point of the inbound audio, from the arrival of the newest frame.

        Line time, not segmenter time: the VAD sees the line through the 16 kHz resampler
        (3 ms behind with :class:`~models.audio.LineUpsampler`; soxr, on other line rates,
        releases ~100 ms every 5 frames) and in 32 ms chunks.
        """
        return at - (self._line_s - audio_s)

    def stop_reply(self) -> int:
        """Drop the reply audio still queued; frames dropped."""
        dropped = self._playout.clear()
        self._gate.reset()
        return dropped

    def reset_gate(self) -> None:
        """Speech heard so far no longer counts towards a barge-in (the call changed state)."""
        self._gate.reset()

    def _interrupted(self, at: float) -> None:
        start = self._segmenter.speech_start_s
        # Louder than the reply's echo (the barge-in gate's test), so the grace is safe here:
        # speech that began within it is the caller going on, not an answer to the reply.
        if start is not None and self._turntaking.resumed_over_reply(self.stamp(start, at),
                                                                     RESUMED_GRACE_S):
            self.stop_reply()  # not a barge-in: the reply began over the caller's turn
            return
        self._on_barge_in(at)
