"""``callagent campaign``: 12 numbers against sipp callees, killed halfway and restarted.

Four sipp callees, one per kind of line, each serving many calls (``tests/sipp/``):
people who answer ``Hello?`` and wait for the agent's BYE (``uas_campaign_answer.xml``),
voicemail boxes (the same scenario with a greeting and a beep), a busy line (486,
``uas_campaign_busy.xml``) and one that rings until cancelled (``uas_campaign_ring.xml``). The
campaign runs 2 calls at once with AMD on, one retry for busy and no-answer, and is SIGKILLed
once 5 rows are done; the same command then finishes it. Every INVITE sipp received is
counted per callee (``-trace_msg``): no number gets more calls than its recorded attempts,
and only busy and no-answer rows get a second one.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest
from sipp.harness import ROOT
from test_sip_amd import voicemail_greeting

from testkit.agentproc import free_port
from testkit.wire import scenario, spoken_ulaw
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.slow]

KINDS = {"answer": 4, "voicemail": 3, "busy": 3, "ring": 2}
EXPECTED = {"answer": ("answered", 1), "voicemail": ("voicemail", 1), "busy": ("busy", 2),
            "ring": ("no-answer", 2)}
"""Each kind's outcome and its calls (retries = 1) when no kill interrupts it."""

CONFIG = """
[db]
url = "sqlite:///{db}"
spool_dir = "{spool}"
[campaigns]
concurrency = 2
retries = 1
retry_delay_s = 3
ring_timeout_s = 4
[profiles.out]
greeting = "Hello {{name}}, this is the library."
amd = true
amd_max_s = 8.0
voicemail_message = "Hello {{name}}, your reserved book is ready. Goodbye."
limits = {{ max_silence_s = 3.0, max_call_s = 30.0 }}
llm = {{ model = "smollm2-135m", max_tokens = 20, threads = 1 }}
asr = {{ model = "tiny.en" }}
"""


def start_callee(kind: str, audio: str | None, tmp_path) -> tuple[subprocess.Popen, int]:
    name = "answer" if kind in ("answer", "voicemail") else kind
    xml = scenario(ROOT / f"tests/sipp/uas_campaign_{name}.xml", tmp_path / f"{kind}.xml",
                   audio=audio or "")
    port = free_port()
    proc = subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(port),
         "-mp", str(free_port()), "-nostdin", "-trace_msg",
         "-message_file", str(tmp_path / f"{kind}.msg")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def invites(path) -> Counter:
    """INVITEs sipp received, per request-URI user, by distinct Call-ID (not retransmits)."""
    seen: set[tuple[str, str]] = set()
    for block in path.read_text(errors="replace").split("message received")[1:]:
        m = re.search(r"^\s*INVITE sip:([^@\s]+)@", block, re.M)
        cid = re.search(r"^Call-ID:\s*(\S+)", block, re.M | re.I)
        if m and cid:
            seen.add((m.group(1), cid.group(1)))
    return Counter(user for user, _ in seen)


def campaign(csv, config, port: int, rtp_port: int) -> list[str]:
    return [sys.executable, "-m", "agent.cli.main", "campaign", str(csv), "--config",
            str(config), "--profile", "out", "--port", str(port), "--rtp-port", str(rtp_port)]


def done_rows(db) -> int:
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT count(*) FROM campaign_rows WHERE status = 'done'"
                               ).fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.needs("sipp", "espeak-ng", "sox")
def test_campaign_outcomes_retries_and_a_kill_that_calls_no_one_twice(tmp_path):
    db = tmp_path / "calls.db"
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(db=db, spool=tmp_path / "spool"))
    person = str(spoken_ulaw("Hello?", tmp_path / "hello.ulaw", lead_s=0.3, tail_s=25.0))
    box, _ = voicemail_greeting(tmp_path)
    audio = {"answer": person, "voicemail": box}
    callees = {k: start_callee(k, audio.get(k), tmp_path) for k in KINDS}
    lines = ["number,name"]
    for kind, n in KINDS.items():
        port = callees[kind][1]
        lines += [f"sip:{kind}{i}@127.0.0.1:{port},{kind.title()} {i}" for i in range(n)]
    csv = tmp_path / "list.csv"
    csv.write_text("\n".join(lines) + "\n")
    sip_port = free_port()
    try:
        with open(tmp_path / "run1.log", "w") as log1:
            first = subprocess.Popen(campaign(csv, config, sip_port, 30000 + sip_port % 200 * 100),
                                     cwd=ROOT, stdout=log1, stderr=log1)
            t0 = time.monotonic()
            halfway = wait_until(lambda: done_rows(db) >= 5 or first.poll() is not None,
                                 timeout=300, every=0.2)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        killed_at_s, done_at_kill = time.monotonic() - t0, done_rows(db)
        assert halfway and done_at_kill < 12, (tmp_path / "run1.log").read_text()[-3000:]
        second = subprocess.run(campaign(csv, config, sip_port, 50000 + sip_port % 100 * 100),
                                cwd=ROOT, capture_output=True, text=True, timeout=400)
        assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-4000:]
    finally:
        for proc, _ in callees.values():
            proc.send_signal(signal.SIGINT)
        for proc, _ in callees.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    got = Counter()
    for kind in KINDS:
        got.update(invites(tmp_path / f"{kind}.msg"))
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT uri, status, outcome, detail, attempts FROM campaign_rows "
                           "ORDER BY line").fetchall()
        called = dict(con.execute(
            "SELECT r.uri, count(a.call_id) FROM campaign_rows r JOIN campaign_attempts a "
            "ON a.row_id = r.id GROUP BY r.uri").fetchall())
        logged = Counter(uri for (uri,) in con.execute("SELECT caller_uri FROM calls"))
    print(f"killed {killed_at_s:.1f} s in with {done_at_kill} rows done; rows: {rows}")
    interrupted = 0
    for uri, status, outcome, detail, attempts in rows:
        user = uri.split(":")[1].split("@")[0]
        kind = user.rstrip("0123456789")
        assert status == "done", (uri, status)
        # Never more INVITEs than attempts with a call id, and the call log agrees.
        assert got[user] <= called.get(uri, 0) == attempts, (uri, got[user], called, attempts)
        if detail == "interrupted":  # the kill cut this call: one attempt, never repeated
            interrupted += 1
            assert attempts == 1 and got[user] <= 1, (uri, attempts, got[user])
            assert outcome in ("failed", "answered"), (uri, outcome)
        else:
            assert (outcome, attempts) == EXPECTED[kind], (uri, outcome, attempts, detail)
            assert got[user] == attempts == logged[uri], (uri, got[user], attempts, logged)
    print(f"interrupted rows: {interrupted}; INVITEs per callee: {dict(got)}")
