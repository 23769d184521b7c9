"""One call's stereo recording: the caller on the left channel, the agent on the right.

What it is for: listening to a call afterwards beside its timeline (``callagent report --call``),
with both sides on one time axis, so a slow reply or a barge-in can be heard where the report
says it happened. A profile asks for it with ``recording = "stereo"``; the WAV (PCM16 at the
line's rate) goes to ``<db.media_dir>/<YYYY-MM-DD>/<call_id>.wav`` and its path and length to
the call log.

How audio reaches it: :meth:`StereoRecording.tap` wraps the call's :class:`AudioLink`, whose
two callables run on pjmedia's clock thread every 20 ms. The taps only append the frame, its
side and a clock stamp to one deque (no disk, no lock, nothing that can block the line); the
session's thread calls :meth:`StereoRecording.write_pending` and the disk is written there.

Why pairs are aligned the way they are: both callbacks run once per tick of the same clock, on
the same thread, one after the other, so the deque holds the frames in the exact order they
happened, and a tick's two frames are neighbours in it. Each tick runs its two callbacks in the
same order (pjmedia's bridge asks for the outbound frame, then hands over the inbound one): the
side that comes first is the tick's *leader*. A leader frame opens a tick, the other side's next
frame closes it: that pair is one 20 ms slot of the file. A tick where one side did not run (a
port connected one way first, a line on hold) is then unmistakable: a leader frame followed by
another leader frame, or a frame of the other side with no tick open, is written against
silence in its own slot, and the frames after it stay in theirs. Order alone cannot say which
side leads (``…LRLR…`` reads both ways); the stamps can, by the medians of the gaps: within a
tick the second callback follows the first at once, across ticks a frame later. A median is
untouched by a starved clock thread's odd late callback, which is why the stamps only pick the
leader and never decide a pair: a callback that comes late still lands in its own slot. Until
the leader is known (a few ticks) nothing is written; if the gaps never tell (a clock thread
only catching up), the side of the first frame leads.

A full disk, or any other error writing the file, stops the recording and never reaches the
call: the file is closed as far as it can be (a WAV stays readable up to the fault) and
:attr:`StereoRecording.stopped_reason` says why.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
import soundfile as sf

from agent.sip.audiolink import AudioLink

FRAME_S = 0.020
"""pjmedia's frame: both sides of the line deliver one frame per tick of this length."""
LEFT, RIGHT = 0, 1
"""The caller's side (the link's sink) and the agent's (its source): the WAV's channels."""
LEADER_GAPS = 5
"""Gaps of each kind needed before the medians name the leader."""
LEARN_FRAMES = 50
"""Frames held back at most while the leader is unknown; then the first frame's side leads."""
BATCH_FRAMES = 10
"""Frames gathered (both sides) before a write: fewer, larger writes (``close`` writes the rest)."""
MAX_BACKLOG_S = 60.0
"""Audio that may wait unwritten; more means nobody calls ``write_pending``: stop instead of
growing without bound."""
LOW_SPACE_BYTES = 1 << 20
"""Free space below which a failed write is reported as a full disk."""

_Frame = tuple[int, float, bytes]
"""(side, stamp, PCM)."""
_Pair = tuple[bytes | None, bytes | None]
"""(caller, agent) of one slot; None is silence."""


