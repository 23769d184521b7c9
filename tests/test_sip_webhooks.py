"""Webhooks end to end: 4 real sipp calls to ``callagent serve``, its receiver down, then failing.

The receiver (:mod:`webhook_receiver`, on 127.0.0.1) refuses connections for the first 30 s,
which the calls fit in, then answers 500 twice, then 200: every event of the 4 calls must
reach it exactly once by event id, signed. The same 4 calls then go to an agent without
webhooks, and both runs' voice-to-voice (the call log's, per answered turn) are printed: the
issue asks for them within 10 % of each other.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from sipp.harness import AgentProcess, start_agent
from webhook_receiver import Receiver

from testkit.agentproc import caller_media, free_port
from testkit.samples import QUESTION
from testkit.wire import scenario, sipp_argv, spoken_ulaw
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.server,
              pytest.mark.slow, pytest.mark.needs("sipp", "espeak-ng", "sox")]

SECRET = "4-calls-s3cret"
PROFILES = """
[profiles.fast]
greeting = "Hello, quick assistant here."
llm = { model = "smollm2-135m", max_tokens = 40, threads = 1 }
asr = { initial_prompt = "A caller phones the public library with a question." }
"""
CALLS = 4
HOLD_S = 20.0


def place_calls(agent: AgentProcess, audio: Path, tmp: Path) -> set[str]:
    """4 simultaneous calls, one sipp each, each asking the question; the new calls' ids."""
    before = {cid for (cid,) in agent.query("SELECT id FROM calls")}
    media = caller_media(CALLS, agent.rtp_ports)
    procs = []
    for i in range(CALLS):
        xml = scenario("uac_stream", tmp / f"call{i}.xml", audio=audio,
                       hold_ms=int(HOLD_S * 1000))
        procs.append(subprocess.Popen(
            sipp_argv(xml, "101", agent.port, free_port(), media[i], timeout_s=HOLD_S + 40),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    assert [p.wait(HOLD_S + 60) for p in procs] == [0] * CALLS

    def ended() -> set[str]:
        return {cid for cid, end in agent.query("SELECT id, ended_at FROM calls")
                if cid not in before and end}

    assert wait_until(lambda: len(ended()) == CALLS, timeout=20)
    return ended()


def voice_to_voice(agent: AgentProcess, calls: set[str]) -> list[float]:
    rows = agent.query("SELECT call_id, voice_to_voice_s FROM turns WHERE unanswered = '' "
                       "AND voice_to_voice_s IS NOT NULL")
    return [v for cid, v in rows if cid in calls]


def test_every_event_of_four_calls_arrives_once_through_an_outage(tmp_path):
    audio = spoken_ulaw(QUESTION, tmp_path / "question.ulaw", lead_s=3.0, tail_s=HOLD_S)
    key = tmp_path / "hook.key"
    key.write_text(SECRET + "\n")
    receiver = Receiver(SECRET, down_s=30.0, fail=2)  # bound now, listening 30 s after `with`
    hook = (f'[[webhooks]]\nurl = "{receiver.url}"\nsecret = "file:{key}"\n'
            "backoff_s = 1.0\nbackoff_max_s = 4.0\n")
    (tmp_path / "with").mkdir()
    agent = start_agent(tmp_path / "with", PROFILES + hook, '"101" = "fast"')
    try:
        with receiver:
            started = time.time()
            calls = place_calls(agent, audio, tmp_path)
            calls_s = time.time() - started

            def outbox() -> list[tuple]:
                return agent.query("SELECT event_id, type, call_id, status, attempts, "
                                   "last_status FROM webhook_outbox ORDER BY id")

            assert wait_until(lambda: outbox() and {r[3] for r in outbox()} == {"delivered"},
                              timeout=120), (outbox(), receiver.received[-5:])
            time.sleep(3)  # a duplicate would come within the poll interval
    finally:
        assert agent.stop() == 0, agent.log_text()[-2000:]
    rows = outbox()
    assert {cid for _, _, cid, *_ in rows} == calls
    for cid in calls:
        kinds = Counter(kind for _, kind, c, *_ in rows if c == cid)
        assert kinds["call.started"] == kinds["call.ended"] == 1 and kinds["turn"] >= 1, kinds
    accepted = Counter(r.event_id for r in receiver.accepted())
    assert set(accepted) == {r[0] for r in rows} and set(accepted.values()) == {1}
    assert all(r.signed for r in receiver.received)
    assert [r.answered for r in receiver.received[:3]] == [500, 500, 200]
    assert receiver.received[0].at >= receiver.up_at
    with_hooks = voice_to_voice(agent, calls)

    (tmp_path / "without").mkdir()
    plain = start_agent(tmp_path / "without", PROFILES, '"101" = "fast"')
    try:
        without = voice_to_voice(plain, place_calls(plain, audio, tmp_path))
    finally:
        assert plain.stop() == 0, plain.log_text()[-2000:]
    # A measurement, not a check: on 2 shared cores a reply may come after the caller's BYE.
    if not with_hooks or not without:
        print(f"voice-to-voice not measured: answered turns {with_hooks} and {without}")
        return
    p50 = statistics.median(with_hooks), statistics.median(without)
    print(f"voice-to-voice p50 of {CALLS} calls: with webhooks {p50[0] * 1000:.0f} ms "
          f"(turns {[round(v * 1000) for v in with_hooks]}), without {p50[1] * 1000:.0f} ms "
          f"(turns {[round(v * 1000) for v in without]}): {100 * (p50[0] / p50[1] - 1):+.1f} %; "
          f"{len(rows)} events, {sum(r[4] for r in rows)} tries; the calls took {calls_s:.0f} s, "
          f"the receiver came up {receiver.up_at - started:.0f} s in")
