"""The soak's callers: what each one does (drawn from a seed), and one sipp process per call.

Each caller behaves at random: asks a spoken question and waits for the answer; hangs up
mid-question or mid-reply; talks over the agent with a second question 4-8 s after the first;
stays silent (quiet RTP) and hangs up; sends an RFC 2833 DTMF digit. A caller refused with 486
or 503 redials, like a person would. Before some calls a few INVITEs come from
:data:`UNAUTHORISED_FROM`, an address the soak's ``sip.allow`` leaves out: each should get 403.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.flood import flood_argv, flood_outcome
from models.audio import PHONE_RATE
from testkit.agentproc import free_port
from testkit.samples import QUESTIONS
from testkit.wire import scenario, spoken_ulaw

BEHAVIOURS = ("answer", "hangup-question", "hangup-reply", "talk-over", "silent", "dtmf")
SILENCE = b"\xff"  # μ-law digital silence
LEAD_S = 2.5  # the greeting plays first
WAIT_S = 10.0  # after a question, for the reply
EXTENSION = "101"
REDIALS = 4  # after 1, 2, 4 and 8 s
REDIAL_S = 1.0
ALLOWED_FROM = "127.0.0.1"
"""The callers' address, the only one the soak's ``sip.allow`` lets in."""
UNAUTHORISED_FROM = "127.0.0.2"
"""Loopback too, but outside ``sip.allow``: its INVITEs should get 403 before any media."""


# ---- callers ------------------------------------------------------------------------------------

@dataclass
class Plan:
    """One caller: what it does, the audio it streams and when it hangs up."""

    n: int
    behaviour: str
    question: str
    hold_ms: int
    audio: Path | None = None
    digit: str = ""
    malformed: int = 0
    unauthorised: int = 0
    """INVITEs from :data:`UNAUTHORISED_FROM` just before the call."""


def _silence(s: float) -> bytes:
    return SILENCE * int(s * PHONE_RATE)


def plan_calls(n: int, seed: int, work: Path, port: int) -> list[Plan]:
    """The callers, drawn from ``seed`` (the audio files are made here, once per question)."""
    rng = random.Random(seed)
    # Its own stream: the callers a seed draws are those it drew before this was added.
    gate_rng = random.Random(f"unauthorised {seed}")
    spoken = {}
    for i, q in enumerate(QUESTIONS):
        spoken[q] = spoken_ulaw(q, work / f"q{i}.ulaw", lead_s=0, tail_s=0).read_bytes()
    plans = []
    for i in range(n):
        behaviour = rng.choice(BEHAVIOURS)
        q = rng.choice(QUESTIONS)
        qs = len(spoken[q]) / PHONE_RATE
        audio = _silence(LEAD_S) + spoken[q] + _silence(WAIT_S)
        p = Plan(i, behaviour, q, int(len(audio) / PHONE_RATE * 1000))
        if behaviour == "hangup-question":
            p.hold_ms = int((LEAD_S + rng.uniform(0.3, 0.8) * qs) * 1000)
        elif behaviour == "hangup-reply":
            p.hold_ms = int((LEAD_S + qs + rng.uniform(1.5, 3.0)) * 1000)
        elif behaviour == "talk-over":
            q2 = rng.choice([x for x in QUESTIONS if x != q])
            p.question = f"{q} / {q2}"
            audio = (_silence(LEAD_S) + spoken[q] + _silence(rng.uniform(4.0, 8.0))
                     + spoken[q2] + _silence(WAIT_S))
            p.hold_ms = int(len(audio) / PHONE_RATE * 1000)
        elif behaviour == "silent":
            p.question = ""
            audio = _silence(rng.uniform(3, 8))
            p.hold_ms = int(len(audio) / PHONE_RATE * 1000)
        elif behaviour == "dtmf":
            p.question, p.digit = "", rng.choice("0123456789")
            p.hold_ms = 3000
        if behaviour != "dtmf":
            p.audio = work / f"call{i}.ulaw"
            p.audio.write_bytes(audio)
        if rng.random() < 0.25:
            p.malformed = rng.randint(1, 3)
        if gate_rng.random() < 0.25:
            p.unauthorised = gate_rng.randint(1, 3)
        plans.append(p)
    return plans


@dataclass
class Outcome:
    n: int
    behaviour: str
    placed: bool = False
    answered: bool = False
    rc: int | None = None
    status: int | None = None
    seconds: float = 0.0
    refused: list[int] = field(default_factory=list)
    """486/503 answers before the last attempt (the caller redialled after each)."""


def final_status(message_log: Path) -> int | None:
    """The final response to the INVITE in sipp's message log (200, 486, 503...), or None."""
    if not message_log.exists():
        return None
    for msg in message_log.read_text(errors="replace").split("message received")[1:]:
        m = re.search(r"^\s*SIP/2\.0 (\d{3})", msg, re.M)
        if m and int(m.group(1)) >= 200 and re.search(r"CSeq:\s*1 INVITE", msg):
            return int(m.group(1))
    return None


