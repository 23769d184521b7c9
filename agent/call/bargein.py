"""Is the caller interrupting the agent, or is that the agent's own echo?

SIP has no echo canceller in this agent, so while the agent speaks, its voice may come back on
the inbound stream (phones, gateways). Caller audio counts towards a barge-in only while the VAD
hears speech *and* the caller's level exceeds ``barge_in_echo_ratio`` times the agent's own
outbound level over the last 400 ms (echo is quieter than what caused it). Such speech must add up
to ``barge_in_min_s`` before the reply is stopped, so a cough or a click does not cut it.

A barge-in may still have no words (a cough that long, "uh-huh", a noise burst): the reply is
paused, not dropped (:class:`PausedReply`), until the ASR has heard the caller's sound. No
words, and the reply goes on from the start of the sentence it cut, said again as people do;
words, and the barge-in stands. Pure logic: no threads, no SIP, no models (the ASR runs as a
job of the call).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from agent import log
from agent.call.playout import Paused, Playout
from agent.turn.doubt import doubtful, looped
from dialplan.options import AudioOptions
from models.asr.base import Transcript
from models.priority import Cancel, Priority


class BargeInGate:
    """Accumulates qualifying caller speech frame by frame while the agent is speaking.

    Levels are compared over windows, not frame by frame: speech dips between syllables (an
    espeak question over G.711 swings widely in level within a word), and a per-frame rule
    fired only long after ``barge_in_min_s`` of real speech (the sipp barge-in test).

    Args:
        options: VAD thresholds, ``barge_in_min_s`` and ``barge_in_echo_ratio``.
        frame_s: duration of one inbound frame.
    """

    LEVEL_WINDOW = 10  # caller level over 200 ms
    SILENCE_RESET_S = 0.24  # this much VAD silence ends a stretch (a pause between words less)

    def __init__(self, options: AudioOptions, frame_s: float = 0.02):
        self.o = options
        self.frame_s = frame_s
        self._speech = 0  # frames of qualifying speech (counts, so no float drift)
        self._silence = 0
        self._power: deque[float] = deque(maxlen=self.LEVEL_WINDOW)

    @property
    def speech_s(self) -> float:
        """Qualifying caller speech in the current stretch."""
        return self._speech * self.frame_s

    def reset(self) -> None:
        self._speech = 0
        self._silence = 0
        self._power.clear()

    def update(self, probability: float, caller_rms: float, agent_rms: float) -> bool:
        """Add one inbound frame; True once it confirms a barge-in.

        Args:
            probability: the VAD's latest speech probability.
            caller_rms: RMS of this inbound frame.
            agent_rms: the agent's outbound RMS over the last 400 ms (0 when silent).
        """
        self._power.append(caller_rms * caller_rms)
        if probability < self.o.vad_release:
            self._silence += 1
            if self._silence * self.frame_s >= self.SILENCE_RESET_S - 1e-9:
                self._speech = 0  # the caller stopped: a new stretch must start over
            return False
        self._silence = 0
        caller_level = math.sqrt(sum(self._power) / len(self._power))
        loud_enough = caller_level > self.o.barge_in_echo_ratio * agent_rms
        if probability >= self.o.vad_threshold and loud_enough:
            self._speech += 1
        else:
            # Speech-like but as quiet as echo: let it wear the count down, not reset it, so
            # echo peaks cannot add up over a long reply but a real voice dipping once can.
            self._speech = max(0, self._speech - 1)
        return self.speech_s >= self.o.barge_in_min_s - 1e-9


SOUND_MAX_S = 1.5
"""A barge-in whose sound goes on this long (line time from the pause) without a pause is
talk, not a cough or an "uh-huh": it stands without waiting for its words."""
WORDS_WAIT_S = 8.0
"""A paused reply whose sound's words are not back this long after the pause is dropped, its
barge-in stands (an ASR stuck or far behind: the reply would come back too late to follow)."""
TALK_WORDS = 3
"""A barge-in heard as this many words is talk, however unsure the ASR is of them: it stands,
and the turn asks the caller to say it again (:func:`agent.turn.doubt.doubtful`), as any
unsure turn does. Resumed, the caller's question went unanswered and unlogged (bench call
--turns 3: a follow-up said over a long reply, heard as six unsure words)."""
_NOISES = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*")  # Whisper's [cough], (coughs), *sighs*


def no_words(tr: Transcript, fillers: tuple[str, ...], min_avg_logprob: float) -> str:
    """Why a barge-in's transcript has no words to stop for ("" when it has some).

    Nothing but noises ("[cough]") or punctuation; a guess the agent would not answer (too
    unsure, a decoding loop: :func:`agent.turn.doubt.doubtful`) shorter than
    :data:`TALK_WORDS`; or only ``fillers``.
    """
    text = _NOISES.sub(" ", tr.text.lower().replace("\u2019", "'"))
    text = re.sub(r"(.)\1{2,}", r"\1\1", re.sub(r"[^a-z' -]+", " ", text))  # "hmmm" -> "hmm"
    if not _bare(text):
        return "no words"
    if (doubt := doubtful(tr, min_avg_logprob)) and (
            len(text.split()) < TALK_WORDS or looped(tr.text)):
        return doubt
    said = sorted({f.lower() for f in fillers}, key=len, reverse=True)
    if said and not _bare(re.sub(r"\b(?:" + "|".join(map(re.escape, said)) + r")\b", " ", text)):
        return "fillers"
    return ""


def _bare(text: str) -> str:
    """``text`` without spaces, hyphens and apostrophes (nothing left: no words)."""
    return re.sub(r"[\s'-]+", "", text)


class PausedReply:
    """A barge-in on hold: the reply paused until the caller's sound is known to have words.

    :meth:`pause` at the barge-in. While it is :attr:`active`, the segmenter's events for the
    caller's sound are held here (:meth:`hold`), not given to turn-taking, and the first pause
    in that sound sends its audio to the ASR. Then :meth:`checked` either resumes the reply
    (no words) or stands the barge-in: ``commit(at)`` (the call stops the reply for good,
    cuts the turn and listens) and the held events are played to turn-taking, which answers
    the caller's words as a turn of its own.

    Args:
        call_id: for log lines.
        options: ``barge_in_resume`` and ``barge_in_fillers``.
        min_avg_logprob: the profile's ASR confidence floor (a guess is no words).
        playout: the reply being paused.
        transcribe: the profile's ASR (16 kHz float32 -> a Transcript).
        submit: runs it as a job of the call (:meth:`agent.call.jobs.CallJobs.submit`).
        commit: the barge-in stands (the clock stamp it was detected at).
        record: a call-log event (kind, detail).
    """

    def __init__(self, call_id: str, options: AudioOptions, min_avg_logprob: float,
                 playout: Playout, transcribe: Callable, submit: Callable[..., Future],
                 commit: Callable[[float], None], record: Callable[[str, str], None]):
        self.call_id = call_id
        self.o = options
        self.min_avg_logprob = min_avg_logprob
        self._playout = playout
        self._transcribe = transcribe
        self._submit = submit
        self._commit = commit
        self._record = record
        self._paused: Paused | None = None
        self._at = 0.0  # the barge-in's clock stamp
        self._since_s = 0.0  # ... and its line time
        self._line_s = 0.0  # the line's time now
        self._held: list[Callable[[], None]] = []  # turn-taking's events, in order
        self._asking = False  # a transcript is in flight
        self._stale = False  # ... of audio the caller has since gone on from
        self._next: object | None = None  # the newest paused sound, to check when it is back
        self._heard_pause = False  # the sound paused (and has not gone on since)
        self._cancel = Cancel()  # the check in flight, once it is no longer wanted

    @property
    def active(self) -> bool:
        """A reply is paused here (not cleared since, by a goodbye or the call's end)."""
        return self._paused is not None and self._playout.paused

    def pause(self, at: float) -> bool:
        """At a barge-in: pause the reply instead of dropping it; False: drop it now."""
        if not self.o.barge_in_resume or self._playout.paused:
            return False
        paused = self._playout.pause()
        if paused is None:
            return False
        self._paused, self._at, self._since_s = paused, at, self._line_s
        self._held, self._asking, self._stale, self._next = [], False, False, None
        self._heard_pause, self._cancel = False, Cancel()
        log.event("barge-in-paused", self.call_id, sentence=paused.sentence[:80],
                  replay_ms=round(paused.replay_s * 1000))
        return True

    def hold(self, event: Callable[[], None], audio=None, resumed: bool = False) -> None:
        """One segmenter event for turn-taking, held.

        ``audio``: the sound so far, at a pause (or its end); ``resumed``: the caller went on
        after a pause.
        """
        self._held.append(event)
        if resumed:
            self._stale = self._asking
            self._heard_pause = False
            return
        if audio is not None:
            self._heard_pause = True
            if self._asking:
                self._next = audio
            else:
                self._ask(audio)

    def tick(self, line_s: float, speaking: bool) -> None:
        """Every inbound frame: ``line_s`` seconds of the line's audio so far.

        ``speaking``: the caller's sound goes on, unpaused. The bounds: talk longer than
        :data:`SOUND_MAX_S`, or no words :data:`WORDS_WAIT_S` after the pause, and the
        barge-in stands.
        """
        self._line_s = line_s
        if not self.active:
            return
        waited = line_s - self._since_s
        if (speaking and not self._heard_pause and waited >= SOUND_MAX_S) or (
                waited >= WORDS_WAIT_S):
            log.event("barge-in-undecided", self.call_id, waited_ms=round(waited * 1000),
                      talking=speaking)
            self._stand()

    def drop(self) -> None:
        """The reply ended otherwise (the call ends, a goodbye): forget the pause."""
        self._paused = None
        self._held = []
        self._cancel.set()  # a check still queued never runs

    def _ask(self, audio) -> None:
        self._asking, self._stale, self._next = True, False, None
        # What the caller hears next waits for this pass (the paused reply's work, meanwhile,
        # is not urgent: agent.turn.urgency).
        self._submit(self._transcribe, audio, stage="asr", priority=(Priority.FIRST_AUDIO,
                                                                     self._at),
                     cancel=self._cancel, then=self.checked)

    def checked(self, f: Future) -> None:
        """The caller's sound transcribed: resume the reply, stand the barge-in, or wait on."""
        self._asking = False
        if not self.active:
            return
        if f.cancelled() or f.exception() is not None:  # (cancelled: only once inactive)
            log.event("barge-in-asr-failed", self.call_id,
                      error="cancelled" if f.cancelled() else repr(f.exception()))
            self._stand()
            return
        tr: Transcript = f.result()
        why = no_words(tr, self.o.barge_in_fillers, self.min_avg_logprob)
        if not why:
            self._stand()
        elif self._next is not None:
            self._ask(self._next)  # the caller went on and paused again: hear all of it
        elif not self._stale:
            self._resume(tr.text, why)

    def _stand(self) -> None:
        held, at = self._held, self._at
        self.drop()
        self._commit(at)
        for event in held:
            event()

    def _resume(self, text: str, why: str) -> None:
        paused = self._paused
        self.drop()
        self._playout.resume()
        detail = (f"after {text.strip()!r} ({why}): from {paused.sentence!r}, "
                  f"{paused.replay_s:.2f} s said again")
        log.event("resumed", self.call_id, heard=text.strip(), why=why,
                  sentence=paused.sentence[:80], replay_ms=round(paused.replay_s * 1000))
        self._record("resumed", detail)
