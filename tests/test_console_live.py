"""The console's live path: records and turns as events, the hub's table, the datagram feed.

Unit tests drive each part with real objects (call-log records, :class:`~agent.call.turn.Turn`,
a :class:`~agent.console.hub.Hub` and an asyncio loop as the console runs it); the ``server``
test starts a real console on 127.0.0.1 and reads its event stream with httpx while this
process plays a worker: its events cross as datagrams, within a fraction of a second, and when
the worker falls silent its calls leave the list.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from agent.call.live import TurnFeed
from agent.call.turn import Taking, Turn, Work
from agent.cluster.cluster import WorkerSpec
from agent.console import hub as hubmod
from agent.console.events import MAX_TEXT, decode, encode, make, of_record
from agent.console.feed import LiveFeed, LiveTee
from agent.console.hub import Hub
from agent.console.server import start_console
from agent.turn.result import TurnResult
from agent.turn.timeline import TurnTimeline
from db.records import CallEnded, CallStarted, EventRecord, ToolCallRecord, TurnRecord
from dialplan import ConfigError
from dialplan.config import console_token, parse_config
from dialplan.console import ConsoleOptions, is_loopback
from models.vad.segmenter import Utterance
from testkit.agentproc import free_block

unit = pytest.mark.unit
AT = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def ev(kind, call_id="c1", source="w1", at=None, **data):
    return make(kind, call_id, time.time() if at is None else at, data, source)


@unit
def test_records_become_live_events():
    assert of_record(CallStarted("c1", AT, caller_uri="sip:a@b", called_extension="100",
                                 profile="front", answered_at=AT, worker="w2")) == (
        "call.started", {"caller": "sip:a@b", "extension": "100", "profile": "front",
                         "direction": "inbound", "worker": "w2", "answered_at": AT.timestamp()})
    assert of_record(EventRecord("c1", AT, "state", "thinking->speaking")) == (
        "state", {"state": "speaking", "old": "thinking"})
    assert of_record(EventRecord("c1", AT, "dtmf", "5")) == ("event", {"kind": "dtmf",
                                                                     "detail": "5"})
    kind, data = of_record(TurnRecord("c1", 2, transcript="hi", reply_text="hello",
                                      voice_to_voice_s=0.8))
    assert kind == "turn" and (data["index"], data["voice_to_voice_s"]) == (2, 0.8)
    assert of_record(ToolCallRecord("c1", AT, "transfer", outcome=""))[1]["outcome"] == "pending"
    assert of_record(CallEnded("c1", AT, "caller-bye", turns=3)) == (
        "call.ended", {"end_reason": "caller-bye", "turns": 3})


@unit
def test_an_event_is_immutable_and_crosses_whole():
    e = ev("heard", turn=0, text="x" * (MAX_TEXT + 50))
    assert len(e.data["text"]) == MAX_TEXT
    with pytest.raises(TypeError):
        e.data["text"] = "changed"  # type: ignore[index]
    back = decode(encode(e))
    assert (back.kind, back.call_id, back.source, dict(back.data)) == (
        "heard", "c1", "w1", dict(e.data))
    for junk in (b"not json", b"{}", json.dumps({"v": 99, "data": {}}).encode(), b"[1]"):
        assert decode(junk) is None


@unit
def test_the_hub_keeps_the_conversation_and_drops_ended_calls():
    hub = Hub()
    hub.publish(ev("call.started", caller="sip:a@b", extension="100", profile="front",
                   answered_at=1.0))
    hub.publish(ev("state", state="thinking"))
    hub.publish(ev("heard", turn=0, text="what time"))
    hub.publish(ev("reply", turn=0, text="We open", final=False))
    hub.publish(ev("reply", turn=0, text="We open at nine.", final=True))
    hub.publish(ev("heard", turn=1, text="and on"))
    hub.publish(ev("heard", turn=1, text="and on", dropped=True))  # merged into the next
    hub.publish(ev("turn", index=0, voice_to_voice_s=0.9, unanswered=""))
    (call,) = hub.snapshot()["calls"]
    assert (call["caller"], call["state"], call["turns"], call["voice_to_voice_s"]) == (
        "sip:a@b", "thinking", 1, 0.9)
    assert [(ln["who"], ln["text"], ln["final"]) for ln in call["lines"]] == [
        ("caller", "what time", True), ("agent", "We open at nine.", True)]
    hub.publish(ev("state", state="ended"))  # the BYE: gone at once
    assert hub.snapshot()["calls"] == [] and hub.call("c1") is None
    hub.publish(ev("turn", index=1))  # its last records come after: it does not come back
    hub.publish(ev("call.ended", end_reason="caller-bye"))
    assert hub.snapshot()["calls"] == []
    assert hub.snapshot()["seq"] == 9


@unit
def test_the_hub_drops_calls_of_a_dead_worker_and_ends_it_missed(monkeypatch):
    hub = Hub()
    now = time.time()
    hub.publish(ev("call.started", "a", "w1", at=now))
    hub.publish(ev("call.started", "b", "w1", at=now))
    hub.publish(ev("call.started", "c", "w2", at=now))
    hub.publish(ev("alive", "-", "w1", at=now + 1, calls=["a"]))  # b's too young to judge
    assert {c["id"] for c in hub.snapshot()["calls"]} == {"a", "b", "c"}
    hub.publish(ev("alive", "-", "w1", at=now + hubmod.MISSED_S + 0.1, calls=["a"]))
    assert {c["id"] for c in hub.snapshot()["calls"]} == {"a", "c"}  # b's end was missed
    hub.expire(time.monotonic() + hubmod.STALE_S - 1)
    assert {c["id"] for c in hub.snapshot()["calls"]} == {"a", "c"}
    hub.expire(time.monotonic() + hubmod.STALE_S + 1)  # both workers silent since
    assert hub.snapshot()["calls"] == []


@unit
def test_a_browser_that_never_reads_costs_the_hub_nothing():
    hub = Hub()
    loop = asyncio.new_event_loop()
    try:
        fast, snap = hub.subscribe(loop)
        slow, _ = hub.subscribe(loop)
        assert snap == {"seq": 0, "calls": []}
        started = time.perf_counter()
        for i in range(hubmod.SUB_BACKLOG + 500):
            hub.publish(ev("heard", turn=i, text="words"))
        per_event = (time.perf_counter() - started) / (hubmod.SUB_BACKLOG + 500)
        assert per_event < 0.001  # nothing waited for either browser

        async def read(sub, n):
            return [await sub.get() for _ in range(n)]

        got = loop.run_until_complete(read(fast, 3))
        assert [e.seq for e in got] == [1, 2, 3] and got[0].data["text"] == "words"
        # The one that fell behind: its stream ends after the backlog, so its page reloads.
        rest = loop.run_until_complete(read(slow, hubmod.SUB_BACKLOG + 1))
        assert rest[-1] is None and slow.closed
    finally:
        loop.close()
    hub.publish(ev("heard", turn=0, text="after"))  # a closed loop: dropped, no error
    assert hub.watchers == 0


def turn(index=0, **kw) -> Turn:
    utt = Utterance(audio=np.zeros(0, np.float32), start_s=0.0, end_s=1.0, endpoint_s=1.5,
                    vad=None)
    t = Turn(index=index, utterance=utt, timeline=TurnTimeline(), history_len=0)
    if kw.pop("endpointed", False):
        t.take(Taking.ENDPOINTED)
    for k, v in kw.items():
        setattr(t, k, v)
    return t


@unit
def test_a_turn_is_published_once_per_step():
    out = []
    feed = TurnFeed(lambda kind, cid, data: out.append((kind, dict(data))), "c1")
    t = turn(transcript="what time is it")
    feed.update(t)  # speculative: not yet
    t.take(Taking.ENDPOINTED)
    feed.update(t)
    feed.update(t)
    t.audible, t.reply = True, SimpleNamespace(said="It is")
    feed.update(t)
    t.reply = SimpleNamespace(said="It is ten.")
    feed.update(t)  # the first words are out already; the whole reply comes at the end
    t.work_to(Work.FINISHED)
    t.work_to(Work.DONE)
    t.result = TurnResult(transcript="what time is it", reply_text="It is ten. ")
    feed.update(t)
    feed.update(t)
    assert out == [("heard", {"turn": 0, "text": "what time is it"}),
                   ("reply", {"turn": 0, "text": "It is", "final": False}),
                   ("reply", {"turn": 0, "text": "It is ten.", "final": True})]
    out.clear()
    merged = turn(1, transcript="and on", endpointed=True)
    feed.update(merged)
    merged.take(Taking.MERGED)
    feed.update(merged)
    feed.update(merged)
    assert out == [("heard", {"turn": 1, "text": "and on"}),
                   ("heard", {"turn": 1, "text": "and on", "dropped": True})]
    out.clear()
    feed.update(turn(2, typed="keypad: 4#", endpointed=True))
    feed.update(turn(3, transcript="", endpointed=True))  # no words: nothing to show
    assert out == [("heard", {"turn": 2, "text": "keypad: 4#"})]


@unit
def test_the_feed_never_waits_for_a_console_that_is_not_there(tmp_path):
    feed = LiveFeed(str(tmp_path / "nobody.sock"), "w9")
    tee_got = []
    tee = LiveTee(SimpleNamespace(put=tee_got.append), feed)
    try:
        started = time.perf_counter()
        for _ in range(5000):
            tee.put(EventRecord("c1", AT, "state", "listening->thinking"))
        assert (time.perf_counter() - started) / 5000 < 0.0005
        assert len(tee_got) == 5000  # the call log got every record
        assert threading.active_count() >= 2 and any(
            t.name == "console-feed" for t in threading.enumerate())
    finally:
        feed.close()
    assert feed.sent == 0 and feed.dropped > 0


@unit
def test_console_config():
    with pytest.raises(ConfigError, match=r"^console\.token: required .*'0\.0\.0\.0'"):
        parse_config({"console": {"enabled": True, "host": "0.0.0.0"}})
    with pytest.raises(ConfigError, match=r"^console\.token: expected"):
        parse_config({"console": {"token": "hunter2"}})
    with pytest.raises(ConfigError, match=r"^unknown key 'console\.tokn'"):
        parse_config({"console": {"tokn": "env:X"}})
    opts = parse_config({"console": {"enabled": True, "host": "10.0.0.5",
                                     "token": "env:CONSOLE_T"}}).console
    assert console_token(opts, {"CONSOLE_T": "s3"}) == "s3"
    with pytest.raises(ConfigError, match=r"console\.token: environment variable CONSOLE_T"):
        console_token(opts, {})
    assert console_token(ConsoleOptions(), {}) == ""
    assert parse_config({}).console.enabled is False  # off unless the config turns it on
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost",
                                     "0.0.0.0", "10.0.0.5", "example.net")] == [
        True, True, True, True, False, False, False]


@unit
def test_cluster_workers_get_the_live_socket():
    w = WorkerSpec(id="w1", host="127.0.0.1", sip_port=5061, rtp_port=20000, metrics_port=0)
    argv = w.argv(None, None, "INFO", "/tmp/x/live.sock")
    assert argv[argv.index("--live-socket") + 1] == "/tmp/x/live.sock"
    assert "--live-socket" not in w.argv(None, None, "INFO")


def read_events(url: str, want, out: list, stop: threading.Event) -> None:
    """Collect the stream's events (with the time each arrived) until ``want(out)``."""
    with httpx.stream("GET", url, timeout=10) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append((time.time(), json.loads(line[6:])))
                if want(out) or stop.is_set():
                    return


