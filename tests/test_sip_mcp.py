"""A real call asks what only an MCP tool knows, and the call is traced (issue 60).

``callagent serve`` (subprocess, real models) with a profile whose tools name the test MCP
server (``tests/mcp_server.py``, run by the agent over stdio), and ``[telemetry]`` pointed at
an OTLP/HTTP receiver on 127.0.0.1 (:mod:`tests.otlp_receiver`). One sipp call asks, in
espeak's voice, when the museum opens on Sunday: the words choose ``museum_hours`` (a
read-only tool whose description they match), the LLM writes its argument, the server
answers (hours no model would guess), and the reply speaks its answer, heard on the wire
(tshark) and transcribed. The same call's trace reaches the receiver: one call span, a turn
span under it, a span per stage under that, each as long as the ``turns`` table says.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from sipp.harness import start_agent

from db.stages import STAGES, column
from dialplan.options import ASROptions
from models.audio import PHONE_RATE, line_to_asr, pcm16_to_float, ulaw_decode
from models.registry import ModelCache
from testkit.agentproc import free_port
from testkit.wire import Capture, scenario, sipp, split_calls, spoken_ulaw
from tests.mcp_server import CLOSES, OPENS
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.server,
              pytest.mark.slow]
needs = pytest.mark.needs("sipp", "tshark", "espeak-ng", "sox")

SERVER = Path(__file__).with_name("mcp_server.py")
QUESTION = "What time does the museum open on Sunday?"
SPOKEN_OPENS = re.compile(r"7[:.]45|seven forty.five|quarter to (?:eight|8)", re.IGNORECASE)
"""The server's opening time, as a reply writes it or a transcript hears it."""
HOLD_S = 40
"""How long the caller stays on after asking: two LLM rounds and the MCP call, on a busy box."""
ASR_PROMPT = "A caller phones the city's visitor information line about the museum."
"""tiny.en with it hears espeak's question (base hears "the new Liam"). Without "museum" in it,
tiny.en heard "It's a new year open on Sunday." in one full-suite run: no word for the model to
call the museum's tool on."""


def profiles(otlp_url: str) -> str:
    return f'''
[tools.city]
mcp = ["{sys.executable}", "{SERVER}"]
include = ["museum_hours"]
timeout_s = 8.0
[profiles.visitors]
greeting = "Hello, visitor information."
system_prompt = """You are the phone assistant of the city's visitor information line. Answer \\
in one or two short spoken sentences, without lists or symbols. Never make up prices, times or \\
amounts: say you don't know."""
tools = ["end_call", "city"]
asr = {{ model = "tiny.en", initial_prompt = "{ASR_PROMPT}" }}
llm = {{ model = "qwen2.5-1.5b-instruct", max_tokens = 60 }}
limits = {{ rtp_timeout_s = 60, max_silence_s = 120, idle_prompt_s = 0 }}
[telemetry]
otlp_endpoint = "{otlp_url}"
service_name = "callagent-test"
'''


@pytest.fixture(scope="module")
def receiver():
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def agent(tmp_path_factory, receiver):
    # The SDK's batch processor exports every 5 s by default; sooner here, so a call's spans
    # are seen while the agent still runs (the standard OpenTelemetry variable).
    old = os.environ.get("OTEL_BSP_SCHEDULE_DELAY")
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "300"
    try:
        proc = start_agent(tmp_path_factory.mktemp("agent"), profiles(receiver.url),
                           '"130" = "visitors"', max_calls=1, startup_s=400)
    finally:
        if old is None:
            del os.environ["OTEL_BSP_SCHEDULE_DELAY"]
        else:
            os.environ["OTEL_BSP_SCHEDULE_DELAY"] = old
    yield proc
    assert proc.stop() == 0, proc.log_text()[-2000:]


@pytest.fixture(scope="module")
def call(agent, tmp_path_factory):
    """One call asking :data:`QUESTION`; (call id, the agent's audio after the question)."""
    tmp = tmp_path_factory.mktemp("call")
    audio = spoken_ulaw(QUESTION, tmp / "ask.ulaw", lead_s=3.0, tail_s=HOLD_S + 5)
    xml = scenario("uac_stream", tmp / "caller.xml", audio=audio, hold_ms=(HOLD_S + 6) * 1000)
    with Capture(tmp / "call.pcap", agent.rtp_ports) as cap:
        res = sipp(xml, "130", agent.port, free_port(), free_port(), timeout_s=HOLD_S + 40)
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    (wire,) = split_calls(cap.packets(), agent.rtp_ports).values()
    [(call_id,)] = agent.query("SELECT id FROM calls WHERE called_extension = '130'")
    assert wait_until(lambda: agent.query("SELECT end_reason FROM calls WHERE id = ?",
                                          call_id)[0][0], timeout=20)
    runs = wire.reply_runs()
    assert runs, f"the agent said nothing after the question: {agent.events('turn')}"
    start = runs[0][0]
    reply = b"".join(p.payload for p in wire.agent if p.at >= start - 0.1
                     and p.payload_type == 0)
    return call_id, ulaw_decode(reply)


