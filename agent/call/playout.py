"""Paced outbound audio for one call: reply audio in, one 20 ms frame per clock tick out.

The pace comes from the consumer: pjsua2's bridge clock calls :meth:`Playout.next_frame` every
20 ms on its native thread, so audio leaves at real-time pace however fast TTS produces it.
Between replies the line carries silence frames (never nothing: some gateways drop a call whose
RTP stops). :meth:`Playout.clear` empties the queue at once for barge-in, so the reply stops on
the next tick (<= 20 ms, plus the peer's jitter buffer). :meth:`Playout.pause` stops it as soon
but keeps it, from the start of the sentence being said: :meth:`Playout.resume` says that
sentence again and goes on (a barge-in that had no words; :mod:`agent.call.bargein`).

``next_frame`` runs on the clock thread: it pops precomputed bytes and stores floats, nothing
else (no numpy, no logging). Everything costly (framing, level) happens in :meth:`push`, on the
producer's thread.

Imports nothing from SIP or models.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from db.stats import percentile

FRAME_MS = 20
ECHO_WINDOW_FRAMES = 20  # 400 ms of outbound level kept: echo returns with that much delay


@dataclass(frozen=True)
class PlayoutMetrics:
    """Pacing of reply frames as handed to the line."""

    frames: int
    """Reply frames handed out (silence while idle not counted)."""
    underruns: int
    """Silence frames inserted *inside* a reply because the producer fell behind."""
    gap_p50_s: float | None
    """Median interval between consecutive reply frames (0.02 s when paced perfectly)."""
    gap_p99_s: float | None
    gap_max_s: float | None
    cleared_frames: int
    """Frames dropped by barge-in."""


@dataclass
class _Mark:
    """Start of a reply in the queue; ``on_first_frame`` gets the stamp of its first frame."""

    on_first_frame: Callable[[float], None] | None


@dataclass
class _Clause:
    """Start of one clause of a reply in the queue.

    A sentence ends with a clause ending in ``.``, ``!`` or ``?``.
    """

    text: str


_END = object()  # end of a reply in the queue
_SENTENCE_END = (".", "!", "?")


@dataclass(frozen=True)
class Paused:
    """Where a paused reply will go on from."""

    sentence: str
    """The words of the clauses it says again (the sentence cut, up to where it was cut)."""
    replay_s: float
    """Audio already heard that it says again."""
    queued_s: float
    """Audio it had not reached yet."""


class Playout:
    """A thread-safe queue of 20 ms PCM16 frames, consumed at the line's pace.

    Args:
        rate: sample rate of the frames (the SIP port's clock rate).
        max_gaps: how many frame intervals to keep for the percentiles.
        clock: stamps of frames handed out (the call's clock).
    """

    def __init__(self, rate: int = 8000, max_gaps: int = 5000,
                 clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self._now = clock
        self.frame_samples = rate * FRAME_MS // 1000
        self.frame_bytes = self.frame_samples * 2
        self._silence = bytes(self.frame_bytes)
        self._lock = threading.Lock()
        self._q: deque[tuple[object, float]] = deque()  # (bytes | _Mark | _END, frame RMS)
        self._partial = np.zeros(0, np.int16)  # samples short of a whole frame, per reply
        self._open = False  # a reply has started and not ended (producer side)
        self._playing = False  # a reply is being handed out (consumer side)
        self._recent: deque[float] = deque([0.0] * ECHO_WINDOW_FRAMES, maxlen=ECHO_WINDOW_FRAMES)
        self._last_reply_frame_at: float | None = None
        self._first_frame: Callable[[float], None] | None = None
        self._gaps: deque[float] = deque(maxlen=max_gaps)
        self._frames = 0
        self._underruns = 0
        self._cleared = 0
        self._said: list[tuple[str, list[tuple[bytes, float]]]] = []  # this reply's clauses heard
        self._held: deque[tuple[object, float]] | None = None  # a paused reply's items
        self._replay_n = 0  # ... of which frames heard already, to be said again
        self.last_audio_at: float | None = None
        """Monotonic stamp of the last reply frame handed out."""

    # ---- producer side (worker threads) ------------------------------------------------------

    def start_reply(self, on_first_frame: Callable[[float], None] | None = None) -> None:
        """Open a reply; ``on_first_frame(stamp)`` runs on the clock thread at its first frame."""
        with self._lock:
            if self._open:
                self._end_locked()
            self._open = True
            self._target().append((_Mark(on_first_frame), 0.0))

    def _target(self) -> deque:
        """Where the producer's audio goes: the line's queue, or a paused reply's."""
        return self._q if self._held is None else self._held

    def push(self, pcm: np.ndarray, clause: str | None = None) -> None:
        """Queue int16 mono audio of the open reply (any length; split into whole frames).

        ``clause``: the words this audio begins to say, where it begins one (a paused reply
        goes on from its sentence's first clause); None: it goes on saying the last one.
        """
        pcm = np.asarray(pcm, dtype=np.int16).reshape(-1)
        with self._lock:
            if not self._open:
                return  # cleared by barge-in meanwhile: drop, do not reopen
            pcm = np.concatenate([self._partial, pcm]) if len(self._partial) else pcm
            whole = len(pcm) // self.frame_samples * self.frame_samples
            self._partial = pcm[whole:].copy()
        frames = pcm[:whole].reshape(-1, self.frame_samples)
        levels = np.sqrt(np.mean((frames.astype(np.float32) / 32768.0) ** 2, axis=1))
        data = [f.tobytes() for f in frames]
        with self._lock:
            if not self._open:
                return
            target = self._target()
            if clause is not None:
                target.append((_Clause(clause), 0.0))
            target.extend(zip(data, levels.tolist(), strict=True))

    def interject(self, pcm: np.ndarray) -> bool:
        """Queue a whole short phrase at once, unless a reply is being produced.

        For "one moment" while a reply is late: added in one step under the lock, so a reply
        that starts at the same moment can never be split by it. Returns whether it was queued.
        """
        pcm = np.asarray(pcm, dtype=np.int16).reshape(-1)
        pcm = np.concatenate([pcm, np.zeros((-len(pcm)) % self.frame_samples, np.int16)])
        frames = pcm.reshape(-1, self.frame_samples)
        levels = np.sqrt(np.mean((frames.astype(np.float32) / 32768.0) ** 2, axis=1))
        items = [(_Mark(None), 0.0), *zip((f.tobytes() for f in frames), levels.tolist(),
                                          strict=True), (_END, 0.0)]
        with self._lock:
            if self._open or self._held is not None:
                return False
            self._q.extend(items)
        return True

    def end_reply(self) -> None:
        """Close the open reply: pad its last partial frame with silence."""
        with self._lock:
            if self._open:
                self._end_locked()

    def _end_locked(self) -> None:
        target = self._target()
        if len(self._partial):
            tail = np.zeros(self.frame_samples, np.int16)
            tail[: len(self._partial)] = self._partial
            target.append((tail.tobytes(), float(np.sqrt(np.mean((tail / 32768.0) ** 2)))))
        self._partial = np.zeros(0, np.int16)
        target.append((_END, 0.0))
        self._open = False

    def clear(self) -> int:
        """Drop everything queued (barge-in); the line goes silent on the next tick.

        Returns:
            The number of audio frames dropped.
        """
        with self._lock:
            dropped = sum(1 for item, _ in self._q if isinstance(item, bytes))
            if self._held is not None:  # (its replay was heard: not dropped)
                dropped += sum(1 for item, _ in self._held if isinstance(item, bytes))
                dropped -= self._replay_n
                self._held = None
            self._q.clear()
            self._said = []
            self._partial = np.zeros(0, np.int16)
            self._open = False
            self._playing = False
            self._first_frame = None
            self._last_reply_frame_at = None
            self._cleared += dropped
        return dropped

    def pause(self) -> Paused | None:
        """Stop the reply on the next tick but keep it, from the start of the sentence cut.

        What the producer adds meanwhile is kept behind it. None: no reply is playing (nothing
        to pause), or it is paused already.
        """
        with self._lock:
            if self._held is not None or not self._playing:
                return None
            first = len(self._said) - 1
            while first > 0 and not self._said[first - 1][0].rstrip().endswith(_SENTENCE_END):
                first -= 1
            clauses = self._said[max(first, 0):]
            replay: list[tuple[object, float]] = [(_Mark(self._first_frame), 0.0)]
            self._first_frame = None
            for text, frames in clauses:
                replay += [(_Clause(text), 0.0), *frames]
            heard = sum(len(frames) for _, frames in clauses)
            queued = sum(1 for item, _ in self._q if isinstance(item, bytes))
            self._held = deque(replay)
            self._held.extend(self._q)
            self._replay_n = heard
            self._q.clear()
            self._said = []
            self._playing = False
            self._last_reply_frame_at = None
        sentence = " ".join(text for text, _ in clauses).strip()
        return Paused(sentence, heard * FRAME_MS / 1000, queued * FRAME_MS / 1000)

    def resume(self) -> bool:
        """Go on with the paused reply: its sentence again, then the rest. False: none."""
        with self._lock:
            if self._held is None:
                return False
            self._q.extend(self._held)
            self._held = None
        return True

    @property
    def paused(self) -> bool:
        """A reply is paused (:meth:`pause`), waiting for :meth:`resume` or :meth:`clear`."""
        return self._held is not None

    # ---- consumer side (pjmedia clock thread) ------------------------------------------------

    def next_frame(self) -> bytes:
        """The next 20 ms frame: reply audio if queued, else silence. Never blocks for long."""
        now = self._now()
        with self._lock:
            while self._q:
                item, level = self._q.popleft()
                if isinstance(item, bytes):
                    if self._first_frame is not None:
                        self._first_frame(now)  # sets one stamp; see start_reply
                        self._first_frame = None
                    if self._last_reply_frame_at is not None:
                        self._gaps.append(now - self._last_reply_frame_at)
                    self._last_reply_frame_at = now
                    self._frames += 1
                    self._recent.append(level)
                    self.last_audio_at = now
                    if self._said:
                        self._said[-1][1].append((item, level))
                    return item
                if isinstance(item, _Mark):
                    self._playing = True
                    self._last_reply_frame_at = None
                    self._first_frame = item.on_first_frame
                    self._said = [("", [])]  # audio before its first clause (a phrase's)
                elif isinstance(item, _Clause):
                    if self._said and self._said[-1][0].rstrip().endswith(_SENTENCE_END):
                        self._said = []  # only the sentence being said is kept
                    self._said.append((item.text, []))
                elif item is _END:
                    self._playing = False
                    self._first_frame = None
                    self._last_reply_frame_at = None
                    self._said = []
            if self._playing:
                self._underruns += 1  # the reply continues but its audio is not here yet
            self._recent.append(0.0)
            return self._silence

    # ---- state for the session ---------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A reply is open, queued or still being handed out."""
        with self._lock:
            return self._open or self._playing or bool(self._q) or self._held is not None

    @property
    def level(self) -> float:
        """Outbound RMS (0..1) over the last 400 ms: the echo reference for barge-in."""
        recent = list(self._recent)
        return math.sqrt(sum(x * x for x in recent) / len(recent))

    @property
    def queued_s(self) -> float:
        """Seconds of audio waiting to be played."""
        with self._lock:
            n = sum(1 for item, _ in self._q if isinstance(item, bytes))
        return n * FRAME_MS / 1000

    def metrics(self) -> PlayoutMetrics:
        """Frame-gap percentiles and counters so far."""
        gaps = list(self._gaps)
        return PlayoutMetrics(
            frames=self._frames,
            underruns=self._underruns,
            gap_p50_s=percentile(gaps, 50),
            gap_p99_s=percentile(gaps, 99),
            gap_max_s=max(gaps, default=None),
            cleared_frames=self._cleared,
        )
