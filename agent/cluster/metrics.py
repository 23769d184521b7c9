"""Prometheus metrics of one agent process: ``/metrics`` on ``sip.metrics_port``.

What an operator watches on a live agent, in the Prometheus text format (``prometheus_client``):

* ``callagent_calls_active`` (gauge): calls in progress now;
* ``callagent_calls_total`` / ``callagent_calls_ended_total{reason}``: calls answered / ended;
* ``callagent_turns_total``: turns recorded, answered or not;
* ``callagent_voice_to_voice_seconds`` (histogram): end of caller speech to the first reply
  frame on the line, answered turns only (as ``callagent report`` counts it);
* ``callagent_unanswered_turns_total{reason}``: turns the caller heard no reply to;
* ``callagent_scheduler_queue_depth``, ``_running``, ``_jobs_total``,
  ``_wait_seconds_total{stage}`` and ``_first_audio_wait_p90_seconds`` (the admission-control
  measure): the model scheduler, the one place where calls wait for the CPU.

The counters come from the records every call already writes: :meth:`WorkerMetrics.tee` wraps
the call log, so the numbers are the call log's, counted as each record is put, with no hook in
the session. Lives under :mod:`agent.cluster` beside the aggregated view; imported by
``serve`` only when the port is set. Imports no pjsua2.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agent import log
from db.records import CallEnded, CallLog, CallStarted, Record, TurnRecord
from models.priority import Priority
from models.scheduler import Scheduler

V2V_BUCKETS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0)
"""Voice-to-voice buckets (s): finest below a second, the goal, and around what a loaded
2-core box gives (bench call, 4 at once)."""
ADMISSION_WINDOW_S = 30.0


class WorkerMetrics:
    """The metrics of one agent process, in a registry of their own.

    Args:
        scheduler: whose queue to report: the process's, the one its models run on.
    """

    def __init__(self, scheduler: Scheduler):
        # No ``*_created`` series: a worker's start time says nothing a scraper needs.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls_active = Gauge("callagent_calls_active", "Calls in progress.", registry=r)
        self.calls = Counter("callagent_calls", "Calls answered.", registry=r)
        self.calls_ended = Counter("callagent_calls_ended", "Calls ended, by end reason.",
                                   ["reason"], registry=r)
        self.turns = Counter("callagent_turns", "Turns recorded, answered or not.", registry=r)
        self.voice_to_voice = Histogram(
            "callagent_voice_to_voice_seconds",
            "End of caller speech to first reply frame on the line (answered turns).",
            buckets=V2V_BUCKETS, registry=r)
        self.unanswered = Counter("callagent_unanswered_turns",
                                  "Turns the caller heard no reply to, by reason.", ["reason"],
                                  registry=r)
        r.register(_SchedulerCollector(scheduler))

    def track_calls(self, active: Callable[[], int]) -> None:
        """Read ``callagent_calls_active`` from ``active()`` at each scrape."""
        self.calls_active.set_function(lambda: float(active()))

    def observe(self, record: Record) -> None:
        """Count one call-log record."""
        if isinstance(record, TurnRecord):
            self.turns.inc()
            if record.unanswered:
                self.unanswered.labels(record.unanswered).inc()
            elif record.voice_to_voice_s is not None:
                self.voice_to_voice.observe(record.voice_to_voice_s)
        elif isinstance(record, CallStarted):
            self.calls.inc()
        elif isinstance(record, CallEnded):
            self.calls_ended.labels(record.end_reason or "(none)").inc()

    def tee(self, call_log: CallLog) -> CallLog:
        """A call log that counts each record, then hands it to ``call_log``."""
        return _CountingLog(call_log, self)

    def serve(self, host: str, port: int):
        """Serve ``/metrics`` over HTTP on ``host:port`` from a daemon thread.

        Returns:
            The HTTP server (``shutdown()`` stops it).
        """
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        log.event("metrics-listening", url=f"http://{host}:{port}/metrics")
        return server


class _CountingLog:
    """A :class:`~db.records.CallLog` that counts records on their way to the real one."""

    def __init__(self, inner: CallLog, metrics: WorkerMetrics):
        self._inner = inner
        self._metrics = metrics

    def put(self, record: Record) -> None:
        try:
            self._metrics.observe(record)
        except Exception:  # noqa: BLE001 - put() must never raise into a call
            pass
        self._inner.put(record)


class _SchedulerCollector:
    """The scheduler's state, read at each scrape."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    def collect(self):
        st = self.scheduler.stats()
        yield GaugeMetricFamily("callagent_scheduler_queue_depth",
                                "Model jobs waiting for the CPU now.", value=st.waiting)
        yield GaugeMetricFamily("callagent_scheduler_running", "Model jobs computing now.",
                                value=st.running)
        yield CounterMetricFamily("callagent_scheduler_jobs", "Model jobs run.", value=st.jobs)
        waited = CounterMetricFamily("callagent_scheduler_wait_seconds",
                                     "Seconds model jobs waited for the CPU, by stage.",
                                     labels=["stage"])
        for stage, seconds in sorted(st.waited_s.items()):
            waited.add_metric([stage], seconds)
        yield waited
        yield GaugeMetricFamily(
            "callagent_scheduler_first_audio_wait_p90_seconds",
            f"p90 wait of first-audio work over the last {ADMISSION_WINDOW_S:.0f} s "
            "(what admission control compares with sip.admit_max_wait_s).",
            value=self.scheduler.recent_wait(Priority.FIRST_AUDIO, ADMISSION_WINDOW_S))