class StereoRecording:
    """One call's stereo WAV, fed by a tapped :class:`AudioLink`.

    Args:
        media_dir: the recordings' root (``db.media_dir``).
        call_id: the call's id, the file's name.
        rate: the line's sample rate (the port's clock rate).
        clock: the call's clock (the session's ``clock.now``); stamps the frames.
        started_at: the call's start, for the date folder (default: now, UTC).
    """

    def __init__(self, media_dir: str | os.PathLike, call_id: str, rate: int = 8000,
                 clock: Callable[[], float] = time.monotonic,
                 started_at: datetime | None = None):
        day = (started_at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d")
        # Absolute: the call log keeps this path, and purge may run from another directory.
        self.path = os.path.abspath(os.path.join(media_dir, day, f"{call_id}.wav"))
        self.rate = rate
        self.frames_written = 0
        """Samples per channel in the file so far."""
        self.stopped_reason: str | None = None
        """Why the recording stopped before the call ended (None while it runs)."""
        self.leader: int | None = None
        """The side whose callback comes first in a tick (LEFT or RIGHT; None: not known yet)."""
        self._clock = clock
        self._frames: deque[_Frame] = deque()
        self._max_backlog = 2 * max(1, round(MAX_BACKLOG_S / FRAME_S))
        self._open: _Frame | None = None  # a leader frame whose tick's other frame is due
        self._last: _Frame | None = None  # the frame taken before, for the gaps
        self._gaps: tuple[deque[float], deque[float]] = (deque(maxlen=50), deque(maxlen=50))
        """Seconds from a frame of each side to the next frame of the other side."""
        self._file: sf.SoundFile | None = None
        self._reported = False
        self._closed = False
        self._result: tuple[str, float] | None = None

    @property
    def seconds(self) -> float:
        """Length of the audio written so far."""
        return self.frames_written / self.rate

    # ---- the line's clock thread -------------------------------------------------------------

    def tap(self, link: AudioLink) -> AudioLink:
        """A link that keeps a copy of each frame both ways, then does what ``link`` does."""
        sink, source = link.sink, link.source

        def heard(data: bytes) -> None:
            self._keep(LEFT, data)
            sink(data)

        def said() -> bytes:
            data = source()
            self._keep(RIGHT, data)
            return data

        return AudioLink(sink=heard, source=said)

    def _keep(self, side: int, data: bytes) -> None:
        if self.stopped_reason is not None or self._closed:
            return
        if len(self._frames) >= self._max_backlog:
            self.stopped_reason = f"not written for {MAX_BACKLOG_S:.0f} s"
            return
        # bytes(bytes) is the same object; a buffer the caller reuses is copied.
        self._frames.append((side, self._clock(), bytes(data)))

    # ---- the session's thread ----------------------------------------------------------------

    def write_pending(self) -> str | None:
        """Write the frames paired so far (cheap when there are few).

        Returns:
            :meth:`take_stop_reason`: why the recording stopped (a write failed, or it fell
            behind), the one time it has news; the caller logs it. None otherwise.
        """
        if (not self._closed and self.stopped_reason is None
                and len(self._frames) >= BATCH_FRAMES):
            self._write(self._pairs(final=False))
        if self.stopped_reason is not None and not self._closed:
            self._frames.clear()
            self._close_file()
        return self.take_stop_reason()

    def close(self) -> tuple[str, float] | None:
        """Write what is left and close the file; safe to call again.

        Returns:
            The file's path and its length in seconds, or None when no audio was written (no
            file is left behind then). A recording that stopped early still returns what it
            holds.
        """
        if self._closed:
            return self._result
        if self.stopped_reason is None:
            self._write(self._pairs(final=True))
        self._closed = True
        self._frames.clear()
        self._close_file()
        if self.frames_written:
            self._result = (self.path, self.seconds)
        else:
            try:
                os.remove(self.path)
            except OSError:
                pass  # never opened, or not removable: nothing worth keeping either way
        return self._result

    def take_stop_reason(self) -> str | None:
        """Why the recording stopped, once: None before it stops and after the first answer.

        Whoever logs it (the session) logs it once, whether the stop came in
        :meth:`write_pending` or in the last write of :meth:`close`.
        """
        if self.stopped_reason is None or self._reported:
            return None
        self._reported = True
        return self.stopped_reason

    # ---- pairing ------------------------------------------------------------------------------

    def _pairs(self, final: bool) -> list[_Pair]:
        """Take the frames waiting as slots of the file, oldest first."""
        if self.leader is None:
            self.leader = self._guess_leader(list(self._frames), final)
            if self.leader is None:
                return []
        pairs: list[_Pair] = []
        # Only this thread takes frames off; the clock thread may add more behind them.
        for _ in range(len(self._frames)):
            frame = self._frames.popleft()
            self._gap(frame)
            self._place(frame, pairs)
        if final and self._open is not None:
            pairs.append(_alone(self._open))
            self._open = None
        leader = _leader_of(self._gaps)
        if leader is not None and leader != self.leader:
            self.leader = leader
            if self._open is not None and self._open[0] != leader:
                pairs.append(_alone(self._open))
                self._open = None
        return pairs

    def _place(self, frame: _Frame, pairs: list[_Pair]) -> None:
        if frame[0] == self.leader:
            if self._open is not None:  # the last tick's other side never came
                pairs.append(_alone(self._open))
            self._open = frame
        elif self._open is not None:
            pairs.append(_pair(self._open, frame))
            self._open = None
        else:  # a tick whose leader did not run
            pairs.append(_alone(frame))

    def _gap(self, frame: _Frame) -> None:
        last, self._last = self._last, frame
        if last is not None and last[0] != frame[0]:
            self._gaps[last[0]].append(frame[1] - last[1])

    def _guess_leader(self, frames: list[_Frame], final: bool) -> int | None:
        gaps: tuple[list[float], list[float]] = ([], [])
        for a, b in zip(frames, frames[1:], strict=False):
            if a[0] != b[0]:
                gaps[a[0]].append(b[1] - a[1])
        leader = _leader_of(gaps)
        if leader is None and frames and (final or len(frames) >= 2 * LEARN_FRAMES):
            leader = frames[0][0]
        return leader

    # ---- the file -----------------------------------------------------------------------------

    def _write(self, pairs: list[_Pair]) -> None:
        if not pairs:
            return
        chunks = []
        for heard, said in pairs:
            a = np.frombuffer(heard or b"", np.int16, len(heard or b"") // 2)
            b = np.frombuffer(said or b"", np.int16, len(said or b"") // 2)
            # A missing or short side is silence: both channels advance by the longer frame.
            both = np.zeros((max(len(a), len(b)), 2), np.int16)
            both[:len(a), 0] = a
            both[:len(b), 1] = b
            chunks.append(both)
        block = np.concatenate(chunks)
        if not len(block):
            return
        try:
            if self._file is None:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._file = sf.SoundFile(self.path, "w", samplerate=self.rate, channels=2,
                                          subtype="PCM_16", format="WAV")
            self._file.write(block)
            self.frames_written += len(block)
        except (OSError, sf.SoundFileError, AssertionError) as e:
            # soundfile reports libsndfile's failures (ENOSPC included) as SoundFileError, and a
            # short write as an AssertionError; none of them may reach the call.
            self._stop(e)

    def _stop(self, error: BaseException) -> None:
        why = str(error) or type(error).__name__
        try:
            free = shutil.disk_usage(os.path.dirname(self.path)).free
        except OSError:
            free = None
        if free is not None and free < LOW_SPACE_BYTES:
            why = f"disk full ({free} bytes free): {why}"
        self.stopped_reason = f"write failed: {why}"

    def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.close()  # rewrites the WAV header's lengths: the file is readable up to here
        except (OSError, sf.SoundFileError, AssertionError) as e:
            if self.stopped_reason is None:
                self._stop(e)
        try:
            # The file's own count once closed: a failed write may have left part of its block.
            self.frames_written = sf.info(self.path).frames
        except (OSError, sf.SoundFileError, RuntimeError):
            pass  # unreadable: keep the count of the writes that succeeded


def _leader_of(gaps) -> int | None:
    """The side a tick starts with, if the gaps after each side say so clearly.

    After the leader's frame the other side's comes at once; after the other side's, the next
    tick's leader a frame later. Ticks run back to back (a clock catching up) tell nothing.
    """
    if min(len(gaps[LEFT]), len(gaps[RIGHT])) < LEADER_GAPS:
        return None
    left, right = statistics.median(gaps[LEFT]), statistics.median(gaps[RIGHT])
    if max(left, right) < FRAME_S / 4:
        return None
    if left < right / 2:
        return LEFT
    if right < left / 2:
        return RIGHT
    return None


def _alone(frame: _Frame) -> _Pair:
    return (frame[2], None) if frame[0] == LEFT else (None, frame[2])


def _pair(a: _Frame, b: _Frame) -> _Pair:
    return (a[2], b[2]) if a[0] == LEFT else (b[2], a[2])


def recording_for(mode: str, media_dir: str | os.PathLike, call_id: str, rate: int,
                  clock: Callable[[], float] = time.monotonic,
                  started_at: datetime | None = None) -> StereoRecording | None:
    """The recording a profile asks for (``Profile.recording``), or None for ``off``."""
    if mode == "stereo":
        return StereoRecording(media_dir, call_id, rate, clock, started_at)
    return None