@pytest.mark.server
def test_a_workers_events_reach_the_browser_stream(tmp_path):
    port = free_block(1, socket.SOCK_STREAM)
    console = start_console(ConsoleOptions(enabled=True, port=port),
                            f"sqlite:///{tmp_path / 'calls.db'}", "")
    got: list = []
    stop = threading.Event()
    try:
        def done(evs):
            return any(e["kind"] == "call.gone" for _, e in evs)

        reader = threading.Thread(target=read_events, daemon=True, args=(
            f"http://127.0.0.1:{port}/api/events", done, got, stop))
        reader.start()
        assert _wait(lambda: got)  # the snapshot first
        assert got[0][1] == {"kind": "snapshot", "seq": 0, "calls": []}
        feed = LiveFeed(console.live_socket, "w1")
        tee = LiveTee(SimpleNamespace(put=lambda r: None), feed)
        tee.put(CallStarted("c1", AT, caller_uri="sip:a@b", answered_at=AT))
        feed.publish("heard", "c1", {"turn": 0, "text": "hello there"})
        assert _wait(lambda: len(got) >= 3)
        (_, started), (t2, heard) = got[1], got[2]
        assert started["kind"] == "call.started" and started["data"]["caller"] == "sip:a@b"
        assert heard["data"]["text"] == "hello there" and heard["seq"] == 2
        lag = t2 - heard["at"]
        assert 0 <= lag < 0.5, lag
        live = httpx.get(f"http://127.0.0.1:{port}/api/calls?active=1").json()["calls"]
        assert [c["id"] for c in live] == ["c1"] and live[0]["lines"][0]["text"] == "hello there"
        feed.close()  # the worker dies: its heartbeat stops
        closed = time.time()
        reader.join(hubmod.STALE_S + 5)
        gone = [(t, e) for t, e in got if e["kind"] == "call.gone"]
        assert gone and gone[0][1]["data"]["reason"] == "worker-silent"
        assert gone[0][0] - closed < hubmod.STALE_S + 1.5
        assert httpx.get(f"http://127.0.0.1:{port}/api/calls?active=1").json()["calls"] == []
        print(f"datagram to browser stream: {lag * 1000:.1f} ms; a silent worker's call gone "
              f"after {gone[0][0] - closed:.1f} s")
    finally:
        stop.set()
        console.close()
    with pytest.raises(ConfigError, match="console.port: cannot listen"):
        blocker = socket.create_server(("127.0.0.1", 0))
        try:
            start_console(ConsoleOptions(enabled=True, port=blocker.getsockname()[1]),
                          f"sqlite:///{tmp_path / 'calls.db'}", "")
        finally:
            blocker.close()


def _wait(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True
