"""What `bench call` reads: a call off the wire, and a round's events from the call log.

Dead air inside a reply, which the packet gap cannot show; "say that again" replies apart.
"""

import pytest

from testkit.wire import RtpPacket, dead_air_ms

pytestmark = pytest.mark.unit

SPEECH = bytes([0x20, 0xA0] * 80)  # loud μ-law samples
ZERO = bytes([0xFF] * 160)  # what the agent sends when a reply's next audio is not there


def packets(frames: str, payload_type: int = 0) -> list[RtpPacket]:
    """One 20 ms packet per letter: s = speech, z = zero samples, q = quiet but not zero."""
    body = {"s": SPEECH, "z": ZERO, "q": bytes([0xFE] * 160)}
    if payload_type == 8:  # A-law: zero is 0xD5
        body["z"] = bytes([0xD5] * 160)
    return [RtpPacket(i * 0.02, 40000, 5004, payload_type, i, body[f])
            for i, f in enumerate(frames)]


def test_holes_of_zero_samples_inside_a_reply_are_dead_air():
    line = packets("zzzz" + "ssss" + "zzzzz" + "ss" + "zz" + "sss" + "zzzzzz")
    reply = [(0.08, 0.38)]  # from its first speech packet to its last
    # The 100 ms hole counts; 2 zero frames are a pause in speech; the silence before the
    # reply and after it is not inside it.
    assert dead_air_ms(line, reply) == [100.0]
    assert dead_air_ms(line, reply, min_frames=2) == [100.0, 40.0]
    assert dead_air_ms(line, []) == []


def test_only_exact_zero_samples_count():
    # Quiet speech (the voice's own pauses) is not a late chunk; A-law zero is.
    assert dead_air_ms(packets("sqqqqqs"), [(0.0, 0.12)]) == []
    assert dead_air_ms(packets("szzzs", payload_type=8), [(0.0, 0.08)]) == [60.0]


def test_a_callers_media_block_never_lies_in_the_agents_rtp_range():
    # Inside it, free until the agent takes it for a call, the caller's packets would be read
    # as the agent's side of a call (one bench call run counted a 5.7 s phantom hole so).
    from testkit.agentproc import free_block

    agent = range(30000, 50000)
    for _ in range(50):
        start = free_block(4, avoid=agent)
        assert start + 4 <= agent.start or start >= agent.stop


def test_a_rounds_caller_ports_are_disjoint_and_below_the_kernels_ephemeral_ports(monkeypatch):
    # A port found free is bound moments later by sipp: an ephemeral port handed out
    # meanwhile (another caller's SIP port) or another caller's block found free before its
    # sipp bound it could take it, and that caller's call is lost.
    from testkit import agentproc
    from testkit.agentproc import caller_media, free_block

    monkeypatch.setattr(agentproc, "ephemeral_low", lambda: 32768)  # Linux's default
    agent = range(21000, 23000)
    for _ in range(50):
        ports = [p for m in caller_media(4, agent) for p in range(m, m + 4)]
        assert len(set(ports)) == 16 and not set(ports) & set(agent)
        assert max(ports) < 32768
        assert free_block(400) + 400 <= 32768
    # No room below them for 20 such blocks: the whole range, rather than no block at all.
    monkeypatch.setattr(agentproc, "ephemeral_low", lambda: 21500)
    starts = {free_block(400) for _ in range(50)}
    assert all(21000 <= s and s + 400 <= 59000 for s in starts) and max(starts) >= 21500


def test_a_rounds_events_are_counted_from_the_real_call_log(tmp_path):
    # `bench call` reads the call log that serve wrote: this round's calls only (the log
    # keeps earlier rounds'), and "say that again" replies apart, since they are quick
    # answers that count in voice-to-voice.
    from bench.call import events_of
    from db.records import CallStarted, EventRecord
    from tests.db_fixtures import T0, write_records

    db = tmp_path / "calls.db"
    records = [CallStarted(call_id=c, started_at=T0) for c in ("earlier", "a", "b")]
    records += [EventRecord(c, T0, kind) for c, kind in (
        ("earlier", "asked-to-repeat"), ("a", "asked-to-repeat"), ("b", "asked-to-repeat"),
        ("a", "under-load"), ("b", "under-load"), ("b", "dtmf"))]
    write_records(f"sqlite:///{db}", records, tmp_path / "spool")
    assert events_of(db, "asked-to-repeat", {"a", "b"}) == 2
    assert events_of(db, "under-load", {"a"}) == 1
    assert events_of(db, "barge-in", {"a", "b"}) == 0
