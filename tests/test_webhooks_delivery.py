"""Webhook delivery against a real HTTP receiver on 127.0.0.1: down, failing, refusing.

The call-log writer fills the outbox of a real SQLite file and :class:`WebhookDelivery` sends
it, as in ``serve``, with the backoff made small through the webhook's own options.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import pytest
from db_fixtures import (
    call_records,
    outbox_rows,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
)
from sqlalchemy import func, select
from webhook_receiver import Receiver

from agent.webhooks import WebhookDelivery
from db.migrate import make_engine
from db.schema import Call
from db.writer import CallLogWriter
from dialplan.options import DBOptions
from dialplan.webhooks import WebhookOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.server
SECRET = "t0p-secret"


def test_down_then_failing_receiver_gets_every_event_once(sqlite_url, tmp_path):
    with Receiver(SECRET, down_s=3.0, fail=2) as receiver:
        hook = WebhookOptions(url=receiver.url, secret="env:UNUSED", timeout_s=2.0,
                              backoff_s=0.2, backoff_max_s=1.0)
        delivery = WebhookDelivery((hook,), {hook.url: SECRET}, sqlite_url, poll_s=0.1).start()
        opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))
        try:
            with CallLogWriter(opts, webhooks=(hook,)) as writer:
                started = time.time()
                for cid in ("c1", "c2"):
                    for record in call_records(cid):
                        writer.put(record)
                assert writer.flush()
                written_s = time.time() - started
                engine = make_engine(sqlite_url)
                with engine.connect() as conn:  # the call log did not wait for the receiver
                    assert conn.execute(select(func.count()).select_from(Call)).scalar() == 2
                engine.dispose()
                assert written_s < 2.0 and receiver.up_at is None
                assert wait_until(lambda: len(receiver.accepted()) >= 12, timeout=30)
                time.sleep(0.5)  # nothing more may come
        finally:
            delivery.close()
    queued = outbox_rows(sqlite_url)
    expected = {r.event_id for r in queued}
    assert len(expected) == 12  # 6 events a call
    accepted = Counter(r.event_id for r in receiver.accepted())
    assert set(accepted) == expected and set(accepted.values()) == {1}  # each exactly once
    assert all(r.signed for r in receiver.received)
    # The first two answers were 500 to the oldest event, retried with the same body; the
    # others waited behind it and went once it was through.
    first, second, third = receiver.received[:3]
    assert [r.answered for r in receiver.received[:3]] == [500, 500, 200]
    assert first.event_id == second.event_id == third.event_id == queued[0].event_id
    assert first.body == third.body == json.loads(queued[0].body)
    assert second.at - first.at >= 0.2 * 0.9  # at least the backoff (log clock's rounding)
    assert [r.body["type"] for r in receiver.accepted()[:6]] == [
        "call.started", "turn", "tool", "transfer", "message", "call.ended"]
    # Refused connections while it was down, then 500, 500 and 200: all on the oldest row.
    assert {(r.status, r.last_status) for r in queued} == {("delivered", 200)}
    assert queued[0].attempts >= 5 and {r.attempts for r in queued[1:]} == {1}
    assert delivery.stats["delivered"] == 12


def test_refusals_fail_at_once_and_retries_end_at_max_age(sqlite_url, tmp_path):
    with Receiver(SECRET, fail=10**6, code=401) as refusing, \
            Receiver(SECRET, fail=10**6, code=503) as failing:
        no = WebhookOptions(url=refusing.url, secret="env:UNUSED", events=("call.started",))
        later = WebhookOptions(url=failing.url, secret="env:UNUSED", events=("call.started",),
                               backoff_s=0.2, backoff_max_s=0.4, max_age_s=1.5)
        hooks = (no, later)
        delivery = WebhookDelivery(hooks, {h.url: SECRET for h in hooks}, sqlite_url,
                                   poll_s=0.1).start()
        try:
            opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))
            with CallLogWriter(opts, webhooks=hooks) as writer:
                writer.put(call_records("c1")[0])
                assert writer.flush()
            assert wait_until(lambda: {r.status for r in outbox_rows(sqlite_url)} == {"failed"},
                              timeout=15)
        finally:
            delivery.close()
    by_url = {r.url: r for r in outbox_rows(sqlite_url)}
    assert (by_url[no.url].attempts, by_url[no.url].last_status) == (1, 401)
    assert len(refusing.received) == 1  # a refusal is not retried
    gave_up = by_url[later.url]
    assert (gave_up.last_status, gave_up.last_error) == (503, "http-503")
    # 0.2, 0.4, 0.4... s apart until the event was 1.5 s old: 4 to 6 tries, every one counted.
    assert 4 <= gave_up.attempts <= 6 and gave_up.attempts == len(failing.received)
    assert delivery.stats == {"delivered": 0, "retried": gave_up.attempts - 1, "failed": 2}


def test_webhooks_command_lists_deliveries(sqlite_url, tmp_path, capsys):
    from agent.cli import webhooks as command

    with Receiver(SECRET) as receiver:
        hook = WebhookOptions(url=receiver.url, secret="env:UNUSED", events=("call.ended",))
        opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))
        with CallLogWriter(opts, webhooks=(hook,)) as writer:
            for cid in ("c1", "c2"):
                for record in call_records(cid):
                    writer.put(record)
            assert writer.flush()
        delivery = WebhookDelivery((hook,), {hook.url: SECRET}, sqlite_url, poll_s=0.1).start()
        try:
            assert wait_until(lambda: len(receiver.accepted()) == 2)
        finally:
            delivery.close()
    config = tmp_path / "none.toml"
    config.write_text("")
    args = argparse.Namespace(config=str(config), db=sqlite_url, status=None, call=None,
                              limit=50, format="table")
    assert command.run(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{receiver.url}: 2 delivered, 0 pending, 0 failed"
    assert [line.split()[2:6] for line in out[3:]] == [["call.ended", "delivered", "1", "200"]] * 2
    args.format, args.call = "json", "c1"
    assert command.run(args) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(d["call_id"], d["status"], d["attempts"], d["last_status"])
            for d in listed["deliveries"]] == [("c1", "delivered", 1, 200)]
