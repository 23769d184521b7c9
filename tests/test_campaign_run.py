"""A campaign's scheduler against a stand-in server and a real SQLite call log, on a fake clock.

The stand-in's calls follow a script per number (busy, ring, answer, voicemail); the clock
moves only when the scheduler waits for SIP events. Covers concurrency, the ring timeout,
retries, the machine's call slots shared with another process's calls (real lock files), and
the resume rule after a kill at every stage of an attempt.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import re
import tempfile
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import insert

from agent.campaign.outcome import call_outcome, resumed
from agent.campaign.runner import CampaignRunner
from agent.cli import campaign as cmd
from agent.sip.slots import SlotSet
from db import campaigns as store
from db.migrate import make_engine, upgrade
from db.schema import Call
from dialplan import ConfigError, parse_config
from dialplan.campaign import CampaignOptions, CampaignRow

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
SCRIPT = {  # what the callee does: (answered after s or None, ends after s, end reason)
    "answer": (0.5, 6.0, "caller-bye"),
    "busy": (None, 0.2, "unanswered-486"),
    "ring": (None, None, ""),
    "declined": (None, 0.3, "unanswered-603"),
    "voicemail": (0.5, 9.0, "voicemail"),
}


class Killed(BaseException):
    """Stands in for SIGKILL: the scheduler stops where it is, nothing cleans up."""


class Clock:
    def __init__(self):
        self.t = 0.0

    def wall(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def mono(self) -> float:
        return self.t


class FakeSession:
    def __init__(self, call_id: str, kind: str, at: float):
        self.call_id, self.kind, self.at = call_id, kind, at
        self.codec, self.end_reason, self.ended = "", "", False

    def advance(self, now: float) -> None:
        answer_s, end_s, reason = SCRIPT[self.kind]
        if not self.ended and answer_s is not None and now - self.at >= answer_s:
            self.codec = "PCMU"
        if not self.ended and end_s is not None and now - self.at >= end_s:
            self.end_reason, self.ended = self.end_reason or reason, True

    def shutdown(self, reason: str = "shutdown") -> None:
        self.end_reason, self.ended = self.end_reason or reason, True

    def join(self, timeout=None) -> bool:
        return self.ended


class FakeServer:
    def __init__(self, clock: Clock, invites: Counter, max_calls: int = 4,
                 kill_after: int | None = None, kill_in: str = "", slots: SlotSet | None = None):
        self.config = SimpleNamespace(sip=SimpleNamespace(max_calls=max_calls))
        self.slots = slots or SlotSet(tempfile.mkdtemp(prefix="slots-"), max_calls)
        self.held: dict[str, object] = {}  # call id -> its slot, freed when the call ends
        self.spoken: list[str] = []  # phrases synthesised ahead (a list: thread-safe appends)
        self.forgotten: list[str] = []
        speaker = SimpleNamespace(speak=self.spoken.append, forget=self.forgotten.append)
        self.profiles = SimpleNamespace(runner=lambda profile: speaker)
        self.clock, self.invites, self.sessions = clock, invites, []
        self.kill_after, self.kill_in = kill_after, kill_in
        self.peak = 0
        self._ids = itertools.count(len(invites) + sum(invites.values()) * 100)

    def dial(self, uri, profile, say_first, before_invite, slot):
        assert slot.held  # the runner took it before dialling
        call_id = f"c{next(self._ids)}"
        if self.kill_in == "before-call-id" and self._due_kill():
            raise Killed
        before_invite(call_id)
        if self.kill_in == "before-invite" and self._due_kill():
            raise Killed
        self.invites[uri] += 1
        s = FakeSession(call_id, uri.split(":")[1].split("-")[0], self.clock.t)
        s.greeting = say_first
        self.sessions.append(s)
        self.held[call_id] = slot
        return s

    def _due_kill(self) -> bool:
        return self.kill_after is not None and sum(self.invites.values()) >= self.kill_after

    def step(self, timeout: float) -> None:
        if self.kill_in == "mid-call" and self._due_kill():
            raise Killed
        self.clock.t += timeout
        for s in self.sessions:
            s.advance(self.clock.t)
            if s.ended and s.call_id in self.held:  # as Server._drop does
                self.held.pop(s.call_id).release()
        self.peak = max(self.peak, sum(not s.ended for s in self.sessions))


def rows(*kinds: str) -> list[CampaignRow]:
    return [CampaignRow(i + 2, f"sip:{k}-{i}@h", f"sip:{k}-{i}@h", "UTC", {"name": f"N{i}"})
            for i, k in enumerate(kinds)]


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    upgrade(url)
    e = make_engine(url)
    yield e
    e.dispose()


def runner(engine, server, clock, options, name="c1"):
    profile = parse_config({"profiles": {"out": {"greeting": "Hello {name}."}}}).profiles["out"]
    return CampaignRunner(server, engine, name, profile, options, threading.Event(),
                          clock=clock.wall, monotonic=clock.mono)


def test_outcomes_concurrency_ring_timeout_and_retries(engine):
    clock, invites = Clock(), Counter()
    kinds = ("answer", "busy", "ring", "voicemail", "declined", "answer")
    store.open_campaign(engine, "c1", "x.csv", "h", "out", rows(*kinds), clock.wall())
    server = FakeServer(clock, invites)
    opts = CampaignOptions(concurrency=2, retries=1, retry_delay_s=30, ring_timeout_s=5)
    summary = runner(engine, server, clock, opts).run()
    assert summary.finished
    got = {line: outcome for line, outcome in
           [(a[0], (a[1], a[3], a[4])) for a in store.attempts_of(engine, "c1")]}
    assert got == {2: (1, "answered", "caller-bye"), 3: (2, "busy", "sip-486"),
                   4: (2, "no-answer", "ring-timeout"), 5: (1, "voicemail", ""),
                   6: (1, "refused", "sip-603"), 7: (1, "answered", "caller-bye")}
    assert dict(invites) == {"sip:answer-0@h": 1, "sip:busy-1@h": 2, "sip:ring-2@h": 2,
                             "sip:voicemail-3@h": 1, "sip:declined-4@h": 1, "sip:answer-5@h": 1}
    assert server.peak == 2
    assert server.sessions[0].greeting == "Hello N0."  # the row's variables, per call
    assert server.spoken[:2] == ["Hello N0.", "Hello N1."]  # synthesised before the dial
    # Each row's own greeting leaves the cache after each call (N1 and N2 were retried).
    assert sorted(t for t in server.forgotten if t) == sorted(
        [f"Hello N{i}." for i in range(6)] + ["Hello N1.", "Hello N2."])
    (st,) = store.campaign_status(engine, "c1")
    assert (st.rows, st.pending, st.dialing, st.attempts) == (6, 0, 0, 8)
    assert dict(st.outcomes) == {"answered": 2, "busy": 1, "no-answer": 1, "voicemail": 1,
                                 "refused": 1}
    assert st.finished_at is not None
    # The busy row's second call came a retry delay after the first ended.
    busy = [s for s in server.sessions if s.kind == "busy"]
    assert busy[1].at - (busy[0].at + 0.2) == pytest.approx(30, abs=0.2)


def test_another_processes_calls_hold_the_machines_slots_and_the_campaign_waits(
        engine, tmp_path, caplog):
    clock, invites = Clock(), Counter()
    store.open_campaign(engine, "c1", "x.csv", "h", "out", rows("answer", "answer", "answer"),
                        clock.wall())
    # serve's two callers, still talking: slots of the same directory, taken elsewhere.
    serve = SlotSet(tmp_path / "slots", 3)
    callers = [serve.take("in1"), serve.take("in2")]
    server = FakeServer(clock, invites, max_calls=3, slots=SlotSet(tmp_path / "slots", 3))
    r = runner(engine, server, clock, CampaignOptions(concurrency=2))
    step = server.step

    def step_and_end_them(timeout):  # the callers hang up 3 s in
        step(timeout)
        if clock.t >= 3.0 and callers:
            callers.pop().release()
            callers.pop().release()
    server.step = step_and_end_them
    with caplog.at_level(logging.INFO, logger="callagent"):
        assert r.run().finished
    starts = [s.at for s in server.sessions]
    assert server.peak == 2  # the campaign's concurrency, once the callers had gone
    # One slot was left: the first call at once, the second once the callers' slots were
    # free (3 s), the third when the first call ended (6 s: concurrency 2).
    assert starts[0] < 1.0 and 3.0 <= starts[1] < 3.0 + 1.0 and 6.0 <= starts[2] < 7.0
    waits = [m for m in caplog.messages if "event=campaign-waiting" in m]
    assert len(waits) == 1 and "reason=no-free-slot" in waits[0]  # one line per wait
    # The wait starts once the row's greeting is synthesised (on a thread of its own: at the
    # fake clock's first or second tick) and ends at the dial.
    dial = next(m for m in caplog.messages if "event=campaign-dial" in m and "line=3" in m)
    waited = float(re.search(r"waited_s=([0-9.]+)", dial).group(1))
    assert 0.0 <= starts[1] - waited <= 1.0, dial
    # Waiting is not an attempt: one attempt per row, each answered.
    assert [(a[1], a[3]) for a in store.attempts_of(engine, "c1")] == [(1, "answered")] * 3
    # Every slot is free again: all three can be taken, a fourth cannot.
    again = [serve.take() for _ in range(4)]
    assert [s is not None for s in again] == [True, True, True, False]


@pytest.mark.parametrize("where", ["before-call-id", "before-invite", "mid-call"])
def test_a_kill_at_any_point_never_calls_a_number_twice(engine, where):
    clock, invites = Clock(), Counter()
    kinds = ("answer", "voicemail", "answer", "busy")
    store.open_campaign(engine, "c1", "x.csv", "h", "out", rows(*kinds), clock.wall())
    opts = CampaignOptions(concurrency=2, retries=1, retry_delay_s=10)
    with pytest.raises(Killed):
        runner(engine, FakeServer(clock, invites, kill_after=2, kill_in=where), clock, opts).run()
    before = Counter(invites)
    second = runner(engine, FakeServer(clock, invites), clock, opts)
    assert second.run().finished
    notes = dict(second.summary.resumed)
    got = {a[0]: (a[1], a[3], a[4]) for a in store.attempts_of(engine, "c1")}
    # Killed at the 3rd dial, 6 s in: line 3's voicemail call (9 s) is still in progress, and
    # nothing logged its end (the stand-in writes no call rows): interrupted.
    assert got[3] == (1, "failed", "interrupted")
    if where == "before-call-id":  # the 3rd attempt had no call id: dialled afresh
        assert notes == {3: "failed (interrupted)", 4: "not dialled: pending again"}
        assert got[4] == (1, "answered", "caller-bye")
    elif where == "before-invite":  # a call id, no call in the log: it might have rung
        assert notes == {3: "failed (interrupted)", 4: "failed (interrupted)"}
        assert got[4] == (1, "failed", "interrupted")
    else:  # killed during calls 1 and 2: no record of how they went
        assert notes == {2: "failed (interrupted)", 3: "failed (interrupted)"}
        assert got[2] == got[3] == (1, "failed", "interrupted")
    assert got[5] == (2, "busy", "sip-486")  # a row started after the restart still retries
    for uri, n in invites.items():
        assert n == (2 if "busy" in uri else 1), (uri, n, before)


def test_restart_takes_a_logged_calls_outcome():
    assert resumed(None, False, "", "", 0) is None
    assert resumed("c1", True, "voicemail", "PCMU", 0).outcome == "voicemail"
    assert resumed("c1", True, "unanswered-486", "", 0).outcome == "busy"
    assert resumed("c1", True, "caller-bye", "PCMU", 2).outcome == "answered"
    # Open (or closed lost by a supervisor): how it ended is unknown.
    assert resumed("c1", False, "", "", 0).detail == "interrupted"
    assert resumed("c1", True, "lost", "", 0).outcome == "failed"
    assert resumed("c1", False, "", "", 3).outcome == "answered"


def test_call_outcomes_by_end_reason():
    assert call_outcome("unanswered-480", False).outcome == "no-answer"
    assert call_outcome("unanswered-600", False).outcome == "busy"
    assert call_outcome("unanswered-403", False).outcome == "refused"
    assert call_outcome("unanswered-404", False) == call_outcome("unanswered-404", False)
    assert call_outcome("unanswered-404", False).detail == "sip-404"
    assert call_outcome("agent", True).outcome == "answered"
    assert call_outcome("shutdown", False).detail == "interrupted"


def test_a_logged_call_settles_its_row_on_restart(engine):
    clock, invites = Clock(), Counter()
    store.open_campaign(engine, "c1", "x.csv", "h", "out", rows("busy"), clock.wall())
    (row,) = store.due_rows(engine, "c1")
    attempt, _ = store.begin_attempt(engine, row.id, clock.wall())
    store.attach_call(engine, attempt, "c-old")
    with engine.begin() as conn:  # the call ended and its writer logged it; then the kill
        conn.execute(insert(Call).values(id="c-old", started_at=clock.wall(), caller_uri="x",
                                         ended_at=clock.wall(), end_reason="unanswered-486"))
    r = runner(engine, FakeServer(clock, invites), clock,
               CampaignOptions(retries=1, retry_delay_s=5))
    assert r.run().finished
    assert r.summary.resumed == [(2, "busy (sip-486) retry later")]
    assert [a[1:] for a in store.attempts_of(engine, "c1")] == [
        (1, "c-old", "busy", "sip-486"), (2, "c0", "busy", "sip-486")]


def test_status_command_prints_counts_pending_and_next_times(engine, tmp_path, capsys):
    clock = Clock()
    store.open_campaign(engine, "spring", "x.csv", "h", "out", rows("busy", "answer"),
                        clock.wall())
    (first, _) = store.due_rows(engine, "spring")
    attempt, _ = store.begin_attempt(engine, first.id, clock.wall())
    store.end_attempt(engine, attempt, "busy", "sip-486", clock.wall(),
                      clock.wall() + timedelta(minutes=10))
    parser = argparse.ArgumentParser()
    cmd.add_parser(parser.add_subparsers())
    url = str(engine.url)
    args = parser.parse_args(["campaign", "status", "spring", "--db", url, "--format", "json"])
    assert args.func(args) == 0
    (st,) = json.loads(capsys.readouterr().out)
    assert (st["rows"], st["pending"], st["attempts"], st["outcomes"]) == (2, 2, 1, {})
    assert [n["line"] for n in st["next"]] == [3, 2]  # due now first, then the retry
    assert st["next"][1]["at"].startswith("2026-12-02T12:10:00")
    args = parser.parse_args(["campaign", "status", "--db", url])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "spring" in out and "line 3 now" in out and "line 2 12-02 12:10:00" in out
    args = parser.parse_args(["campaign", "status", "autumn", "--db", url])
    assert args.func(args) == 1 and "no campaign 'autumn'" in capsys.readouterr().out


def test_flags_override_the_campaigns_table_and_are_checked():
    parser = argparse.ArgumentParser()
    cmd.add_parser(parser.add_subparsers())
    config = parse_config({"campaigns": {"retries": 2, "window": "09:00-17:00"}})
    args = parser.parse_args(["campaign", "x.csv", "--concurrency", "3", "--ring-timeout", "20",
                              "--retry-delay", "60"])
    opts = cmd.options_of(args, config)
    assert (opts.concurrency, opts.ring_timeout_s, opts.retry_delay_s, opts.retries,
            opts.window) == (3, 20.0, 60.0, 2, "09:00-17:00")
    args = parser.parse_args(["campaign", "x.csv", "--window", "9-5"])
    with pytest.raises(ConfigError, match="campaign flags: window = '9-5'"):
        cmd.options_of(args, config)


def test_a_forgotten_phrase_leaves_the_cache_and_the_profiles_own_stay():
    from fakes import fake_stages

    from agent.turn.runner import TurnRunner

    profile = parse_config({"profiles": {"out": {"greeting": "Hello {name}."}}}).profiles["out"]
    phrases = TurnRunner(fake_stages(), profile)
    phrases.prepare_phrases()
    own = phrases.speak("Hello Ann.")
    phrases.forget("Hello Ann.")
    phrases.forget(profile.goodbye)
    assert "Hello Ann." not in phrases._phrases and profile.goodbye in phrases._phrases
    assert phrases.speak("Hello Ann.") is not own  # synthesised again when asked again
