"""Options of the trace export (``[telemetry]``): where a call's spans are sent, if anywhere.

Pure data, like :mod:`dialplan.options`. With ``otlp_endpoint`` set, ``serve`` (and so each
worker of ``cluster``) exports one trace per call over OTLP/HTTP (:mod:`agent.telemetry`);
empty, nothing is traced and the OpenTelemetry SDK is not even imported.
"""

from __future__ import annotations

from dataclasses import dataclass

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class TelemetryOptions:
    """``[telemetry]``: OpenTelemetry traces of the calls."""

    otlp_endpoint: str = ""
    """An OTLP/HTTP receiver (a collector, Jaeger, Tempo): ``http://127.0.0.1:4318``, to which
    ``/v1/traces`` is added (a URL already ending so is used as it is). Empty = no traces."""
    service_name: str = "callagent"
    """The traces' ``service.name``."""

    def __post_init__(self) -> None:
        if self.otlp_endpoint and not self.otlp_endpoint.startswith(("http://", "https://")):
            raise ValueError(f"otlp_endpoint = {self.otlp_endpoint!r}: must start with "
                             "http:// or https:// (empty = off)")
        if not self.service_name.strip():
            raise ValueError("service_name: must not be empty")

    @property
    def traces_url(self) -> str:
        """Where the spans are POSTed ("" = off)."""
        url = self.otlp_endpoint.rstrip("/")
        if not url or url.endswith(TRACES_PATH):
            return url
        return url + TRACES_PATH
