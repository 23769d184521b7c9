"""A real webhook receiver for tests: stdlib HTTP on 127.0.0.1, down, then failing, then up.

Its port is bound at once but listens only after ``down_s`` (a connection is refused until
then, as by a receiver that is not running); its first ``fail`` requests are answered ``code``
(500), the rest 200. Every request is kept with its event id, whether its signature verified
(:func:`agent.webhooks.verify`, the receiver's side of the scheme) and what was answered.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agent.webhooks import verify


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    event_id: str
    """The ``X-Callagent-Event-Id`` header."""
    body: dict
    signed: bool
    """The signature verified with the receiver's secret, and the timestamp was recent."""
    answered: int
    at: float
    """Unix time it arrived."""


class Receiver:
    """``with Receiver(secret, down_s=3, fail=2) as r:`` ... ``r.url``, ``r.accepted()``."""

    def __init__(self, secret: str, down_s: float = 0.0, fail: int = 0, code: int = 500):
        self.secret = secret
        self.fail = fail
        self.code = code
        self.down_s = down_s
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(),
                                          bind_and_activate=False)
        self.server.server_bind()  # the port is ours; no listen() yet: connections refused
        self.up_at: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self._timer = threading.Timer(self.down_s, self._come_up)
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        if self.up_at is not None:
            self.server.shutdown()
        self.server.server_close()

    def _come_up(self) -> None:
        self.server.server_activate()
        self.up_at = time.time()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def accepted(self) -> list[Received]:
        """The requests answered 200, in arrival order."""
        with self._lock:
            return [r for r in self.received if r.answered == 200]

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                signed = verify(receiver.secret, raw, dict(self.headers.items()))
                with receiver._lock:
                    code = receiver.code if len(receiver.received) < receiver.fail else 200
                    receiver.received.append(Received(
                        self.headers.get("X-Callagent-Event-Id", ""), json.loads(raw), signed,
                        code, time.time()))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):  # keep the test output quiet
                pass

        return Handler
