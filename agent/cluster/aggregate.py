"""The cluster's ``/metrics``: every worker's metrics in one scrape, each with a ``worker`` label.

At each scrape the cluster fetches each worker's ``/metrics`` (HTTP, ``FETCH_TIMEOUT_S`` each),
parses it with ``prometheus_client``'s parser and serves the samples again with
``worker="wN"`` added, beside the cluster's own: ``callagent_worker_up{worker}`` (1 if its
``/metrics`` answered), ``callagent_worker_restarts_total{worker}`` (the supervisor's count)
and ``callagent_kamailio_up``. Sums across workers are left to PromQL
(``sum without (worker) (...)``), which does them right for counters and histograms alike.
A worker being restarted is simply absent (``worker_up 0``) until it answers again; its
counters restart from zero, which Prometheus' ``rate()`` treats as a counter reset.
Imports no pjsua2 and no models.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from agent import log

FETCH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class WorkerEndpoint:
    """Where one worker's ``/metrics`` is, and how to read its supervisor's restart count."""

    worker: str
    url: str
    restarts: Callable[[], int] = lambda: 0


def fetch(url: str, timeout: float = FETCH_TIMEOUT_S) -> str:
    """The text of one ``/metrics`` page (raises OSError if the worker does not answer)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - our own worker
        return resp.read().decode("utf-8", errors="replace")


def merge(pages: Sequence[tuple[str, str]]) -> list[Metric]:
    """Families of several workers' pages, each sample labelled with its ``worker``.

    Args:
        pages: ``(worker id, /metrics text)`` pairs.

    Returns:
        One family per metric name, holding every worker's samples.
    """
    out: dict[str, Metric] = {}
    for worker, text in pages:
        for fam in text_string_to_metric_families(text):
            merged = out.get(fam.name)
            if merged is None:
                merged = out[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            for s in fam.samples:
                merged.add_sample(s.name, {**s.labels, "worker": worker}, s.value, s.timestamp)
    return list(out.values())


class ClusterCollector:
    """A ``prometheus_client`` collector that scrapes the workers when it is scraped.

    Args:
        workers: one endpoint per worker.
        kamailio_up: whether kamailio is running.
    """

    def __init__(self, workers: Sequence[WorkerEndpoint], kamailio_up: Callable[[], bool]):
        self.workers = list(workers)
        self.kamailio_up = kamailio_up

    def collect(self):
        up = GaugeMetricFamily("callagent_worker_up", "1 if the worker's /metrics answered.",
                               labels=["worker"])
        restarts = CounterMetricFamily("callagent_worker_restarts",
                                       "Times the supervisor restarted the worker.",
                                       labels=["worker"])
        pages = []
        for w in self.workers:
            try:
                pages.append((w.worker, fetch(w.url)))
                up.add_metric([w.worker], 1)
            except (OSError, ValueError):
                up.add_metric([w.worker], 0)
            restarts.add_metric([w.worker], w.restarts())
        yield up
        yield restarts
        yield GaugeMetricFamily("callagent_kamailio_up", "1 if kamailio is running.",
                                value=1 if self.kamailio_up() else 0)
        yield from merge(pages)


def serve(collector: ClusterCollector, host: str, port: int):
    """Serve the aggregated ``/metrics`` on ``host:port``; returns the HTTP server."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    log.event("metrics-listening", url=f"http://{host}:{port}/metrics", scope="cluster")
    return server
