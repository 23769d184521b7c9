"""Playout: framing, silence when idle, no gaps inside a reply, clear(), first-frame stamp."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from agent.call.playout import Playout

pytestmark = pytest.mark.unit


def ramp(n: int) -> np.ndarray:
    return (np.arange(n) % 1000 + 1).astype(np.int16)


def test_idle_line_carries_silence_frames():
    p = Playout(8000)
    frame = p.next_frame()
    assert frame == bytes(320)
    assert not p.busy
    assert p.metrics().frames == 0


def test_reply_is_framed_in_order_and_tail_padded():
    p = Playout(8000)
    stamps = []
    p.start_reply(stamps.append)
    audio = ramp(1000)  # 6 whole frames + 40 samples
    p.push(audio[:300])  # pieces that do not align with frames
    p.push(audio[300:])
    p.end_reply()
    assert p.busy and p.queued_s == pytest.approx(0.14)
    frames = [np.frombuffer(p.next_frame(), np.int16) for _ in range(8)]
    out = np.concatenate(frames)
    assert np.array_equal(out[:1000], audio)
    assert not out[1000:].any()  # padded tail, then idle silence
    assert len(stamps) == 1  # stamped once, at the first reply frame
    assert not p.busy
    assert p.metrics().frames == 7 and p.metrics().underruns == 0


def test_clear_drops_queued_audio_at_once():
    p = Playout(8000)
    p.start_reply()
    p.push(ramp(8000))  # 1 s
    assert p.next_frame() != bytes(320)
    dropped = p.clear()
    assert dropped == 49
    assert p.next_frame() == bytes(320)
    assert not p.busy
    p.push(ramp(800))  # a cancelled producer's late audio is not played
    assert p.next_frame() == bytes(320)
    assert p.metrics().cleared_frames == 49


def test_gap_inside_open_reply_counts_as_underrun():
    p = Playout(8000)
    p.start_reply()
    p.push(ramp(160))
    p.next_frame()
    assert p.next_frame() == bytes(320)  # producer late: silence, counted
    p.push(ramp(160))
    p.end_reply()
    p.next_frame()
    assert p.metrics().underruns == 1


def test_paced_consumer_gap_percentiles_and_echo_level():
    p = Playout(8000)
    p.start_reply()
    p.push((np.ones(8000) * 16384).astype(np.int16))
    p.end_reply()

    def clock():
        nxt = time.monotonic()
        for _ in range(30):
            p.next_frame()
            nxt += 0.02
            time.sleep(max(0, nxt - time.monotonic()))

    t = threading.Thread(target=clock)
    t.start()
    t.join()
    m = p.metrics()
    assert m.frames == 30
    assert 0.015 <= m.gap_p50_s <= 0.025
    assert m.gap_p99_s < 0.060
    assert p.level == pytest.approx(0.5, abs=0.01)
