"""The console as a running thing: hub, live socket and HTTP server, started and stopped.

``serve`` and ``cluster`` call :func:`start_console` in the process that supervises the agent
(``[console] enabled``), before the first worker starts, and hand
:attr:`Console.live_socket` to each worker (``--live-socket``). The HTTP server is uvicorn on
its own thread and event loop (``console-http``), on a socket bound here first, so a port that
is taken fails the start with a message naming ``console.port`` instead of a thread dying
quietly. The console never touches the signals (the supervisor owns them); :meth:`Console.close`
stops it, ending the browsers' event streams first (their pages reconnect to the next one).
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import uvicorn

from agent import log
from agent.console.app import make_app
from agent.console.hub import Hub
from agent.console.receiver import LiveReceiver
from db.migrate import make_engine, mask_url, upgrade
from dialplan import ConfigError
from dialplan.console import ConsoleOptions

START_S = 10.0


class Console:
    """A started console (see the module docstring).

    Args:
        options: ``[console]``.
        db_url: the call log.
        token: the bearer token ("": none asked).
    """

    def __init__(self, options: ConsoleOptions, db_url: str, token: str = ""):
        self.options = options
        self.asks_token = bool(token)
        self.hub = Hub()
        self.engine = make_engine(db_url)
        self._sock = _bind(options.host, options.port)
        self.port = self._sock.getsockname()[1]
        self.receiver = LiveReceiver(self.hub)
        config = uvicorn.Config(make_app(self.engine, self.hub, token), log_config=None,
                                access_log=False, lifespan="off", ws="none",
                                timeout_graceful_shutdown=1, log_level=logging.WARNING)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, name="console-http",
                                        daemon=True)

    @property
    def live_socket(self) -> str:
        """Where the workers send their live events."""
        return self.receiver.path

    @property
    def url(self) -> str:
        host = self.options.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def start(self) -> Console:
        self._thread.start()
        deadline = time.monotonic() + START_S
        while (not self._server.started and self._thread.is_alive()
               and time.monotonic() < deadline):
            time.sleep(0.02)
        if not self._server.started:
            self.close()
            raise RuntimeError(f"the console did not start on {self.url}")
        log.event("console-listening", url=self.url, live_socket=self.live_socket,
                  bearer="asked" if self.asks_token else "none")
        return self

    def close(self) -> None:
        self.hub.end_streams()  # so that uvicorn's shutdown finds no stream to cut
        deadline = time.monotonic() + 1.0
        while self.hub.watchers and time.monotonic() < deadline:
            time.sleep(0.02)
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(5.0)
        self._sock.close()
        self.receiver.close()
        self.engine.dispose()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as e:
        raise ConfigError(f"console.port: cannot listen on {host}:{port}: {e.strerror}") from None


def start_console(options: ConsoleOptions, db_url: str, token: str) -> Console | None:
    """The started console, or None when ``[console]`` is off.

    The call log is migrated first where it answers (the pages read its newest tables); one
    that is down is no reason not to start: the pages say so until it is back.
    """
    if not options.enabled:
        return None
    try:
        upgrade(db_url)
    except Exception as e:  # noqa: BLE001 - the workers' writers migrate it once it is up
        log.event("console-calllog-unreachable", db=mask_url(db_url),
                  error=str(e).splitlines()[0][:200], level=30)
    return Console(options, db_url, token).start()
