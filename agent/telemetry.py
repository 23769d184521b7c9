"""OpenTelemetry traces of the calls, made from the call log's records, exported over OTLP/HTTP.

With ``[telemetry] otlp_endpoint`` set, ``serve`` puts a :class:`CallTraces` in front of its
call log. Each record goes on to the real log and into a queue; the ``traces`` thread turns
them into spans: nothing is traced on a call's loop (a queue put) or on the audio path, and the
spans are made from the turn timings the call log records, once each turn is recorded. The
SDK's batch processor thread exports them; a receiver that is down costs the calls nothing.

One trace per call:

* ``call`` (the root): from the INVITE to the call's end, with the profile, extension,
  direction, end reason and turn count;
* ``turn`` per recorded turn: from the caller's first word to the end of the last span under
  it (the reply's first frame on the line, or the LLM's last token if that came later);
* under it, ``speech`` (the VAD's start to end of the caller's words), then the stages of
  :data:`db.stages.STAGES` in order, each from where the one before ended (``endpoint``,
  ``asr``, ``llm_ttft``, ``first_chunk``, ``tts_first_audio``, ``playout``), each as long as
  the ``turns`` table's column, and ``llm`` (the LLM's whole reply, ``llm_total_s``, from where
  its first token was asked for). A stage the turn did not reach (no reply; a stamp missing)
  has no span, nor has any after it.

Every span carries ``callagent.call_id``. Turn offsets are seconds since the call was answered
(the records' clock), placed from ``answered_at``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime

from agent import log
from db.records import CallEnded, CallLog, CallStarted, Record, TurnRecord
from db.stages import STAGES, column
from dialplan import ConfigError
from dialplan.telemetry import TelemetryOptions

PACKAGES = "opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2"
"""What the export needs (callagent's own dependencies; named in the error when missing)."""
CALL_ID = "callagent.call_id"


def require() -> None:
    """Fail at start, naming the packages, if the export's are not installed.

    Raises:
        ConfigError: ``opentelemetry-sdk`` or its OTLP/HTTP exporter is missing.
    """
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"telemetry.otlp_endpoint is set, but {e.name} is not installed: "
                          f"pip install {PACKAGES}") from None


class CallTraces:
    """A :class:`~db.records.CallLog` that hands every record on and traces the calls.

    Args:
        options: ``[telemetry]`` (its ``otlp_endpoint`` set).
        inner: the call log the records go on to.
        exporter: where the spans go (the OTLP/HTTP exporter unless a test gives its own).

    Raises:
        ConfigError: the OpenTelemetry packages are not installed (names them).
    """

    def __init__(self, options: TelemetryOptions, inner: CallLog, exporter=None):
        require()
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self._inner = inner
        self._trace = trace
        self.provider = TracerProvider(resource=Resource.create(
            {"service.name": options.service_name}))
        self.provider.add_span_processor(BatchSpanProcessor(
            exporter or OTLPSpanExporter(endpoint=options.traces_url)))
        self._tracer = self.provider.get_tracer("callagent")
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._calls: dict[str, tuple] = {}
        """Call id -> (its open span, its answer time in ns: where turn offsets count from)."""
        self._thread = threading.Thread(target=self._run, name="traces", daemon=True)
        self._thread.start()
        log.event("traces", url=options.traces_url, service=options.service_name)

    def put(self, record: Record) -> None:
        self._inner.put(record)
        self._queue.put(record)

    def close(self, timeout: float = 10.0) -> None:
        """Trace what is queued, end calls still open now, and export every span."""
        self._queue.put(None)
        self._thread.join(timeout)
        now = time.time_ns()
        for span, _ in self._calls.values():
            span.set_attribute("callagent.end_reason", "open at shutdown")
            span.end(now)
        self._calls.clear()
        self.provider.force_flush(int(timeout * 1000))
        self.provider.shutdown()

    def _run(self) -> None:
        while (record := self._queue.get()) is not None:
            try:
                self._trace_record(record)
            except Exception as e:  # noqa: BLE001 - a bad record must not end the tracing
                log.event("trace-error", getattr(record, "call_id", "-"), error=repr(e),
                          level=logging.WARNING)

    def _trace_record(self, record: Record) -> None:
        if isinstance(record, CallStarted):
            span = self._tracer.start_span("call", start_time=_ns(record.started_at),
                                           attributes=_attrs(
                {CALL_ID: record.call_id, "callagent.profile": record.profile,
                 "callagent.extension": record.called_extension,
                 "callagent.direction": record.direction, "callagent.source": record.source,
                 "callagent.worker": record.worker, "host.name": record.host,
                 "callagent.llm_model": record.llm_model,
                 "callagent.asr_model": record.asr_model}))
            self._calls[record.call_id] = (span, _ns(record.answered_at or record.started_at))
        elif isinstance(record, TurnRecord) and record.call_id in self._calls:
            self._turn(record, *self._calls[record.call_id])
        elif isinstance(record, CallEnded) and record.call_id in self._calls:
            span, _ = self._calls.pop(record.call_id)
            span.set_attributes(_attrs({"callagent.end_reason": record.end_reason,
                                        "callagent.turns": record.turns,
                                        "callagent.barge_ins": record.barge_ins,
                                        "callagent.codec": record.codec}))
            if record.end_reason == "error":
                span.set_status(self._trace.StatusCode.ERROR, "the call ended in an error")
            span.end(_ns(record.ended_at))

    def _turn(self, rec: TurnRecord, call_span, t0_ns: int) -> None:
        """The turn's span and its stages' under it (see the module's docstring)."""
        if rec.speech_end_s is None:
            return
        def at(seconds: float) -> int:  # seconds since the answer -> ns since the epoch
            return t0_ns + round(seconds * 1e9)

        start = rec.speech_start_s if rec.speech_start_s is not None else rec.speech_end_s
        spans = [("speech", start, rec.speech_end_s)] if rec.speech_start_s is not None else []
        edge = rec.speech_end_s
        for stage in STAGES:
            took = getattr(rec, column(stage))
            if took is None:
                break
            spans.append((stage, edge, edge + took))
            if stage == "llm_ttft" and rec.llm_total_s is not None:
                spans.append(("llm", edge, edge + rec.llm_total_s))
            edge += took
        common = {CALL_ID: rec.call_id, "callagent.turn": rec.index}
        turn = self._tracer.start_span(
            "turn", self._trace.set_span_in_context(call_span), start_time=at(start),
            attributes=_attrs({**common, "callagent.voice_to_voice_s": rec.voice_to_voice_s,
                               "callagent.unanswered": rec.unanswered or None,
                               "callagent.barge_in": rec.barge_in,
                               "callagent.llm_tokens": rec.llm_tokens,
                               "callagent.tts_total_s": rec.tts_total_s,
                               "callagent.audio_in_s": rec.audio_in_s,
                               "callagent.audio_out_s": rec.audio_out_s}))
        inside = self._trace.set_span_in_context(turn)
        for name, a, b in spans:
            self._tracer.start_span(name, inside, start_time=at(a), attributes=common).end(at(b))
        if rec.unanswered == "error":
            turn.set_status(self._trace.StatusCode.ERROR, "the turn failed")
        turn.end(at(max([edge, *(b for _, _, b in spans)])))


def _ns(at: datetime) -> int:
    return round(at.timestamp() * 1e9)


def _attrs(values: dict) -> dict:
    """Span attributes without the empty ones (OpenTelemetry takes no None)."""
    return {k: v for k, v in values.items() if v is not None and v != ""}
