"""A started action's ``tool_calls`` row in the database (issue 61): written, updated, closed.

The agent writes a transfer's row ``pending`` when its REFER goes out and sends later news of
it under the same ``(call_id, seq)``. These tests drive the real writer on a real SQLite file:
the news in order, in any order (a spool replayed after newer records), through the spool while
the database is down, and closed as ``lost`` by the supervisor's path when the agent process
died first, which news from a replayed spool then replaces.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from itertools import permutations

import pytest
from db_fixtures import T0, call_started, sqlite_url_fixture  # noqa: F401 (fixtures)
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.migrate import make_engine, upgrade
from db.placement import close_lost_calls_of
from db.records import ToolCallRecord, to_json_dict
from db.rows import apply
from db.schema import ToolCall
from db.writer import CallLogWriter, FaultInjected
from dialplan.options import DBOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

START = ToolCallRecord("c-x", T0, "transfer", '{"target": "front-desk"}', "keypad", "pending",
                       "REFER sent", 0.0, None, seq=1)
TRYING = dataclasses.replace(START, detail="100 Trying", latency_s=0.4)
GONE = dataclasses.replace(START, outcome="caller-gone", latency_s=12.5,
                           detail="the call ended (rtp-timeout) 12.5 s after the REFER, before "
                                  "its outcome; last: 100 Trying")


def tool_rows(url: str) -> list[tuple]:
    engine = make_engine(url)
    with engine.connect() as conn:
        out = [tuple(r) for r in conn.execute(
            select(ToolCall.seq, ToolCall.name, ToolCall.outcome, ToolCall.detail,
                   ToolCall.latency_s, ToolCall.at).order_by(ToolCall.id))]
    engine.dispose()
    return out


def test_news_of_a_started_action_updates_its_one_row(sqlite_url, tmp_path):
    once = ToolCallRecord("c-x", T0 + timedelta(seconds=1), "say", '{"text": "Hi"}', "keypad",
                          "ok")
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "s"))) as writer:
        writer.put(call_started("c-x"))
        writer.put(START)
        assert writer.flush() and wait_until(lambda: tool_rows(sqlite_url))
        assert tool_rows(sqlite_url) == [(1, "transfer", "pending", "REFER sent", 0.0, T0)]
        for rec in (TRYING, once, GONE):
            writer.put(rec)
    assert tool_rows(sqlite_url) == [(1, "transfer", "caller-gone", GONE.detail, 12.5, T0),
                                     (None, "say", "ok", "", None, T0 + timedelta(seconds=1))]


@pytest.mark.parametrize("order", list(permutations((START, TRYING, GONE))))
def test_the_latest_news_wins_in_any_order(sqlite_url, order):
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    for rec in (call_started("c-x"), *order, order[0]):  # and one replayed twice
        with Session(engine) as s, s.begin():
            apply(s, rec)
    engine.dispose()
    assert tool_rows(sqlite_url) == [(1, "transfer", "caller-gone", GONE.detail, 12.5, T0)]


def test_a_transfer_started_while_the_database_is_down_reaches_it_from_the_spool(sqlite_url,
                                                                                  tmp_path):
    down = {"on": True}

    def fault():
        if down["on"]:
            raise FaultInjected("database down (test)")

    spool = tmp_path / "spool"
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool)), retry_s=0.1,
                       fault=fault) as writer:
        for rec in (call_started("c-x"), START, TRYING, GONE):
            writer.put(rec)
        assert writer.flush() and not writer.healthy
        spooled = [json.loads(line) for p in spool.glob("*.jsonl")
                   for line in p.read_text().splitlines()]
        assert [d["data"].get("seq") for d in spooled if d["type"] == "ToolCallRecord"] == [1] * 3
        down["on"] = False
        assert wait_until(lambda: writer.healthy)
    assert tool_rows(sqlite_url) == [(1, "transfer", "caller-gone", GONE.detail, 12.5, T0)]


def test_a_pending_row_of_a_dead_process_is_lost_until_its_spool_says_more(sqlite_url, tmp_path):
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "s"))) as writer:
        writer.put(call_started("c-x"))
        writer.put(TRYING)
    # The worker died mid-transfer: the supervisor closes its open calls (agent/supervisor.py).
    engine = make_engine(sqlite_url)
    assert close_lost_calls_of(engine, None, None, detail="worker pid 7 died: SIGKILL") == 1
    engine.dispose()
    assert tool_rows(sqlite_url) == [(1, "transfer", "lost", "100 Trying", 0.4, T0)]
    # What the dead process had spooled (it knew the caller left) replaces the guess.
    spool = tmp_path / "spool2"
    spool.mkdir()
    (spool / "current.jsonl").write_text(json.dumps(to_json_dict(GONE)) + "\n")
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool))) as writer:
        assert wait_until(lambda: writer.healthy)
    assert tool_rows(sqlite_url) == [(1, "transfer", "caller-gone", GONE.detail, 12.5, T0)]


def test_a_spool_line_from_before_seq_replays_as_a_row_of_its_own(sqlite_url, tmp_path):
    old = to_json_dict(dataclasses.replace(GONE, seq=None))
    del old["data"]["seq"]  # written by an agent older than revision 0007
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "current.jsonl").write_text(json.dumps(to_json_dict(call_started("c-x"))) + "\n"
                                         + json.dumps(old) + "\n")
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool))) as writer:
        assert wait_until(lambda: writer.healthy)
    assert tool_rows(sqlite_url) == [(None, "transfer", "caller-gone", GONE.detail, 12.5, T0)]


@pytest.mark.parametrize(("record", "shown"), [
    (TRYING, "tool transfer {\"target\": \"front-desk\"} (keypad): no outcome yet, 400 ms in - "
             "100 Trying"),
    (GONE, "tool transfer {\"target\": \"front-desk\"} (keypad): caller-gone in 12,500 ms - the "
           "call ended (rtp-timeout) 12.5 s after"),
])
def test_report_call_shows_a_pending_or_caller_gone_transfer(sqlite_url, tmp_path, capsys,
                                                            monkeypatch, record, shown):
    from test_report_cli import _main

    monkeypatch.chdir(tmp_path)
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "s"))) as writer:
        writer.put(call_started("c-x"))
        writer.put(record)
    assert _main(["report", "--db", sqlite_url, "--call", "c-x"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "tool transfer" in x]
    assert shown in line
