"""The stereo call recording: frames through a tapped link land sample-exactly in their channel.

The line is played by the test: each tick calls the tapped link's sink (the caller's frame) and
source (the agent's frame) as pjmedia's clock thread would, with the call's clock set to the
tick's time. Faults are a write that raises ENOSPC, and a real one: a file-size limit on the
process, which makes libsndfile's own write fail as a full disk does.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import threading
from contextlib import contextmanager
from datetime import UTC, datetime

import numpy as np
import pytest
import soundfile as sf

from agent.call import recording
from agent.call.recording import FRAME_S, StereoRecording, recording_for
from agent.sip.audiolink import AudioLink

pytestmark = pytest.mark.unit
RATE = 8000
N = int(RATE * FRAME_S)  # samples per frame


class Line:
    """The far side of the link and the call's clock, ticked by the test."""

    def __init__(self, rec: StereoRecording | None = None, seed: int = 1):
        self.now = 0.0
        self.heard: list[bytes] = []  # what the session's sink got
        self.rng = np.random.default_rng(seed)
        self.agent: list[bytes] = []  # what the session's source said, in order
        self.link = AudioLink(sink=self.heard.append, source=self._say)
        self.tapped = rec.tap(self.link) if rec is not None else None

    def clock(self) -> float:
        return self.now

    def _say(self) -> bytes:
        frame = self.rng.integers(-30000, 30000, N, dtype=np.int16).tobytes()
        self.agent.append(frame)
        return frame

    def caller_frame(self) -> bytes:
        return self.rng.integers(-30000, 30000, N, dtype=np.int16).tobytes()

    def tick(self, k: int, sink: bool = True, source: bool = True, source_first: bool = False,
             at: float | None = None, late: float = 0.0) -> tuple[bytes | None, bytes | None]:
        """Tick ``k`` (at ``k`` frames, or ``at``): the caller's frame in, the agent's out.

        Either may be missing (``sink``/``source`` False); the second callback may run ``late``
        seconds after the first (a starved clock thread).
        """
        self.now = k * FRAME_S if at is None else at
        heard = self.caller_frame() if sink else None
        said = None
        if source and source_first:
            said = self.tapped.source()
            self.now += late
        if heard is not None:
            self.tapped.sink(heard)
            self.now += late
        if source and not source_first:
            said = self.tapped.source()
        return heard, said


def expected(ticks: list[tuple[bytes | None, bytes | None]]) -> np.ndarray:
    """The stereo samples those ticks should give: a missing frame is silence in its slot."""
    out = np.zeros((len(ticks) * N, 2), np.int16)
    for k, (heard, said) in enumerate(ticks):
        for ch, frame in ((0, heard), (1, said)):
            if frame is not None:
                out[k * N:(k + 1) * N, ch] = np.frombuffer(frame, np.int16)
    return out


def read(path: str) -> np.ndarray:
    data, rate = sf.read(path, dtype="int16", always_2d=True)
    assert rate == RATE and data.shape[1] == 2
    return data


def new(tmp_path, **kw) -> tuple[StereoRecording, Line]:
    clock_line: list[Line] = []
    rec = StereoRecording(tmp_path / "media", "c0ffee", RATE, clock=lambda: clock_line[0].now,
                          started_at=datetime(2026, 3, 4, 23, 59, tzinfo=UTC), **kw)
    line = Line(rec)
    clock_line.append(line)
    return rec, line


@pytest.mark.parametrize("source_first", [False, True], ids=["sink-first", "source-first"])
def test_each_side_lands_in_its_channel_sample_exact(tmp_path, source_first):
    rec, line = new(tmp_path)
    ticks = []
    for k in range(50):
        heard, said = line.tick(k, source_first=source_first)
        ticks.append((heard, said))
        assert rec.write_pending() is None
    # The taps pass everything through unchanged.
    assert line.heard == [h for h, _ in ticks] and line.agent == [s for _, s in ticks]
    path, seconds = rec.close()
    assert path == str(tmp_path / "media" / "2026-03-04" / "c0ffee.wav")
    assert seconds == pytest.approx(50 * FRAME_S)
    np.testing.assert_array_equal(read(path), expected(ticks))
    assert rec.stopped_reason is None
    assert rec.close() == (path, seconds)  # again: the same answer, nothing more written