def place(plan: Plan, work: Path, port: int, media_port: int, deadline: float) -> Outcome:
    """Run one caller, redialling after a busy (486) or overload (503) answer like a person.

    Without redial a slot's next call raced the agent's teardown of its last one, and most of
    a soak's calls were refused with 486 (bench soak); the refusals are still counted.
    """
    out = Outcome(plan.n, plan.behaviour)
    for attempt in range(REDIALS + 1):
        if time.monotonic() > deadline:
            return out
        _dial(plan, work, port, media_port, out, attempt)
        if out.status not in (486, 503) or attempt == REDIALS:
            return out
        out.refused.append(out.status)
        time.sleep(REDIAL_S * 2 ** attempt)
    return out


def _dial(plan: Plan, work: Path, port: int, media_port: int, out: Outcome,
          attempt: int) -> None:
    if plan.behaviour == "dtmf":
        xml = scenario("uac_dtmf", work / f"call{plan.n}.xml", hold_ms=plan.hold_ms,
                       pcap=f"/usr/share/sip-tester/dtmf_2833_{plan.digit}.pcap")
    else:
        xml = scenario("uac_stream", work / f"call{plan.n}.xml", audio=plan.audio,
                       hold_ms=plan.hold_ms)
    msg_log = work / f"call{plan.n}.{attempt}.messages.log"
    timeout_s = plan.hold_ms / 1000 + 30
    cmd = ["sipp", "-sf", str(xml), "-s", EXTENSION, f"127.0.0.1:{port}", "-i", "127.0.0.1",
           "-mi", "127.0.0.1", "-p", str(free_port()), "-mp", str(media_port), "-m", "1",
           "-nostdin", "-timeout", f"{int(timeout_s)}s", "-timeout_error", "-trace_err",
           "-error_file", str(xml.with_suffix(".err")), "-trace_msg", "-message_file",
           str(msg_log)]
    started = time.monotonic()
    out.placed = True
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 15)
        out.rc = res.returncode
    except subprocess.TimeoutExpired:
        out.rc = -1
    out.seconds = time.monotonic() - started
    out.status = final_status(msg_log)
    out.answered = out.status == 200


def send_unauthorised(plan: Plan, work: Path, port: int) -> tuple[int, dict[int, int], int]:
    """``plan.unauthorised`` INVITEs from :data:`UNAUTHORISED_FROM` within a second (sipp).

    Few enough for the source's ``sip.invite_rate`` bucket, so the gate's answer is the allow
    list's 403, not the rate's 503.

    Returns:
        (INVITEs sent, final answers by SIP status, INVITEs never answered).
    """
    xml = scenario("uac_reject", work / f"unauthorised{plan.n}.xml", code=403)
    argv = flood_argv(xml, port, plan.unauthorised, 1.0, source=UNAUTHORISED_FROM)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=40)
    except subprocess.TimeoutExpired:
        return plan.unauthorised, {}, plan.unauthorised
    (work / f"unauthorised{plan.n}.out").write_text(res.stdout + res.stderr)
    sent, answers, unanswered = flood_outcome(res.stdout, xml, expected=403)
    if sent == 0:  # sipp did not run its calls (no summary): none of them was answered
        return plan.unauthorised, answers, plan.unauthorised
    return sent, answers, unanswered
