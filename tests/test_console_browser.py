"""The live console in headless Chromium while a real sipp call is up against ``callagent serve``.

Chromium (Debian's, driven by Debian's chromium-driver through Selenium) watches the live page
while sipp asks the agent a question over RTP. The page's script notes when each line appeared
(``window.consoleShown``) and when a call left the list (``window.consoleGone``); the test
compares those with the agent's own stamps and sipp's: the caller's words and the agent's
reply must be on the page within 2 s of the turn, and the call must leave the list within 2 s
of its BYE. Then the call's page plays its recording, whose length the audio element must
report as the call's.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from sipp.harness import start_agent

from testkit.agentproc import free_block, free_port
from testkit.samples import QUESTION
from testkit.wire import scenario, sipp_argv, spoken_ulaw
from tests.needs import require_module
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.server,
              pytest.mark.needs("sipp", "espeak-ng", "sox", "chromium", "chromedriver")]

HOLD_S = 20.0
WITHIN_S = 2.0
PROFILES = """
[console]
enabled = true
port = {port}
[profiles.fast]
greeting = "Hello, quick assistant here."
recording = "stereo"
llm = {{ model = "smollm2-135m", max_tokens = 40, threads = 1 }}
asr = {{ initial_prompt = "A caller phones the public library with a question." }}
"""


def chromium():
    """Headless Chromium under chromium-driver (no download: Debian's binaries, by path)."""
    webdriver = require_module("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--autoplay-policy=no-user-gesture-required", "--mute-audio"):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service("/usr/bin/chromedriver"))


def bye_sent_at(trace: Path) -> float:
    """Unix time sipp sent its BYE, from its ``-trace_msg`` file (local time stamps)."""
    text = trace.read_text(errors="replace")
    stamps = re.finditer(r"-{20,} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\s+\S+ message sent[^\n]*"
                         r"\n+\s*BYE ", text)
    stamp = next(stamps).group(1)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def test_live_page_follows_a_call_and_its_recording_plays(tmp_path):
    audio = spoken_ulaw(QUESTION, tmp_path / "question.ulaw", lead_s=3.0, tail_s=HOLD_S)
    port = free_block(1, socket.SOCK_STREAM)
    agent = start_agent(tmp_path, PROFILES.format(port=port), '"101" = "fast"')
    url = f"http://127.0.0.1:{port}"
    browser = None
    try:
        assert agent.events("console-listening"), agent.log_text()[-2000:]
        browser = chromium()
        browser.get(url + "/")
        assert wait_until(lambda: browser.find_element("id", "stream").text == "live", 15)

        xml = scenario("uac_stream", tmp_path / "call.xml", audio=audio,
                       hold_ms=int(HOLD_S * 1000))
        trace = tmp_path / "sipp_messages.log"
        argv = sipp_argv(xml, "101", agent.port, free_port(), free_block(4),
                         timeout_s=HOLD_S + 40)
        sipp = subprocess.Popen(argv + ["-trace_msg", "-message_file", str(trace)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def shown() -> list[dict]:
            return browser.execute_script("return window.consoleShown")

        def seen(who: str, final: bool) -> list[dict]:
            return [s for s in shown() if s["who"] == who and (s["final"] or not final)]

        # The call appears, then the caller's words, then the agent's whole reply.
        assert wait_until(lambda: browser.find_elements("css selector", "#live .call"), 15)
        (card,) = browser.find_elements("css selector", "#live .call")
        cid = card.get_attribute("data-call")
        assert wait_until(lambda: seen("caller", True) and seen("agent", True), HOLD_S + 10), \
            (shown(), agent.log_text()[-3000:])
        page = browser.find_element("id", f"call-{cid}").text
        heard, first, whole = seen("caller", True)[0], seen("agent", False)[0], \
            seen("agent", True)[-1]
        assert heard["text"] in page and whole["text"] in page
        assert "Caller" in page and "Agent" in page

        assert sipp.wait(HOLD_S + 60) == 0
        assert wait_until(lambda: browser.execute_script(
            f"return window.consoleGone[{cid!r}]"), 10)
        gone = browser.execute_script(f"return window.consoleGone[{cid!r}]") / 1000
        assert not browser.find_elements("id", f"call-{cid}")

        assert wait_until(lambda: agent.query(
            "SELECT recording_s FROM calls WHERE id = ? AND ended_at IS NOT NULL", cid), 20)
        (answered, ended, recording_s), = agent.query(
            "SELECT answered_at, ended_at, recording_s FROM calls WHERE id = ?", cid)
        ((speech_end, endpoint, asr, v2v, transcript, reply),) = agent.query(
            "SELECT speech_end_s, endpoint_s, asr_s, voice_to_voice_s, transcript, reply_text "
            "FROM turns WHERE call_id = ? AND \"index\" = 0", cid)
        t0 = datetime.fromisoformat(answered + "+00:00").timestamp()
        call_s = (datetime.fromisoformat(ended) - datetime.fromisoformat(answered)).total_seconds()
        assert heard["text"] == transcript and whole["text"] == reply.strip()

        # The turn, on the agent's clock: the end of the caller's words, the end of the turn
        # (endpoint), its transcript, and the reply's first audio on the line.
        turn_end = t0 + speech_end + endpoint
        transcribed = turn_end + asr
        first_audio = t0 + speech_end + v2v
        lag = {"words (console)": heard["shown"] / 1000 - heard["at"] / 1000,
               "reply (console)": first["shown"] / 1000 - first["at"] / 1000,
               "words after transcript": heard["shown"] / 1000 - transcribed,
               "words after end of turn": heard["shown"] / 1000 - turn_end,
               "reply after its first audio": first["shown"] / 1000 - first_audio,
               "whole reply after its first audio": whole["shown"] / 1000 - first_audio,
               "gone after BYE": gone - bye_sent_at(trace)}
        print("console delays: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in lag.items()))
        for key in ("words (console)", "reply (console)", "gone after BYE"):
            assert -0.05 < lag[key] < WITHIN_S, (key, lag)  # (one clock, read twice)
        # The reply is published as its audio is queued, a playout stage before the line.
        for key in ("words after transcript", "reply after its first audio"):
            assert lag[key] < WITHIN_S, (key, lag)

        browser.get(f"{url}/calls/{cid}")
        player = browser.find_element("id", "recording")
        assert wait_until(lambda: browser.execute_script(
            "return arguments[0].readyState >= 1 && isFinite(arguments[0].duration)",
            player), 10)
        duration = browser.execute_script("return arguments[0].duration", player)
        browser.execute_script("arguments[0].play()", player)
        assert wait_until(lambda: browser.execute_script(
            "return arguments[0].currentTime", player) > 0.5, 10), "the recording did not play"
        print(f"recording: audio element {duration:.2f} s, recorded {recording_s:.2f} s, "
              f"call {call_s:.2f} s (answer to end)")
        assert abs(duration - recording_s) < 0.05
        assert abs(duration - call_s) < 1.0
        assert HOLD_S - 2 < duration < HOLD_S + 5
    finally:
        if browser is not None:
            browser.quit()
        time.sleep(0.2)
        assert agent.stop() == 0, agent.log_text()[-2000:]