@needs
def test_an_mcp_tool_is_called_from_a_spoken_request_and_its_answer_spoken(agent, call):
    call_id, heard = call
    turns = agent.query("SELECT transcript, reply_text FROM turns WHERE call_id = ? "
                        "ORDER BY \"index\"", call_id)
    asked = [t for t in turns if "museum" in t[0].lower()]
    assert asked, turns
    transcript, reply = asked[0]
    tools = agent.query("SELECT name, source, outcome, arguments, detail FROM tool_calls "
                        "WHERE call_id = ?", call_id)
    # Chosen by the caller's words (a read-only tool whose description they match), its
    # argument written by the model: agent.turn.routing.
    assert [t[:3] for t in tools] == [("museum_hours", "words", "ok")], (
        tools, turns, agent.events("model-pick"), agent.events("tool"))
    day = json.loads(tools[0][3])["day"]
    assert day.lower() == "sunday"
    assert json.loads(tools[0][4]) == {"day": day, "opens": OPENS, "closes": CLOSES}
    assert SPOKEN_OPENS.search(reply), reply
    # The caller heard it: the agent's audio on the wire after the question, transcribed.
    assert len(heard) / PHONE_RATE > 1.5
    asr = ModelCache().asr(ASROptions(model="tiny.en"))
    said = asr.transcribe(line_to_asr(pcm16_to_float(heard), PHONE_RATE)).text
    assert SPOKEN_OPENS.search(said), said
    print(f"caller: {transcript!r}\nreply: {reply!r}\non the wire (tiny.en): {said!r}")


@needs
def test_the_call_is_one_trace_with_a_span_per_turn_stage_as_long_as_the_turns_table(
        agent, call, receiver):
    call_id, _ = call
    assert wait_until(lambda: any(s.name == "call" for s in receiver.of_call(call_id)),
                      timeout=15), "no call span while the agent runs"
    spans = receiver.of_call(call_id)
    [root] = [s for s in spans if s.name == "call"]
    assert root.parent_id == "" and root.service == "callagent-test"
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert root.attributes["callagent.end_reason"] == "caller-bye"
    turn_spans = sorted((s for s in spans if s.name == "turn"),
                        key=lambda s: s.attributes["callagent.turn"])
    cols = ", ".join(['"index"', "speech_start_s", "speech_end_s", "llm_total_s",
                      *(column(s) for s in STAGES)])
    rows = agent.query(f"SELECT {cols} FROM turns WHERE call_id = ? ORDER BY \"index\"", call_id)
    assert [s.attributes["callagent.turn"] for s in turn_spans] == [r[0] for r in rows]
    worst = 0.0
    counts: dict[str, int] = {}
    for turn, row in zip(turn_spans, rows, strict=True):
        assert turn.parent_id == root.span_id
        assert root.start_ns <= turn.start_ns and turn.end_ns <= root.end_ns
        under = {s.name: s for s in spans if s.parent_id == turn.span_id}
        # Every stage the table has up to the first it lacks, each as long as its column.
        want = {} if row[1] is None else {"speech": row[2] - row[1]}
        for stage, took in zip(STAGES, row[4:], strict=True):
            if took is None:
                break
            want[stage] = took
            if stage == "llm_ttft" and row[3] is not None:
                want["llm"] = row[3]
        assert set(under) == set(want), (sorted(under), want)
        for name, span in under.items():
            worst = max(worst, abs(span.duration_s - want[name]))
            counts[name] = counts.get(name, 0) + 1
    assert worst < 0.003, worst
    answered = [t for t, r in zip(turn_spans, rows, strict=True) if r[-1] is not None]
    assert answered, "no turn reached the line"
    print(f"spans: 1 call, {len(turn_spans)} turns, stages {counts}; "
          f"worst duration mismatch {worst * 1000:.3f} ms")
