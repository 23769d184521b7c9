"""A silent caller and a caller who asks the agent to wait, on real calls (issue 61).

``callagent serve`` (tiny.en + SmolLM2 + Kokoro, SQLite call log, stereo recordings) with
``limits.idle_prompt_s = 2``, ``max_silence_s = 5`` and ``hold_s = 6``; sipp callers on
127.0.0.1 (``uac_bye.xml``: stream a file, then wait for the agent's BYE), the agent's audio off
the wire (tshark) and out of its recording, transcribed with tiny.en:

* a caller who says nothing hears the greeting, "Are you still there?" 2 s after it and the
  goodbye 5 s after it, then the agent's BYE;
* a caller who says "Hold on a second." (espeak-ng) hears "Sure, take your time." at once (no
  LLM), then 6 s of nothing, then the prompt and, 3 s later, the goodbye.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from sipp.harness import start_agent

from dialplan.options import ASROptions
from models.audio import PHONE_RATE, StreamResampler, speech_runs
from models.registry import ModelCache
from testkit.agentproc import free_port
from testkit.wire import Capture, levels, scenario, sipp_argv, split_calls, spoken_ulaw
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool,
              pytest.mark.needs("sipp", "tshark", "espeak-ng", "sox")]

PROFILES = """
[profiles.quiet]
greeting = "Hello."
# tiny.en hears the espeak-ng caller's words right, but below the default -1.0 (here:
# "Hold on a second" at -1.14): the transcript must reach the reply, not "say it again".
asr = { model = "tiny.en", min_avg_logprob = -1.6 }
llm = { model = "smollm2-135m", max_tokens = 20, threads = 1 }
recording = "stereo"
limits = { idle_prompt_s = 2, max_silence_s = 5, hold_s = 6 }
"""


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    proc = start_agent(tmp_path_factory.mktemp("agent"), PROFILES, '"107" = "quiet"',
                       max_calls=1)
    yield proc
    assert proc.stop() == 0, proc.log_text()[-3000:]


@pytest.fixture(scope="module")
def tiny():
    return ModelCache().asr(ASROptions(model="tiny.en"))


def call(tmp: Path, agent, audio: Path, bye_wait_ms: int):
    """A caller streaming ``audio`` who waits for the agent's BYE; the agent's speech runs."""
    xml = scenario("uac_bye", tmp / "caller.xml", audio=audio, bye_wait_ms=bye_wait_ms)
    argv = sipp_argv(xml, "107", agent.port, free_port(), free_port(), timeout_s=60)
    with Capture(tmp / "call.pcap", agent.rtp_ports) as cap:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=80)
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]  # its BYE came
    (wire,) = split_calls(cap.packets(), agent.rtp_ports).values()
    call_id = agent.query("SELECT id FROM calls ORDER BY started_at DESC LIMIT 1")[0][0]
    assert wait_until(lambda: agent.query("SELECT end_reason FROM calls WHERE id = ?",
                                          call_id)[0][0], timeout=20)
    # Pauses within a phrase ("Thank you for calling. Goodbye.") are shorter than 0.8 s, the
    # gaps between these phrases longer than 1.5 s.
    return call_id, speech_runs(levels(wire.agent), min_gap_s=0.8)


def agent_words(agent, call_id: str, tiny) -> str:
    """The agent's side of the call's recording (its right channel), transcribed."""
    path = agent.query("SELECT recording_path FROM calls WHERE id = ?", call_id)[0][0]
    pcm, rate = sf.read(path, dtype="float32")
    assert rate == PHONE_RATE
    audio = StreamResampler(PHONE_RATE, 16000).process(np.ascontiguousarray(pcm[:, 1]),
                                                       last=True)
    return tiny.transcribe(audio).text.lower()


def events(agent, call_id: str) -> list[str]:
    return [k for (k,) in agent.query("SELECT kind FROM events WHERE call_id = ? AND kind IN "
                                      "('idle-prompt', 'hold') ORDER BY at, id", call_id)]


def said(agent, call_id: str) -> list[str]:
    return [e["text"] for e in agent.events("say") if e.get("call") == call_id]


def test_a_silent_caller_hears_still_there_then_the_goodbye(agent, tmp_path, tiny):
    quiet = tmp_path / "quiet.ulaw"
    quiet.write_bytes(b"\xff" * 8000 * 20)  # μ-law silence: RTP packets, no speech
    call_id, runs = call(tmp_path, agent, quiet, bye_wait_ms=20000)
    greeting, prompt, goodbye = runs
    print(f"prompt {prompt[0] - greeting[1]:.2f} s and goodbye {goodbye[0] - greeting[1]:.2f} s "
          "after the greeting (idle_prompt_s 2, max_silence_s 5)")
    # Silence counts from the greeting's end (its last loud packet: the voice's tail is quiet).
    assert 2.0 - 0.2 <= prompt[0] - greeting[1] <= 2.0 + 0.5
    assert 5.0 - 0.2 <= goodbye[0] - greeting[1] <= 5.0 + 0.5  # not restarted by the prompt
    assert agent.query("SELECT end_reason FROM calls WHERE id = ?", call_id)[0][0] == "silence"
    assert events(agent, call_id) == ["idle-prompt"]
    assert said(agent, call_id) == ["Are you still there?"]
    words = agent_words(agent, call_id, tiny)
    assert "still there" in words and words.index("still there") < words.rindex("goodbye"), words


def test_hold_on_gets_the_acknowledgement_and_quiet_for_hold_s(agent, tmp_path, tiny):
    # espeak-ng's en-us voice: tiny.en hears "Hold on a second." (its "en" voice: "So we'll
    # not affect you.").
    audio = spoken_ulaw("Hold on a second.", tmp_path / "hold.ulaw", lead_s=2.0, tail_s=25.0,
                        voice="en-us")
    call_id, runs = call(tmp_path, agent, audio, bye_wait_ms=30000)
    greeting, ack, prompt, goodbye = runs
    print(f"ack to prompt {prompt[0] - ack[0]:.2f} s (hold_s 6), prompt to goodbye "
          f"{goodbye[0] - prompt[0]:.2f} s")
    ((transcript, reply, ttft, tokens),) = agent.query(
        "SELECT transcript, reply_text, llm_ttft_s, llm_tokens FROM turns WHERE call_id = ?",
        call_id)
    assert "hold on" in transcript.lower() and reply == "Sure, take your time."
    assert ttft < 0.05 and not tokens  # the words decided: the LLM was not asked
    # hold_s of quiet from the request (its turn's end, as the ack starts): without it the
    # prompt would have come idle_prompt_s (2 s) after the ack.
    assert 6.0 - 0.3 <= prompt[0] - ack[0] <= 6.0 + 1.0
    assert 3.0 - 0.3 <= goodbye[0] - prompt[0] <= 3.0 + 0.5  # max_silence_s - idle_prompt_s
    assert events(agent, call_id) == ["hold", "idle-prompt"]
    assert said(agent, call_id) == ["Are you still there?"]
    (hold,) = [e for e in agent.events("hold") if e.get("call") == call_id]
    assert hold["hold_s"] == "6.0" and "hold on" in hold["asked"].lower()
    words = agent_words(agent, call_id, tiny)
    assert "take your time" in words and "still there" in words, words