def test_missing_frames_are_silence_in_their_slot(tmp_path):
    rec, line = new(tmp_path)
    ticks = []
    no_caller = {5, 30, 31}  # a tick where only the agent's side ran, then two in a row
    no_agent = {12, 13, 14, 40}
    for k in range(60):
        ticks.append(line.tick(k, sink=k not in no_caller, source=k not in no_agent))
        rec.write_pending()
    path, seconds = rec.close()
    assert seconds == pytest.approx(60 * FRAME_S)
    # Every frame after a gap is still in its own tick's slot: no lasting shift.
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_the_first_tick_without_its_leader(tmp_path):
    # pjmedia's order: the agent's frame first. The first tick has only the caller's.
    rec, line = new(tmp_path)
    ticks = [line.tick(0, source=False, source_first=True)]
    ticks += [line.tick(k, source_first=True) for k in range(1, 40)]
    rec.write_pending()
    assert rec.leader == recording.RIGHT
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_late_callbacks_stay_in_their_slot(tmp_path):
    # A starved clock thread: the tick's second callback now and then runs most of a frame
    # late. Stamps only pick the leader; every frame still lands in its own slot.
    rec, line = new(tmp_path)
    ticks = []
    for k in range(80):
        ticks.append(line.tick(k, late=0.018 if k % 3 == 0 else 0.0, sink=k != 50))
        rec.write_pending()
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_stamps_that_never_tell_fall_back_to_the_first_frame(tmp_path):
    rec, line = new(tmp_path)
    ticks = []
    for k in range(150):  # a clock that never moves: every gap is 0
        ticks.append(line.tick(k, at=0.0, source_first=True))
        rec.write_pending()
        assert rec.leader == (None if k < 49 else recording.RIGHT), k
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_ticks_in_a_burst_pair_by_order(tmp_path):
    # A clock thread catching up after a stall runs ticks back to back: near-equal stamps.
    rec, line = new(tmp_path)
    ticks = []
    for k in range(30):
        # Ticks 10-19 come late, together; tick 20 is on time again.
        ticks.append(line.tick(k, at=0.38 + (k - 10) * 1e-4 if 10 <= k < 20 else None))
        rec.write_pending()
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_one_side_stopping_is_written_against_silence(tmp_path):
    rec, line = new(tmp_path)
    ticks = [line.tick(k) for k in range(10)]
    rec.write_pending()
    # The agent's side stops (the line on hold one way): each caller's frame goes to the file
    # alone once the next one shows its tick had no other side, while the call goes on.
    ticks += [line.tick(k, source=False) for k in range(10, 60)]
    rec.write_pending()
    assert rec.frames_written == 59 * N
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_clock_thread_and_session_thread_at_once(tmp_path):
    rec, line = new(tmp_path)
    ticks: list[tuple[bytes | None, bytes | None]] = []
    done = threading.Event()

    def clock_thread():
        for k in range(400):
            ticks.append(line.tick(k, source_first=True))
        done.set()

    t = threading.Thread(target=clock_thread)
    t.start()
    while not done.is_set():
        assert rec.write_pending() is None
    t.join()
    path, _ = rec.close()
    np.testing.assert_array_equal(read(path), expected(ticks))


def test_no_audio_no_file(tmp_path):
    rec, _ = new(tmp_path)
    assert rec.close() is None
    assert not (tmp_path / "media").exists() or not any((tmp_path / "media").rglob("*.wav"))
    assert recording_for("off", tmp_path, "x", RATE) is None
    assert isinstance(recording_for("stereo", tmp_path, "x", RATE), StereoRecording)


def test_backlog_without_writes_stops_instead_of_growing(tmp_path, monkeypatch):
    monkeypatch.setattr(recording, "MAX_BACKLOG_S", 1.0)
    rec, line = new(tmp_path)
    for k in range(100):  # 2 s, and nobody calls write_pending
        line.tick(k)
    assert rec.stopped_reason == "not written for 1 s"
    assert len(line.heard) == 100  # the call's audio never stopped
    assert rec.write_pending() == "not written for 1 s"
    assert rec.close() is None


def test_enospc_stops_the_recording_not_the_call(tmp_path, monkeypatch):
    rec, line = new(tmp_path)
    real_write = sf.SoundFile.write
    writes = []

    def write(self, data):
        writes.append(len(data))
        if len(writes) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, data)

    monkeypatch.setattr(sf.SoundFile, "write", write)
    ticks, reasons = [], []
    for k in range(60):
        ticks.append(line.tick(k))
        reasons.append(rec.write_pending())
    stops = [r for r in reasons if r]
    assert len(stops) == 1 and "No space left on device" in stops[0]
    assert rec.stopped_reason == stops[0] and rec.take_stop_reason() is None  # told once
    assert len(line.heard) == 60 and len(line.agent) == 60  # the call went on
    path, seconds = rec.close()  # no exception, and what was written is kept
    kept = sum(writes[:3])
    assert seconds == pytest.approx(kept / RATE)
    np.testing.assert_array_equal(read(path), expected(ticks)[:kept])


def test_a_fault_in_the_last_write_is_told_once(tmp_path, monkeypatch):
    rec, line = new(tmp_path)
    ticks = [line.tick(k) for k in range(7)]
    assert rec.write_pending() is None  # 7 frames written
    ticks += [line.tick(k) for k in range(7, 9)]  # 2 left for close()

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sf.SoundFile, "write", full)
    assert rec.take_stop_reason() is None
    path, seconds = rec.close()
    assert seconds == pytest.approx(7 * FRAME_S)
    why = rec.take_stop_reason()
    assert why is not None and "No space left on device" in why
    assert rec.take_stop_reason() is None and rec.write_pending() is None
    np.testing.assert_array_equal(read(path), expected(ticks)[:7 * N])


@contextmanager
def file_size_limit(limit: int):
    """Writes past ``limit`` bytes fail with EFBIG in this process, as on a full disk."""
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the signal kills us
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
        signal.signal(signal.SIGXFSZ, old_handler)


def test_a_real_write_fault_leaves_a_readable_file(tmp_path):
    rec, line = new(tmp_path)
    ticks = [line.tick(k) for k in range(10)]
    assert rec.write_pending() is None
    written = os.path.getsize(rec.path)
    ticks += [line.tick(k) for k in range(10, 20)]
    # Room for 2.5 of the next 10 frames: libsndfile's write fails part-way.
    with file_size_limit(written + int(2.5 * N * 4)):
        reason = rec.write_pending()
    assert reason is not None and reason.startswith("write failed")
    ticks += [line.tick(k) for k in range(20, 30)]
    assert rec.write_pending() is None  # reported once
    path, seconds = rec.close()
    data = read(path)
    # Readable, with everything up to the fault, the part-written block included.
    assert 10 * N <= len(data) <= 13 * N and seconds == pytest.approx(len(data) / RATE)
    np.testing.assert_array_equal(data, expected(ticks)[:len(data)])
