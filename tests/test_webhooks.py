"""Webhooks without a network: signing, the retry schedule, config errors and the outbox.

The outbox is the one the call-log writer fills in a real SQLite file, also through a database
outage and a replayed spool.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from db_fixtures import (
    call_records,
    call_started,
    outbox_rows,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
)

from agent.webhooks import (
    SIGNATURE,
    TIMESTAMP,
    backoff_s,
    safe_url,
    signature,
    signed_headers,
    verdict,
    verify,
)
from db.migrate import make_engine
from db.outbox import Due, settle, status_counts
from db.purge import purge
from db.records import ToolCallRecord
from db.writer import CallLogWriter, FaultInjected
from dialplan import ConfigError, parse_config
from dialplan.config import webhook_secrets
from dialplan.options import DBOptions
from dialplan.webhooks import EVENT_TYPES, WebhookOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.unit
BODY = b'{"id":"e1","type":"turn"}'


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    expected = hmac.new(b"k3y", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert signature("k3y", 1700000000, BODY) == f"sha256={expected}"
    headers = signed_headers("k3y", "e1", BODY, 1700000000)
    assert headers == {"Content-Type": "application/json", "X-Callagent-Event-Id": "e1",
                       "X-Callagent-Timestamp": "1700000000",
                       "X-Callagent-Signature": f"sha256={expected}"}


def test_verify_accepts_the_signed_request_and_refuses_tampering_and_replays():
    headers = signed_headers("k3y", "e1", BODY, 1700000000)
    assert verify("k3y", BODY, headers, now=1700000010)
    lower = {k.lower(): v for k, v in headers.items()}  # as many servers hand headers over
    assert verify("k3y", BODY, lower, now=1700000010)
    assert not verify("other", BODY, headers, now=1700000010)
    assert not verify("k3y", BODY + b" ", headers, now=1700000010)
    assert not verify("k3y", BODY, headers, now=1700000000 + 301)  # a replay, 5 min later
    # The timestamp is signed: moving it forward breaks the signature.
    assert not verify("k3y", BODY, {**headers, TIMESTAMP: "1700000300"}, now=1700000300)
    assert not verify("k3y", BODY, {SIGNATURE: headers[SIGNATURE]}, now=1700000010)


def test_backoff_doubles_from_the_base_up_to_the_cap():
    assert [backoff_s(n, 2.0, 600.0) for n in range(1, 12)] == [
        2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 600.0, 600.0]
    assert [backoff_s(n, 0.2, 1.0) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]
    # The default schedule keeps trying for its 6 h: 9 doublings, then every 10 min.
    hook = WebhookOptions(url="http://x", secret="env:S")
    waited, tries = 0.0, 0
    while waited < hook.max_age_s:
        tries += 1
        waited += backoff_s(tries, hook.backoff_s, hook.backoff_max_s)
    assert tries == 44


def test_verdict_retries_what_may_pass_later_and_fails_refusals():
    assert [verdict(c) for c in (200, 204, None, 500, 503, 408, 429, 301, 400, 401, 404)] == [
        "delivered", "delivered", "retry", "retry", "retry", "retry", "retry", "retry",
        "refused", "refused", "refused"]


def test_safe_url_drops_credentials_and_query():
    assert safe_url("https://bot:s3cret@hooks.example.com:8443/in?token=abc") == \
        "https://hooks.example.com:8443/in"


@pytest.mark.parametrize(("entry", "message"), [
    ({"url": "ftp://x"}, r"webhooks\[0\]\.url = 'ftp://x': must start with http"),
    ({"secret": "hunter2"}, r"webhooks\[0\]\.secret: expected \"env:VARIABLE\""),
    ({"events": ["turn", "calls"]}, r"webhooks\[0\]\.events\[1\]: 'calls' is not one of"),
    ({"events": []}, r"webhooks\[0\]\.events: name at least one"),
    ({"events": ["turn", "turn"]}, r"webhooks\[0\]\.events = \['turn', 'turn'\]: an event is "
                                   "named twice"),
    ({"timeout_s": 0}, r"webhooks\[0\]\.timeout_s = 0\.0: must be more than 0"),
    ({"max_age_s": "6h"}, r"webhooks\[0\]\.max_age_s: expected float, got '6h'"),
    ({"backoff_s": 10, "backoff_max_s": 5}, r"webhooks\[0\]\.backoff_max_s = 5\.0: must be at "
                                            r"least backoff_s \(10\.0\)"),
    ({"retries": 3}, r"unknown key 'webhooks\[0\]\.retries'"),
])
def test_a_bad_webhook_key_fails_naming_it(entry, message):
    good = {"url": "http://127.0.0.1:9/hook", "secret": "env:HOOK_SECRET"}
    with pytest.raises(ConfigError, match=message) as err:
        parse_config({"webhooks": [good, {**good, "url": "http://other/", **entry}][1:]})
    assert "hunter2" not in str(err.value)


def test_webhook_entries_parse_with_defaults_and_one_per_url(tmp_path):
    config = parse_config({"webhooks": [
        {"url": "http://a/", "secret": "env:A"},
        {"url": "http://b/", "secret": f"file:{tmp_path / 'b.key'}", "events": ["call.ended"]}]})
    a, b = config.webhooks
    assert (a.events, b.events, a.timeout_s, a.max_age_s) == (EVENT_TYPES, ("call.ended",),
                                                               5.0, 21600.0)
    (tmp_path / "b.key").write_text("b-secret\nignored\n")
    assert webhook_secrets(config.webhooks, {"A": "a-secret"}) == {"http://a/": "a-secret",
                                                                   "http://b/": "b-secret"}
    with pytest.raises(ConfigError, match=r"webhooks\[0\]\.secret: environment variable A is "
                                          "not set"):
        webhook_secrets(config.webhooks, {})
    with pytest.raises(ConfigError, match=r"webhooks\[1\]\.url: 'http://a/' is also "
                                          r"webhooks\[0\]'s"):
        parse_config({"webhooks": [{"url": "http://a/", "secret": "env:A"}] * 2})
    with pytest.raises(ConfigError, match="webhooks: expected"):
        parse_config({"webhooks": {"url": "http://a/", "secret": "env:A"}})


ALL = WebhookOptions(url="http://all/", secret="env:S")
ENDS = WebhookOptions(url="http://ends/", secret="env:S", events=("call.ended", "transfer"))


def test_each_record_queues_its_event_for_the_receivers_that_want_it(sqlite_url, tmp_path):
    opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))
    with CallLogWriter(opts, webhooks=(ALL, ENDS)) as writer:
        for record in call_records("c1"):
            writer.put(record)
        assert writer.flush()
    rows = outbox_rows(sqlite_url)
    assert [(r.url, r.type) for r in rows] == [
        ("http://all/", "call.started"), ("http://all/", "turn"), ("http://all/", "tool"),
        ("http://all/", "transfer"), ("http://ends/", "transfer"), ("http://all/", "message"),
        ("http://all/", "call.ended"), ("http://ends/", "call.ended")]
    assert {(r.status, r.attempts, r.last_status) for r in rows} == {("pending", 0, None)}
    bodies = {r.type: json.loads(r.body) for r in rows}
    turn = bodies["turn"]
    assert (turn["type"], turn["call_id"], turn["time"]) == ("turn", "c1",
                                                            "2026-01-05T09:00:08+00:00")
    assert (turn["data"]["transcript"], turn["data"]["reply"]) == ("when do you open", "At ten.")
    assert turn["data"]["timings"]["voice_to_voice_s"] == pytest.approx(0.6)
    assert turn["data"]["timings"]["asr_s"] == pytest.approx(0.1)
    ended = bodies["call.ended"]["data"]
    assert (ended["end_reason"], ended["turns"], ended["messages"], ended["duration_s"]) == (
        "caller-bye", 1, 1, 30.0)  # answered 1 s after it started, ended 31 s after
    transfer = bodies["transfer"]["data"]
    assert (transfer["target"], transfer["outcome"], transfer["latency_s"]) == ("desk", "ok", 1.5)
    assert bodies["tool"]["data"]["arguments"] == {"title": "Dune"}
    assert bodies["message"]["data"] == {"text": "call me back", "caller_uri": "sip:a@b",
                                         "audio_path": "/m/1.wav", "duration_s": 4.5}
    # One id per event, the same for every receiver of it.
    ids = {(r.type, r.event_id) for r in rows}
    assert len(ids) == 6 and all(json.loads(r.body)["id"] == r.event_id for r in rows)
    assert status_counts(make_engine(sqlite_url)) == {
        "http://all/": {"pending": 6, "delivered": 0, "failed": 0},
        "http://ends/": {"pending": 2, "delivered": 0, "failed": 0}}


def test_no_webhooks_queue_nothing(sqlite_url, tmp_path):
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))) as writer:
        for record in call_records("c1"):
            writer.put(record)
        assert writer.flush()
    assert outbox_rows(sqlite_url) == []


def test_events_come_back_with_spooled_records_once_each(sqlite_url, tmp_path):
    down = {"on": False}

    def fault():
        if down["on"]:
            raise FaultInjected("database down (test)")

    opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))
    with CallLogWriter(opts, retry_s=0.1, fault=fault, webhooks=(ALL,)) as writer:
        writer.put(call_started("c-up"))
        assert writer.flush() and wait_until(lambda: writer.healthy)
        down["on"] = True
        for record in call_records("c-down")[1:]:
            writer.put(record)
        assert writer.flush() and writer.stats.spooled == 6
        assert [r.call_id for r in outbox_rows(sqlite_url)] == ["c-up"]
        down["on"] = False
        assert wait_until(lambda: writer.healthy)
        # The same records again (a spool batch replayed after a crash): no new event.
        for record in call_records("c-down")[1:]:
            writer.put(record)
        assert writer.flush()
    rows = outbox_rows(sqlite_url)
    assert [(r.call_id, r.type) for r in rows] == [
        ("c-up", "call.started"), ("c-down", "turn"), ("c-down", "tool"),
        ("c-down", "transfer"), ("c-down", "message"), ("c-down", "call.ended")]
    assert len({r.event_id for r in rows}) == 6


def test_purge_deletes_the_words_in_deliveries_that_are_over(sqlite_url, tmp_path):
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool")),
                       webhooks=(ALL,)) as writer:
        for record in call_records("c-old"):
            writer.put(record)
        assert writer.flush()
    engine = make_engine(sqlite_url)
    turn = next(r for r in outbox_rows(sqlite_url) if r.type == "turn")
    settle(engine, Due(turn.id, turn.event_id, turn.body, 0, turn.created_at,
                       turn.next_attempt_at), "delivered", 200, "", datetime.now(UTC))
    result = purge(engine, timedelta(days=1))  # the call started on 2026-01-05
    engine.dispose()
    assert (result.calls, result.deliveries) == (1, 1)
    left = outbox_rows(sqlite_url)
    assert "turn" not in {r.type for r in left} and {r.status for r in left} == {"pending"}
    assert len(left) == 5  # still owed to the receiver


def test_an_action_still_pending_makes_its_event_with_its_outcome(sqlite_url, tmp_path):
    at = datetime(2026, 1, 5, 9, 0, 12, 345678, tzinfo=UTC)
    started = ToolCallRecord("c1", at, "transfer", '{"target": "desk"}', "llm", "pending", "",
                             0.0, 1)
    over = ToolCallRecord("c1", at, "transfer", '{"target": "desk"}', "llm", "ok", "", 2.5, 1)
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool")),
                       webhooks=(ALL,)) as writer:
        writer.put(started)
        assert writer.flush()
        assert outbox_rows(sqlite_url) == []
        writer.put(over)
        writer.put(over)  # the same outcome again (a replayed spool): still one event
        assert writer.flush()
    (row,) = outbox_rows(sqlite_url)
    assert (row.type, json.loads(row.body)["data"]["outcome"]) == ("transfer", "ok")
