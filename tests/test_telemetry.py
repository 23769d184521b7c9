"""Traces of the calls (``agent.telemetry``): spans from the call log's records.

The unit tests feed hand-made records to :class:`~agent.telemetry.CallTraces` with the SDK's
in-memory exporter; the server test exports over OTLP/HTTP to a real receiver on 127.0.0.1
(:mod:`tests.otlp_receiver`) that decodes the protobuf request. A real call's trace is
``test_sip_mcp``'s.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.telemetry import CallTraces, require
from db.records import CallEnded, CallStarted, TurnRecord
from db.stages import STAGES, column
from dialplan.config import ConfigError, parse_config
from dialplan.telemetry import TelemetryOptions
from tests.otlp_receiver import OtlpReceiver

ON = TelemetryOptions(otlp_endpoint="http://127.0.0.1:4318", service_name="agent-7")
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
STAGE_S = dict(zip(STAGES, (0.5, 0.21, 0.33, 0.12, 0.15, 0.02), strict=True))


class Records(list):
    """The inner call log: what reached it, in order."""

    def put(self, record) -> None:
        self.append(record)


def call_records(call_id: str = "c1") -> list:
    answered = T0 + timedelta(seconds=0.25)
    full = TurnRecord(call_id, 0, speech_start_s=2.0, speech_end_s=3.5,
                      **{column(s): v for s, v in STAGE_S.items()},
                      voice_to_voice_s=sum(STAGE_S.values()), llm_total_s=1.4, llm_tokens=22)
    silent = TurnRecord(call_id, 1, speech_start_s=9.0, speech_end_s=9.4, endpoint_s=0.5,
                        asr_s=0.3, unanswered="no-words")
    return [CallStarted(call_id, T0, called_extension="100", profile="default",
                        answered_at=answered, worker="w1"),
            full, silent,
            CallEnded(call_id, T0 + timedelta(seconds=15), "caller-bye", turns=2)]


def traced(records: list, exporter=None) -> tuple[list, Records]:
    exporter = exporter or InMemorySpanExporter()
    inner = Records()
    traces = CallTraces(ON, inner, exporter=exporter)
    for r in records:
        traces.put(r)
    traces.close()
    return list(exporter.get_finished_spans()), inner


@pytest.mark.unit
def test_a_call_is_one_trace_a_span_per_turn_and_one_per_stage_as_long_as_the_log_says():
    records = call_records()
    spans, inner = traced(records)
    assert inner == records  # every record reached the call log, in order
    by = {}
    for s in spans:
        by.setdefault(s.name, []).append(s)
    [call] = by["call"]
    assert call.parent is None and {s.context.trace_id for s in spans} == {call.context.trace_id}
    assert call.start_time == round(T0.timestamp() * 1e9)
    assert (call.end_time - call.start_time) / 1e9 == pytest.approx(15.0, abs=1e-6)
    assert call.attributes["callagent.end_reason"] == "caller-bye"
    assert call.attributes["callagent.turns"] == 2 and call.attributes["callagent.worker"] == "w1"
    assert call.resource.attributes["service.name"] == "agent-7"
    first, second = sorted(by["turn"], key=lambda s: s.attributes["callagent.turn"])
    assert {t.parent.span_id for t in (first, second)} == {call.context.span_id}
    assert all(s.attributes["callagent.call_id"] == "c1" for s in spans)
    under = {t.context.span_id: [s for s in spans if s.parent is not None
                                 and s.parent.span_id == t.context.span_id]
             for t in (first, second)}
    names = [s.name for s in sorted(under[first.context.span_id], key=lambda s: s.start_time)]
    assert names == ["speech", "endpoint", "asr", "llm_ttft", "llm", "first_chunk",
                     "tts_first_audio", "playout"]
    got = {s.name: s for s in under[first.context.span_id]}
    answered = round((T0 + timedelta(seconds=0.25)).timestamp() * 1e9)
    assert got["speech"].start_time == answered + 2_000_000_000
    edge = got["speech"].end_time
    assert edge == answered + 3_500_000_000
    for stage in STAGES:  # end to end, each as long as its column
        assert got[stage].start_time == edge
        assert abs((got[stage].end_time - edge) / 1e9 - STAGE_S[stage]) < 1e-6
        edge = got[stage].end_time
    assert got["llm"].start_time == got["llm_ttft"].start_time
    assert abs((got["llm"].end_time - got["llm"].start_time) / 1e9 - 1.4) < 1e-6
    assert first.start_time == got["speech"].start_time
    assert first.end_time == max(s.end_time for s in got.values())  # the LLM's last token
    assert first.attributes["callagent.llm_tokens"] == 22
    assert first.attributes["callagent.voice_to_voice_s"] == pytest.approx(sum(STAGE_S.values()))
    # The turn without a reply: its stages up to the ASR, nothing after.
    assert sorted(s.name for s in under[second.context.span_id]) == ["asr", "endpoint", "speech"]
    assert second.attributes["callagent.unanswered"] == "no-words"


@pytest.mark.unit
def test_records_of_a_call_never_started_are_only_logged_and_an_open_call_ends_at_close():
    orphan = call_records("c2")[1:]
    started = call_records("c3")[:2]  # never ended
    spans, inner = traced(orphan + started)
    assert len(inner) == len(orphan) + len(started)
    assert {s.attributes["callagent.call_id"] for s in spans} == {"c3"}
    [call] = [s for s in spans if s.name == "call"]
    assert call.attributes["callagent.end_reason"] == "open at shutdown"


class StuckExporter(InMemorySpanExporter):
    """A receiver that takes seconds to answer each export."""

    def export(self, spans):
        time.sleep(2.0)
        return super().export(spans)


@pytest.mark.unit
def test_a_stuck_receiver_never_slows_the_records_on_their_way():
    exporter = StuckExporter()
    inner = Records()
    traces = CallTraces(ON, inner, exporter=exporter)
    try:
        t0 = time.monotonic()
        for i in range(50):
            for r in call_records(f"c{i}"):
                traces.put(r)
        took = time.monotonic() - t0
        assert len(inner) == 200
        assert took < 0.2, took
    finally:
        traces.close(timeout=1.0)


@pytest.mark.unit
def test_the_key_is_checked_and_the_traces_url_made():
    assert parse_config({}).telemetry.otlp_endpoint == ""
    opts = parse_config({"telemetry": {"otlp_endpoint": "http://collector:4318/"}}).telemetry
    assert opts.traces_url == "http://collector:4318/v1/traces"
    assert TelemetryOptions("https://x/v1/traces").traces_url == "https://x/v1/traces"
    with pytest.raises(ConfigError, match="telemetry.otlp_endpoint = 'collector:4318': must "
                                          "start with http"):
        parse_config({"telemetry": {"otlp_endpoint": "collector:4318"}})
    with pytest.raises(ConfigError, match="unknown key 'telemetry.endpoint'"):
        parse_config({"telemetry": {"endpoint": "http://x"}})


@pytest.mark.unit
def test_a_missing_package_fails_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ConfigError, match="telemetry.otlp_endpoint is set, but "
                                          "opentelemetry.sdk.trace is not installed: pip "
                                          "install opentelemetry-sdk==1.45.2"):
        require()


@pytest.mark.server
def test_spans_reach_an_otlp_http_receiver_as_protobuf():
    receiver = OtlpReceiver()
    try:
        traces = CallTraces(TelemetryOptions(receiver.url, "agent-7"), Records())
        for r in call_records("c9"):
            traces.put(r)
        traces.close()
        spans = receiver.of_call("c9")
        assert receiver.requests >= 1
        assert sorted(s.name for s in spans) == sorted(
            ["call", "turn", "turn", "speech", *STAGES, "llm", "speech", "endpoint", "asr"])
        [call] = [s for s in spans if s.name == "call"]
        assert call.parent_id == "" and call.service == "agent-7"
        assert {s.trace_id for s in spans} == {call.trace_id}
        asr = [s for s in spans if s.name == "asr"]
        assert sorted(round(s.duration_s, 6) for s in asr) == [0.21, 0.3]
    finally:
        receiver.close()
