"""A tiny OTLP/HTTP trace receiver on 127.0.0.1 for the tests: decodes what exporters POST.

``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest`` (opentelemetry-proto, which
the OTLP/HTTP exporter depends on) is decoded into :class:`Span` rows and answered with an
empty ``ExportTraceServiceResponse``, as a collector does.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    """One received span, its ids as hex."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    attributes: dict = field(default_factory=dict)
    service: str = ""
    status: int = 0
    """0 unset, 1 ok, 2 error."""

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    """Collects every span POSTed to ``url`` (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get(
                        "Content-Type") != "application/x-protobuf":
                    self.send_error(404)
                    return
                receiver._received(ExportTraceServiceRequest.FromString(body))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def _received(self, req: ExportTraceServiceRequest) -> None:
        got = []
        for rs in req.resource_spans:
            service = next((_value(a.value) for a in rs.resource.attributes
                            if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(),
                                    s.parent_span_id.hex(), s.start_time_unix_nano,
                                    s.end_time_unix_nano,
                                    {a.key: _value(a.value) for a in s.attributes}, service,
                                    s.status.code))
        with self._lock:
            self.requests += 1
            self.spans += got

    def of_call(self, call_id: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.attributes.get("callagent.call_id") == call_id]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
