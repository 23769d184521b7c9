"""The console's end of the workers' feeds: a Unix datagram socket read into the :class:`Hub`.

The socket lives in a directory of its own, private to this user (mode 0700), made when the
console starts and removed when it stops; ``serve`` and ``cluster`` hand its path to their
workers (``serve --worker --live-socket PATH``). Datagrams keep each event whole and let a
worker send without ever waiting: if this thread falls behind, the kernel's queue fills and
the workers drop events (:mod:`agent.console.feed`), no call waits. The ``console-live`` thread
also drops the calls of a worker that went silent (:meth:`Hub.expire`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time

from agent import log
from agent.console.events import decode
from agent.console.hub import Hub

MAX_DATAGRAM = 256 * 1024
EXPIRE_EVERY_S = 0.5


class LiveReceiver:
    """Receives the workers' live events until :meth:`close`.

    Args:
        hub: where the events go.
    """

    def __init__(self, hub: Hub):
        self.hub = hub
        self.bad = 0
        self._dir = tempfile.mkdtemp(prefix="callagent-console-")
        os.chmod(self._dir, 0o700)
        self.path = os.path.join(self._dir, "live.sock")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(EXPIRE_EVERY_S)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-live", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        expire_at = time.monotonic() + EXPIRE_EVERY_S
        while not self._stop.is_set():
            try:
                datagram = self._sock.recv(MAX_DATAGRAM)
            except TimeoutError:
                datagram = None
            except OSError:
                return  # closed
            if datagram is not None:
                ev = decode(datagram)
                if ev is None:
                    self.bad += 1
                    if self.bad == 1:
                        log.event("console-bad-datagram", size=len(datagram), level=30)
                else:
                    self.hub.publish(ev)
            if time.monotonic() >= expire_at:
                expire_at = time.monotonic() + EXPIRE_EVERY_S
                self.hub.expire()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2 * EXPIRE_EVERY_S + 1)
        self._sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)
