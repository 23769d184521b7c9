"""Answering-machine detection for outbound calls: is the callee a person or a voicemail box?

The callee's first seconds of audio decide, within ``amd_max_s`` of the answer:

- a **beep** (:mod:`models.tone`: a steady tone of >= 150 ms) is a machine's;
- **words** from the profile's ASR, transcribed while the greeting goes on (its words so far,
  every :data:`WORDS_EVERY_S` of speech and at each pause): general voicemail phrases ("leave
  a message", "after the tone", "not available", "can't take your call", "voicemail") are a
  machine's; weaker ones ("you've reached", "get back to you") only in a long greeting without
  a person's phrase ("speaking", "how can I help");
- the **length** of the greeting: people say "hello?" (or their name, or their business's) and
  wait for an answer, machines talk on for several seconds. A short greeting followed by
  :data:`HUMAN_GAP_S` of silence is a person, so is a longer one whose words, all heard, name
  no machine; a long one that ends with no machine words, or is still going at the bound, is
  *unsure*.

Never hang up on a person: *unsure* is handled as a person (the agent greets them). After a
machine the agent waits for the beep, or for the greeting's end and :data:`GREETING_END_S` of
silence, then leaves the profile's ``voicemail_message``. :class:`Detector` is the decision on
line audio alone (the bench feeds it files); :class:`Screening` runs it on a call's loop (its
ASR as jobs of the process scheduler, its records). Imports no pjsua2 and no database code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent import log
from models.audio import ASR_RATE, line_resampler, pcm16_to_float
from models.priority import Priority
from models.tone import ToneDetector
from models.vad.base import CHUNK, VAD

Result = Literal["human", "machine", "unsure"]

MACHINE_PHRASES = (
    "leave a message", "leave me a message", "leave us a message", "leave your message",
    "leave your name", "leave your number", "leave a brief message", "leave a short message",
    "leave a detailed message", "leave a voicemail", "please leave", "leave it at the",
    "after the tone", "after the beep", "at the tone", "at the beep", "after the signal",
    "speak after", "record your message", "not available", "unavailable",
    "nobody is available", "no one is available", "can't take your call", "take your call",
    "can't take the call", "missed your call", "can't come to the phone",
    "can't get to the phone", "can't answer the phone", "can't answer right now",
    "unable to answer", "unable to take", "not able to take", "voicemail", "voice mail",
    "mailbox", "voice messaging", "messaging system", "has been forwarded",
    "not here right now", "not home right now", "not in right now", "away from the phone",
    "away from my desk", "you know what to do", "the number you have dialed",
    "the number you have dialled", "the person you are calling", "the person you have called",
    "the subscriber you",
)
"""Said by voicemail greetings, hardly by a person answering: one decides a machine."""
LONG_PHRASES = ("you've reached", "you have reached", "get back to you", "as soon as possible",
                "return your call", "call you back", "thank you for calling",
                "thanks for calling", "sorry we missed", "sorry i missed")
"""Said by greetings, but also by people answering for a business ("you've reached the front
desk, Sam speaking"): they decide a machine only in a transcript of :data:`LONG_SPEECH_S` of
speech without a pause for an answer, and none of :data:`HUMAN_PHRASES`."""
HUMAN_PHRASES = ("speaking", "how can i help", "how may i help", "can i help",
                 "what can i do for you", "who's calling", "who is calling", "who is this",
                 "who's this", "can you hear me", "hello hello")
"""Said by a person answering: the weak phrases do not count beside them (the strong ones
still do: a box may say "Sam speaking, leave a message")."""
HUMAN_GAP_S = 0.8
"""Silence after a short greeting that says a person is waiting for an answer (the 800 ms of
Asterisk's AMD ``after_greeting_silence``); machines pause less inside their greeting."""
SHORT_SPEECH_S = 1.6
"""A greeting this short, then the gap, is a person's without waiting for its words."""
HUMAN_MAX_SPEECH_S = 4.0
"""Longest greeting that is still a person's when its words, all heard, name no machine: a
business answering with its name, a department's and the speaker's is a person too."""
LONG_SPEECH_S = 4.5
"""Speech, all transcribed, after which :data:`LONG_PHRASES` decide a machine too: longer than
a person talks before pausing for the caller (and than :data:`HUMAN_MAX_SPEECH_S`)."""
NO_SPEECH_S = 2.0
"""Nothing said this long after the answer: unsure (a person waiting for the caller)."""
MIN_SPEECH_S = 0.15
"""Less speech than this is a click or a breath, not a greeting."""
WORDS_EVERY_S = 0.8
"""While the greeting goes on, its words so far are transcribed after this much more speech
(and at every pause; one pass at a time), so machine words decide before the greeting ends:
they come in its second sentence or later, and the pass takes the ASR's time after them."""
GREETING_END_S = 1.5
"""After a machine with no beep: this much silence ends its greeting; the message starts."""
NEW_WORDS_S = 0.25
"""Less new speech than this since the last transcript is not transcribed again."""
MESSAGE_WAIT_S = 30.0
"""After a machine: the message starts at the latest this long after the decision."""
_TONE_HOLD_S = 0.1  # VAD chunks this close to a tonal frame are the beep, not speech


@dataclass(frozen=True)
class Decision:
    """What the callee is, when that was known and why."""

    result: Result
    at_s: float
    """Seconds of the callee's audio (from the answer) when it was decided."""
    why: str


@dataclass(frozen=True)
class Heard:
    """What the detector knows at one moment: the input of :func:`decide`."""

    at_s: float
    """Seconds of audio since the answer."""
    speech_s: float
    """Speech heard so far (the VAD's, beep excluded)."""
    silence_s: float
    """Since the last speech (or since the answer when there was none)."""
    words: str | None = None
    """The latest transcript of the greeting so far; None: none yet."""
    words_s: float = 0.0
    """The speech (of ``speech_s``) that the transcript covers."""
    tone_hz: float | None = None
    """The frequency of a beep heard; None: none."""
    max_s: float = 10.0
    """The bound: undecided at this point is unsure."""


def normalized(text: str) -> str:
    """``text`` lower case, without punctuation but the apostrophe, "cannot" as "can't".

    Whisper writes "can't", "cannot" and "can not"; the phrases are written one way.
    """
    text = re.sub(r"[^a-z' ]+", " ", text.lower().replace("’", "'"))
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\bcan ?not\b", "can't", text)


def _found(phrases: tuple[str, ...], words: str) -> str | None:
    return next((p for p in phrases if f" {p} " in words), None)


def machine_words(text: str | None, long_greeting: bool = False) -> str | None:
    """The first voicemail phrase in ``text``.

    ``long_greeting``: the weaker ones count too, unless ``text`` has a person's phrase.
    """
    if not text:
        return None
    words = f" {normalized(text)} "
    phrase = _found(MACHINE_PHRASES, words)
    if phrase is None and long_greeting and _found(HUMAN_PHRASES, words) is None:
        phrase = _found(LONG_PHRASES, words)
    return phrase


def decide(h: Heard) -> Decision | None:
    """Human, machine or unsure from what was heard so far; None: not yet.

    Args:
        h: the evidence at ``h.at_s``.

    Returns:
        The decision, or None while it may still be either (before ``h.max_s``).
    """
    if h.tone_hz is not None:
        return Decision("machine", h.at_s, f"beep {h.tone_hz:.0f} Hz")
    phrase = machine_words(h.words, long_greeting=h.words_s >= LONG_SPEECH_S)
    if phrase is not None:
        return Decision("machine", h.at_s, f"words '{phrase}' in {h.speech_s:.1f} s of speech")
    if h.speech_s < MIN_SPEECH_S:
        if h.at_s >= min(NO_SPEECH_S, h.max_s):
            return Decision("unsure", h.at_s, f"no speech in {h.at_s:.1f} s")
        return None
    if h.silence_s >= HUMAN_GAP_S:
        if h.speech_s <= SHORT_SPEECH_S:
            return Decision("human", h.at_s, f"short greeting ({h.speech_s:.1f} s), then "
                                             f"{h.silence_s:.1f} s of silence")
        # Its words all heard (but less than a transcript is asked for) name no machine.
        heard = h.words is not None and h.words_s >= h.speech_s - NEW_WORDS_S - 1e-9
        if heard and h.speech_s <= HUMAN_MAX_SPEECH_S:
            return Decision("human", h.at_s, f"greeting of {h.speech_s:.1f} s without machine "
                                             f"words, then {h.silence_s:.1f} s of silence")
        if heard and h.silence_s >= GREETING_END_S:
            # Longer than a person's, but over without a word or a beep of a machine's: the
            # bound would say the same later (a box whose words were missed hears the greeting).
            return Decision("unsure", h.at_s, f"greeting of {h.speech_s:.1f} s without machine "
                                              f"words ended ({h.silence_s:.1f} s of silence)")
    if h.at_s >= h.max_s:
        return Decision("unsure", h.at_s, f"undecided at {h.max_s:.1f} s ({h.speech_s:.1f} s "
                                          "of speech, no beep or machine words)")
    return None


class Detector:
    """The decision on a callee's line audio, fed frame by frame from the answer on.

    Time is the audio's: seconds of frames fed. Words come from outside: :meth:`wants_words`
    hands out the greeting's audio to transcribe and :meth:`heard_words` takes the text back
    (a bench runs the ASR in line, a call as a job).

    Args:
        vad: the shared VAD model (the detector gets its own stream).
        rate: sample rate of the line's frames.
        max_s: the bound on the decision (the profile's ``amd_max_s``).
    """

    def __init__(self, vad: VAD, rate: int, max_s: float = 10.0):
        self._vad = vad.new_stream()
        self._to16k = line_resampler(rate)
        self._rate = rate
        self.max_s = max_s
        self.tones = ToneDetector(rate)
        self.t = 0.0
        self._pending = np.zeros(0, np.float32)
        self._audio: list[np.ndarray] = []  # 16 kHz, from the answer, while undecided
        self._last_tonal_s = -1.0
        self.speech_s = 0.0
        self.first_speech_s: float | None = None
        self.last_speech_s: float | None = None
        self.words: str | None = None
        self.words_s = 0.0
        self._asked_s: float | None = None  # speech covered by the words in flight
        self.decision: Decision | None = None

    def feed(self, data: bytes | np.ndarray) -> Decision | None:
        """One line frame (int16 PCM); returns the decision once there is one."""
        x = pcm16_to_float(data)
        self.tones.feed(x)
        self.t += len(x) / self._rate
        if self.tones.tonal:
            self._last_tonal_s = self.t
        up = self._to16k.process(x)
        if self.decision is None:
            self._audio.append(up)
        self._pending = np.concatenate([self._pending, up])
        while len(self._pending) >= CHUNK:
            chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            speech = self._vad.probability(chunk) >= 0.5
            if speech and self.t - self._last_tonal_s > _TONE_HOLD_S:
                self.speech_s += CHUNK / ASR_RATE
                self.last_speech_s = self.t
                if self.first_speech_s is None:
                    self.first_speech_s = self.t - CHUNK / ASR_RATE
        if self.decision is None:
            self.decision = decide(self.heard())
            if self.decision is not None:
                self._audio = []
        return self.decision

    def heard(self) -> Heard:
        """The evidence now."""
        tone = self.tones.tone
        silence = self.t - (self.last_speech_s if self.last_speech_s is not None else 0.0)
        return Heard(self.t, self.speech_s, silence, self.words, self.words_s,
                     tone.hz if tone is not None else None, self.max_s)

    def wants_words(self) -> tuple[np.ndarray, float] | None:
        """The greeting so far to transcribe, and the speech it covers; None: not now.

        At a pause, or after :data:`WORDS_EVERY_S` more speech; one transcript at a time.
        """
        if self.decision is not None or self._asked_s is not None or self.speech_s < 0.3:
            return None
        new = self.speech_s - self.words_s
        paused = self.last_speech_s is not None and self.t - self.last_speech_s >= 0.25
        if new < NEW_WORDS_S or not (paused or new >= WORDS_EVERY_S):
            return None
        self._asked_s = self.speech_s
        start = int(max(0.0, (self.first_speech_s or 0.0) - 0.3) * ASR_RATE)
        return np.concatenate(self._audio)[start:], self.speech_s

    def heard_words(self, text: str, covers_s: float) -> None:
        """The transcript of what :meth:`wants_words` handed out (empty: none came)."""
        self._asked_s = None
        if covers_s >= self.words_s:
            self.words, self.words_s = text, covers_s

    def message_cue(self) -> str | None:
        """After a machine: what says its recording has begun; None: not yet, or no machine.

        ``beep`` (once it stopped), ``silence`` after the greeting, or ``bound``.
        """
        if self.decision is None or self.decision.result != "machine":
            return None
        tone = self.tones.tone
        if tone is not None:
            return "beep" if tone.end_s is not None else None
        since = self.t - (self.last_speech_s or 0.0)
        if since >= GREETING_END_S:
            return "silence"
        return "bound" if self.t - self.decision.at_s >= MESSAGE_WAIT_S else None


class Screening:
    """One outbound call's answering-machine detection, on the call's loop.

    Args:
        call_id: the call's id (log lines).
        vad: the profile's VAD model.
        transcribe: the profile's ASR (16 kHz float32 -> an object with ``text``).
        rate: the line's sample rate.
        max_s: the bound on the decision.
        submit: runs model work as the call's jobs (:meth:`agent.call.jobs.CallJobs.submit`).
        event: records a call-log event (kind, detail).
    """

    def __init__(self, call_id: str, vad: VAD, transcribe: Callable, rate: int, max_s: float,
                 submit: Callable[..., Future], event: Callable[[str, str], None]):
        self.call_id = call_id
        self.detector = Detector(vad, rate, max_s)
        self._transcribe = transcribe
        self._submit = submit
        self._event = event
        self._told = False
        self._left = False  # the message's cue was given

    def feed(self, data: bytes) -> Literal["human", "voicemail"] | None:
        """One line frame; ``human`` or ``voicemail`` once, then what to do; None meanwhile.

        ``human``: greet (a person, or unsure); ``voicemail``: leave the message now.
        """
        d = self.detector
        decision = d.feed(data)
        if decision is None:
            if (ask := d.wants_words()) is not None:
                audio, covers = ask
                self._submit(self._transcribe, audio, stage="asr",
                             priority=Priority.FIRST_AUDIO,
                             then=lambda f: self._words(f, covers))
            return None
        if not self._told:
            self._told = True
            log.event("amd", self.call_id, result=decision.result,
                      decision_ms=round(decision.at_s * 1000), why=decision.why)
            self._event("amd", f"{decision.result} at {decision.at_s:.2f} s: {decision.why}")
            if decision.result != "machine":
                return "human"
        cue = d.message_cue()
        if cue is None or self._left:
            return None
        self._left = True
        log.event("voicemail", self.call_id, after=cue, at_ms=round(d.t * 1000))
        self._event("voicemail", f"message after {cue} at {d.t:.2f} s")
        return "voicemail"

    def _words(self, f: Future, covers: float) -> None:
        if f.cancelled() or f.exception() is not None:
            log.event("amd-asr-failed", self.call_id,
                      error="cancelled" if f.cancelled() else repr(f.exception()))
            self.detector.heard_words("", 0.0)
            return
        self.detector.heard_words(f.result().text, covers)
