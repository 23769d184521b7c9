"""A worker's side of the live console: its calls' events, sent as datagrams, never waited for.

``serve --worker --live-socket PATH`` (set by ``serve`` and ``cluster`` when the console is on)
makes a :class:`LiveFeed`; the call log it writes is wrapped in a :class:`LiveTee`, so every
record a call writes is also a live event, and each call's session publishes its turns' words
as they happen (:mod:`agent.call.live`). :meth:`LiveFeed.publish` only puts the event in a
bounded queue: a call's loop never waits for the console, and when the queue is full (the
console process stopped reading) the event is dropped and counted, not kept. The ``console-feed``
thread sends each as one datagram on a non-blocking Unix socket, and every
:data:`HEARTBEAT_S` an ``alive`` event with the ids of the calls that are up, by which the
console drops the calls of a worker that died, and any whose end it missed.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from typing import Any

from agent import log
from agent.console.events import LiveEvent, encode, make, of_record
from db.records import CallLog, Record

HEARTBEAT_S = 1.0
QUEUE_SIZE = 2000


class LiveFeed:
    """Sends this worker's live events to the console at ``path`` (a Unix datagram socket).

    Args:
        path: the console's socket.
        source: this worker's name on its events (its cluster id, or ``pid<N>``).
    """

    def __init__(self, path: str, source: str | None = None):
        self.path = path
        self.source = source or f"pid{os.getpid()}"
        self.dropped = 0
        """Events not sent: the queue was full, or the console did not take the datagram."""
        self.sent = 0
        self._queue: queue.Queue[LiveEvent | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._up: dict[str, None] = {}  # the calls that are up, in order (the thread's own)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self._reachable = True
        self._thread = threading.Thread(target=self._run, name="console-feed", daemon=True)
        self._thread.start()

    def publish(self, kind: str, call_id: str, data: dict[str, Any]) -> None:
        """Queue one event (any thread); never blocks, never raises."""
        try:
            self._queue.put_nowait(make(kind, call_id, time.time(), data, self.source))
        except queue.Full:
            self.dropped += 1
        except Exception:  # noqa: BLE001 - a call must not fail for its console
            self.dropped += 1

    def close(self) -> None:
        """Send what is queued (briefly) and stop."""
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            pass
        self._thread.join(2.0)
        self._sock.close()

    def _run(self) -> None:
        beat = time.monotonic() + HEARTBEAT_S
        while True:
            try:
                ev = self._queue.get(timeout=max(0.0, beat - time.monotonic()))
            except queue.Empty:
                ev = ...
            if ev is None:
                return
            if isinstance(ev, LiveEvent):
                self._track(ev)
                self._send(ev)
            if time.monotonic() >= beat:
                beat = time.monotonic() + HEARTBEAT_S
                self._send(make("alive", "-", time.time(), {"calls": list(self._up)},
                                self.source))

    def _track(self, ev: LiveEvent) -> None:
        if ev.kind == "call.started":
            self._up[ev.call_id] = None
        elif ev.kind == "call.ended" or (ev.kind == "state" and ev.data.get("state") == "ended"):
            self._up.pop(ev.call_id, None)

    def _send(self, ev: LiveEvent) -> None:
        try:
            self._sock.sendto(encode(ev), self.path)
            self.sent += 1
            if not self._reachable:
                self._reachable = True
                log.event("console-feed-back", path=self.path)
        except OSError as e:  # full (BlockingIOError), or no console there (yet, or any more)
            self.dropped += 1
            if self._reachable and not isinstance(e, BlockingIOError):
                self._reachable = False
                log.event("console-feed-unreachable", path=self.path, error=repr(e), level=30)


class LiveTee:
    """A call log that also hands each record to the console as a live event.

    Args:
        call_log: where the records go (the writer); ``put`` still never blocks.
        feed: the console's feed.
    """

    def __init__(self, call_log: CallLog, feed: LiveFeed):
        self.call_log = call_log
        self.feed = feed

    def put(self, record: Record) -> None:
        self.call_log.put(record)
        try:
            live = of_record(record)
        except Exception:  # noqa: BLE001 - put() must not raise into a call
            return
        if live is not None:
            self.feed.publish(live[0], record.call_id, live[1])
