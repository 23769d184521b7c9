"""The console's API and pages over a real SQLite call log (Starlette's TestClient, in-process).

The rows are written as the agent writes them (:func:`db.rows.apply` of its records): three
calls of two profiles, ended two ways, hours apart, with turns, a tool call, a message with its
audio and a recording, and webhook deliveries queued by :mod:`db.outbox`. What is checked: the
token (401 on the API and a redirect to /login on the pages without it, the cookie after
signing in), each filter of the history, one call, the recording's bytes and ranges, messages
marked handled and back, and the outbox's counts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import soundfile as sf
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from agent.console.app import make_app
from agent.console.events import make
from agent.console.hub import Hub
from db.migrate import make_engine, upgrade
from db.outbox import enqueue
from db.records import (
    CallEnded,
    CallStarted,
    EventRecord,
    MessageRecord,
    ToolCallRecord,
    TurnRecord,
)
from db.rows import apply
from dialplan.webhooks import WebhookOptions

pytestmark = pytest.mark.unit

NOW = datetime.now(UTC).replace(microsecond=0)
HOOK = WebhookOptions(url="http://127.0.0.1:9/hook?key=abc", secret="env:X")


@pytest.fixture
def call_log(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    upgrade(url)
    engine = make_engine(url)
    wav = tmp_path / "c1.wav"
    sf.write(wav, np.zeros((8000 * 3, 2), np.int16), 8000, subtype="PCM_16")
    note = tmp_path / "m1.wav"
    sf.write(note, np.zeros(8000, np.int16), 8000, subtype="PCM_16")
    calls = [("c1", NOW - timedelta(minutes=10), "front", "caller-bye", "When do you OPEN today?",
              "We open at 9."),
             ("c2", NOW - timedelta(hours=3), "front", "agent-hangup", "Where is the parking?",
              "Behind the building."),
             ("c3", NOW - timedelta(days=2), "sales", "caller-bye", "I want a quote 50%_off",
              "Sure, I will pass that on.")]
    with Session(engine) as s, s.begin():
        for cid, at, profile, reason, said, replied in calls:
            records = [
                CallStarted(cid, at, caller_uri=f"sip:{cid}@example.net", called_extension="100",
                            profile=profile, answered_at=at),
                EventRecord(cid, at + timedelta(seconds=1), "state", "greeting->listening"),
                TurnRecord(cid, 0, speech_start_s=2.0, speech_end_s=4.0, transcript=said,
                           reply_text=replied, endpoint_s=0.3, asr_s=0.2, llm_ttft_s=0.25,
                           first_chunk_s=0.1, tts_first_audio_s=0.15, playout_s=0.02,
                           voice_to_voice_s=1.02, audio_out_s=1.5, at=at + timedelta(seconds=6)),
                CallEnded(cid, at + timedelta(seconds=30), reason, turns=1,
                          recording_path=str(wav) if cid == "c1" else None,
                          recording_s=3.0 if cid == "c1" else None)]
            if cid == "c1":
                records[3:3] = [
                    ToolCallRecord(cid, at + timedelta(seconds=5), "take_message",
                                   '{"text": "call back"}', outcome="ok", latency_s=0.01,
                                   turn_index=0),
                    MessageRecord(cid, at + timedelta(seconds=5), "Please call me back",
                                  "sip:c1@example.net", str(note), 1.0)]
            for r in records:
                apply(s, r)
                s.flush()
                enqueue(s, r, [HOOK], now=NOW)
    yield engine
    engine.dispose()


@pytest.fixture
def client(call_log):
    hub = Hub()
    hub.publish(make("call.started", "live1", time.time(), {"caller": "sip:up@example.net",
                                                           "extension": "100",
                                                           "profile": "front"}, "w1"))
    hub.publish(make("heard", "live1", time.time(), {"turn": 0, "text": "<b>hello</b>"}, "w1"))
    return TestClient(make_app(call_log, hub))


def test_the_api_asks_for_the_token_when_one_is_set(call_log):
    app = make_app(call_log, Hub(), token="t0ken")
    c = TestClient(app, follow_redirects=False)
    for path in ("/api/calls", "/api/calls?active=1", "/api/calls/c1", "/api/messages",
                 "/api/webhooks", "/api/events", "/api/calls/c1/recording"):
        r = c.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert c.post("/api/messages/1/handled").status_code == 401
    assert c.get("/api/calls", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = c.get("/api/calls", headers={"Authorization": "Bearer t0ken"})
    assert ok.status_code == 200 and ok.json()["total"] == 3
    page = c.get("/calls?profile=front")
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Fcalls%3Fprofile%3Dfront"
    assert c.get("/login").status_code == 200
    assert c.post("/login", headers={"Authorization": "Bearer nope"}).status_code == 401
    signed = c.post("/login", headers={"Authorization": "Bearer t0ken"})
    assert signed.status_code == 200
    cookie = signed.cookies["callagent_console"]
    assert cookie and "t0ken" not in cookie  # an HMAC of the token, not the token
    assert "httponly" in signed.headers["set-cookie"].lower()
    assert c.get("/api/calls").status_code == 200  # the client keeps the cookie
    assert c.get("/calls").status_code == 200
    c.get("/logout")
    assert c.get("/api/calls").status_code == 401


def test_no_token_no_check(client):
    assert client.get("/api/calls").status_code == 200
    assert client.get("/").status_code == 200


def ids(client, query: str) -> list[str]:
    r = client.get(f"/api/calls?{query}")
    assert r.status_code == 200, r.text
    return [c["id"] for c in r.json()["calls"]]


def test_history_filters(client):
    assert ids(client, "") == ["c1", "c2", "c3"]  # newest first
    assert ids(client, "since=1h") == ["c1"]
    assert ids(client, "since=1d") == ["c1", "c2"]
    start = (NOW - timedelta(hours=4)).isoformat()
    end = (NOW - timedelta(hours=1)).isoformat()
    assert ids(client, f"start={start}&end={end}".replace("+", "%2B")) == ["c2"]
    assert ids(client, "profile=sales") == ["c3"]
    assert ids(client, "end_reason=caller-bye") == ["c1", "c3"]
    assert ids(client, "end_reason=caller-bye&profile=front") == ["c1"]
    assert ids(client, "q=open") == ["c1"]  # the caller's words, any case
    assert ids(client, "q=BEHIND") == ["c2"]  # the agent's reply
    assert ids(client, "q=50%25_") == ["c3"]  # LIKE's wildcards are searched as text
    assert ids(client, "q=%25") == ["c3"]
    assert ids(client, "q=sip:c2@") == ["c2"]  # the caller's URI
    assert ids(client, "q=nothing+like+it") == []
    page = client.get("/api/calls?limit=1&offset=1").json()
    assert [c["id"] for c in page["calls"]] == ["c2"] and page["total"] == 3
    c1 = client.get("/api/calls?q=open").json()["calls"][0]
    assert (c1["duration_s"], c1["turns"], c1["recorded"], c1["profile"]) == (30.0, 1, True,
                                                                            "front")
    for bad in ("since=soon", "start=yesterday", "limit=x"):
        r = client.get(f"/api/calls?{bad}")
        assert r.status_code == 400 and bad.split("=")[0] in r.json()["error"]
    assert client.get("/api/calls?active=1").json()["calls"][0]["id"] == "live1"


def test_history_page_filters_and_escapes(client):
    html = client.get("/calls?profile=front&q=parking").text
    assert 'href="/calls/c2"' in html and 'href="/calls/c1"' not in html
    assert "1 calls match" in html
    assert client.get("/calls?since=never").status_code == 200  # the error, on the page


def test_one_call(client):
    r = client.get("/api/calls/c1").json()
    assert r["end_reason"] == "caller-bye" and r["live"] is None
    (turn,) = r["turn_rows"]
    assert turn["transcript"] == "When do you OPEN today?" and turn["reply"] == "We open at 9."
    assert turn["stages"]["voice_to_voice"] == pytest.approx(1.02)
    assert turn["stages"]["asr"] == pytest.approx(0.2)
    assert [t["name"] for t in r["tool_calls"]] == ["take_message"]
    assert r["messages"][0]["text"] == "Please call me back"
    assert ("state", "greeting->listening") in {(e["kind"], e["detail"]) for e in r["events"]}
    page = client.get("/calls/c1").text
    assert '<audio id="recording"' in page and "/api/calls/c1/recording" in page
    assert "Call timeline" in page and "We open at 9." in page
    assert client.get("/api/calls/nope").status_code == 404
    live = client.get("/api/calls/live1").json()
    assert live["live"]["lines"][0]["text"] == "<b>hello</b>"  # JSON: as said
    assert "<b>hello</b>" not in client.get("/").text  # markup: escaped in the page's data


def test_recording_and_message_audio(client, call_log, tmp_path):
    wav = (tmp_path / "c1.wav").read_bytes()
    r = client.get("/api/calls/c1/recording")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    assert r.content == wav
    part = client.get("/api/calls/c1/recording", headers={"Range": "bytes=0-43"})
    assert part.status_code == 206 and part.content == wav[:44]  # seekable: the WAV header
    assert client.get("/api/calls/c2/recording").status_code == 404
    assert client.get("/api/messages/1/audio").content == (tmp_path / "m1.wav").read_bytes()
    assert client.get("/api/messages/99/audio").status_code == 404


def test_messages_marked_handled_and_back(client):
    (m,) = client.get("/api/messages").json()["messages"]
    assert (m["text"], m["handled_at"], m["audio"], m["call_id"]) == (
        "Please call me back", None, True, "c1")
    assert 'class="handle" data-id="1"' in client.get("/messages").text
    done = client.post(f"/api/messages/{m['id']}/handled")
    assert done.status_code == 200
    at = datetime.fromisoformat(done.json()["handled_at"])
    assert abs((at - datetime.now(UTC)).total_seconds()) < 5
    assert client.get("/api/messages?handled=0").json()["messages"] == []
    assert client.get("/api/messages?handled=1").json()["messages"][0]["handled_at"]
    assert "No messages." in client.get("/messages").text  # the page lists open ones
    assert "handled" in client.get("/messages?show=all").text
    back = client.post(f"/api/messages/{m['id']}/handled", json={"handled": False})
    assert back.json()["handled_at"] is None
    assert len(client.get("/api/messages?handled=0").json()["messages"]) == 1
    assert client.post("/api/messages/99/handled").status_code == 404
    assert client.post("/api/messages/1/handled", content=b"[oops").status_code == 400


def test_webhook_deliveries(client):
    data = client.get("/api/webhooks").json()
    # No user info or query in what the console shows: either may hold a token.
    # 3 calls x (started, turn, ended), a tool call, a message.
    assert data["counts"] == {"http://127.0.0.1:9/hook": {"pending": 11, "delivered": 0,
                                                         "failed": 0}}
    kinds = sorted(d["type"] for d in data["deliveries"])
    assert kinds.count("call.started") == 3 and kinds.count("message") == 1
    assert all("key=abc" not in d["url"] for d in data["deliveries"])
    assert client.get("/api/webhooks?status=delivered").json()["deliveries"] == []
    page = client.get("/webhooks").text
    assert "http://127.0.0.1:9/hook" in page and "key=abc" not in page


def test_pages_render(client):
    for path, words in (("/", "Calls up now"), ("/charts", "Voice-to-voice distribution"),
                        ("/charts?since=1h", "1 calls"), ("/messages", "Messages"),
                        ("/static/console.js", "EventSource")):
        r = client.get(path)
        assert r.status_code == 200 and words in r.text, path


def test_a_call_log_not_migrated_answers_503(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    c = TestClient(make_app(engine, Hub()))
    r = c.get("/api/calls")
    assert r.status_code == 503 and "unavailable" in r.json()["error"]
    assert c.get("/calls").status_code == 503
    assert c.get("/api/calls?active=1").status_code == 200  # live calls need no database
