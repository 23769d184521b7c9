"""The post-call summary job against a real call log: when it runs, what it stores and sends.

A real :class:`~db.writer.CallLogWriter` on SQLite (with a webhook, so ``call.ended`` lands
in the outbox), the real scheduler and load policy, and a fake LLM: these tests are about when
the job may run and what becomes of its reply, so the LLM is scripted (its steps still run as
background jobs of the scheduler). A real model's notes: ``test_summary_model.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from agent.summary.runner import Summarizer
from agent.turn.load import LoadPolicy
from db.migrate import make_engine
from db.records import CallEnded, CallStarted, TurnRecord
from db.writer import CallLogWriter
from dialplan.options import DBOptions, LLMOptions
from dialplan.profile import Profile
from dialplan.webhooks import WebhookOptions
from models.scheduler import Scheduler
from tests.fakes import FakeLLM
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

EXTRACT = {"caller_name": "the caller's name", "reason": "why they called"}
NOTES = {"summary": "Ana Ruiz called about a late order. The agent took a message.",
         "caller_name": "Ana Ruiz", "reason": "a late order"}
HOOK = WebhookOptions(url="http://127.0.0.1:9/hook", secret="env:NO_SUCH_SECRET")


class OtherCall:
    """A call up in the backlog (it keeps calls by weak reference)."""


class Rig:
    """A writer, a summarizer (not started) and the log the calls write through."""

    def __init__(self, tmp_path, reply: str = json.dumps(NOTES), wait_s: float = 300.0,
                 token_s: float = 0.0):
        self.url = f"sqlite:///{tmp_path}/calls.db"
        self.writer = CallLogWriter(DBOptions(url=self.url, spool_dir=str(tmp_path / "spool")),
                                    webhooks=(HOOK,), host="here")
        self.scheduler = Scheduler()
        self.load = LoadPolicy(self.scheduler)
        self.llm = FakeLLM(reply, token_s=token_s)
        self.llm.scheduler = self.scheduler
        self.profile = Profile(name="p", summary=True, extract=EXTRACT, summary_wait_s=wait_s)
        self.summaries = Summarizer(self.url, self.writer, {"p": self.profile},
                                    lambda p: self.llm, self.load, worker=None, host="here",
                                    poll_s=0.1)
        self.log = self.summaries.tee(self.writer)
        self.engine = make_engine(self.url)

    def call(self, cid: str = "c1") -> str:
        now = datetime.now(UTC)
        self.log.put(CallStarted(cid, now, profile="p", host="here", answered_at=now))
        self.log.put(TurnRecord(cid, 0, transcript="Hi, this is Ana Ruiz, my order is late.",
                                reply_text="Sorry, Ana. I will pass it on.", at=now))
        self.log.put(CallEnded(cid, datetime.now(UTC), "caller-bye", turns=1))
        assert self.writer.flush()
        return cid

    def row(self, cid: str = "c1") -> dict:
        with self.engine.connect() as c:
            return dict(c.execute(text(
                "SELECT summary_state, summary, extracted, summary_detail, summary_attempts, "
                "summary_s FROM calls WHERE id = :id"), {"id": cid}).mappings().one())

    def call_ended(self, cid: str = "c1") -> list[dict]:
        with self.engine.connect() as c:
            bodies = c.execute(text("SELECT body FROM webhook_outbox WHERE call_id = :id AND "
                                    "type = 'call.ended'"), {"id": cid}).scalars()
            return [json.loads(b)["data"] for b in bodies]

    def close(self) -> None:
        self.summaries.close()
        self.writer.close()
        self.engine.dispose()


@pytest.fixture
def rig(tmp_path):
    rigs: list[Rig] = []

    def make(**kw) -> Rig:
        rigs.append(Rig(tmp_path, **kw))
        return rigs[-1]

    yield make
    for r in rigs:
        r.close()


def test_a_finished_call_gets_its_notes_stored_and_in_call_ended(rig):
    r = rig()
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()
    row = r.row()
    assert row["summary"] == NOTES["summary"] and row["summary_attempts"] == 1
    assert json.loads(row["extracted"]) == {"caller_name": "Ana Ruiz", "reason": "a late order"}
    assert row["summary_detail"] is None and row["summary_s"] is not None
    assert wait_until(lambda: r.call_ended(), timeout=5)
    (ended,) = r.call_ended()  # one event, sent once the notes were made
    assert ended["summary_state"] == "done" and ended["summary"] == NOTES["summary"]
    assert ended["extracted"] == {"caller_name": "Ana Ruiz", "reason": "a late order"}
    assert ended["end_reason"] == "caller-bye" and ended["turns"] == 1
    # What the LLM was asked: the call's words, and the keys.
    (asked,) = r.llm.prompts
    assert "Caller: Hi, this is Ana Ruiz, my order is late." in asked[1].content
    assert "- reason: why they called" in asked[1].content


def test_the_job_waits_while_calls_are_up_under_load_and_catches_up(rig):
    r = rig()
    other_call = OtherCall()
    r.load.backlog.join(other_call)
    ticket, _ = r.load.backlog.enter(other_call)  # its turn waits for its first audio
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.summaries.stats["postponed"] == 1, timeout=5)
    assert not wait_until(lambda: r.llm.prompts, timeout=1.5)  # nothing asked under load
    assert r.row()["summary_state"] == "pending" and r.row()["summary_attempts"] == 0
    assert r.call_ended() == []  # call.ended waits for the notes
    r.load.backlog.leave(ticket)
    # The call is still up, quiet: the fake's whole prompt is one job (no short steps), so a
    # caller of the call up could wait on it: still nothing.
    assert not wait_until(lambda: r.llm.prompts, timeout=1.0)
    r.load.backlog.part(other_call)  # the last call ended: caught up
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()
    assert wait_until(lambda: r.call_ended(), timeout=5)
    assert r.call_ended()[0]["summary"] == NOTES["summary"]


def test_with_short_steps_a_quiet_call_up_does_not_hold_it_back(rig):
    r = rig()
    r.llm.reads_in_short_steps = True  # as llama-batch: its prompt a few tokens a step
    other_call = OtherCall()
    r.load.backlog.join(other_call)
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()
    r.load.backlog.speaking(other_call, True)  # its caller speaks: the next one waits
    r.call("c2")
    assert wait_until(lambda: r.summaries.stats["postponed"] == 1, timeout=5)
    assert r.row("c2")["summary_state"] == "pending"
    r.load.backlog.speaking(other_call, False)
    assert wait_until(lambda: r.row("c2")["summary_state"] == "done", timeout=10)


def test_calls_that_need_its_llm_context_cancel_it_and_it_is_made_again(rig):
    r = rig(token_s=0.2)  # 20 words: 4 s of reply
    r.llm.reply = " ".join([r.llm.reply] + ["x"] * 20)
    r.llm.reads_in_short_steps = True
    r.llm.options = LLMOptions(contexts=1, n_ctx=2048)
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.llm.prompts, timeout=5)
    caller = OtherCall()
    r.load.backlog.join(caller)  # the one context is wanted by a call
    assert wait_until(lambda: r.summaries.stats["cancelled"] == 1, timeout=5)
    assert r.row()["summary_state"] == "pending" and r.row()["summary_attempts"] == 0
    r.llm.reply = json.dumps(NOTES)
    r.llm.token_s = 0.0
    r.load.backlog.part(caller)
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()
    assert r.row()["summary_attempts"] == 1 and len(r.llm.prompts) == 2


@pytest.mark.parametrize(("reply", "why"), [
    ("Sorry, I cannot help with that.", "no JSON object in the reply"),
    ('{"summary": "Ana called about', "the JSON object is cut off"),
    ('{"caller_name": "Ana"}', "no summary in the reply"),
])
def test_a_malformed_reply_is_recorded_failed_with_the_reason(rig, reply, why):
    r = rig(reply=reply)
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.row()["summary_state"] == "failed", timeout=10), r.row()
    row = r.row()
    assert row["summary_detail"].startswith(why) and row["summary"] is None
    assert row["extracted"] is None
    assert wait_until(lambda: r.call_ended(), timeout=5)
    ended = r.call_ended()[0]
    assert ended["summary_state"] == "failed" and ended["summary_detail"].startswith(why)
    assert r.summaries.stats == {"done": 0, "failed": 1, "postponed": 0, "cancelled": 0}


def test_an_llm_that_raises_is_tried_again_then_recorded_failed(rig, monkeypatch):
    monkeypatch.setattr("agent.summary.runner.RETRY_S", 0.1)
    r = rig()
    r.llm.fail_with = RuntimeError("LLM server down")
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.row()["summary_state"] == "failed", timeout=10), r.row()
    assert r.llm.calls == 3 and r.row()["summary_attempts"] == 3
    assert r.row()["summary_detail"].startswith("the LLM failed 3 times, last: RuntimeError")


def test_a_pending_summary_from_before_a_restart_is_made_at_start(rig):
    r = rig()
    r.call()  # marked pending; no summarizer ran (the process stopped)
    assert r.row()["summary_state"] == "pending" and r.call_ended() == []
    r.summaries.start()
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()


def test_tries_that_killed_the_process_are_given_up(rig):
    r = rig()
    r.call()
    with r.engine.begin() as c:  # three claimed tries, none ended
        c.execute(text("UPDATE calls SET summary_attempts = 3"))
    r.summaries.start()
    assert wait_until(lambda: r.row()["summary_state"] == "failed", timeout=10), r.row()
    assert r.row()["summary_detail"].startswith("given up after 3 tries")
    assert r.llm.prompts == []


def test_call_ended_goes_without_the_notes_once_its_wait_runs_out(rig):
    r = rig(wait_s=0.5)
    other_call = OtherCall()
    r.load.backlog.join(other_call)
    r.summaries.start()
    r.call()
    assert wait_until(lambda: r.call_ended(), timeout=5)
    ended = r.call_ended()
    assert [e["summary_state"] for e in ended] == ["pending"] and ended[0]["summary"] is None
    r.load.backlog.part(other_call)
    assert wait_until(lambda: r.row()["summary_state"] == "done", timeout=10), r.row()
    assert len(r.call_ended()) == 1  # the event went once; the notes are in the call log


def test_a_profile_without_notes_sends_call_ended_at_once(rig):
    r = rig()
    r.summaries.profiles["p"] = Profile(name="p")
    r.call()
    assert r.row()["summary_state"] is None
    (ended,) = r.call_ended()
    assert ended["summary_state"] is None and ended["extracted"] is None


def test_report_call_shows_the_notes_or_where_they_stand(rig, capsys):
    from agent.cli.main import main

    r = rig(reply="not the notes")
    r.call("c1")  # pending: no summarizer ran yet
    assert main(["report", "--call", "c1", "--db", r.url]) == 0
    assert "Summary: pending (made in the background after the call; 0 tries)" in " ".join(
        capsys.readouterr().out.split())
    r.summaries.start()
    assert wait_until(lambda: r.row()["summary_state"] == "failed", timeout=10)
    assert main(["report", "--call", "c1", "--db", r.url]) == 0
    assert "Summary: failed (1 try): no JSON object in the reply" in " ".join(
        capsys.readouterr().out.split())
    r.llm.reply = json.dumps(NOTES)
    r.call("c2")
    assert wait_until(lambda: r.row("c2")["summary_state"] == "done", timeout=10)
    assert main(["report", "--call", "c2", "--db", r.url, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)["summary"]
    assert shown["state"] == "done" and shown["summary"] == NOTES["summary"]
    assert shown["fields"] == {"caller_name": "Ana Ruiz", "reason": "a late order"}
    assert main(["report", "--call", "c2", "--db", r.url]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Summary (" in out and NOTES["summary"] in out
    assert "caller_name: Ana Ruiz" in out and "reason: a late order" in out
