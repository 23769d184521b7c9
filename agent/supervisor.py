"""Keeps ``callagent serve`` answering: the SIP/media worker is a child process, restarted.

pjsip and the bindings under it are native code: a crash takes the whole process down (SIP.md,
and issue 11's segfault right after a call ended). So ``serve`` forks nothing clever: it runs
the worker (``serve --worker``, the real server) as a child, forwards SIGINT/SIGTERM to it, and
when it dies of anything else, writes one log line with the signal, closes the calls it left
open as ``lost`` (with the signal in an event per call), and starts a new worker within
``RESTART_DELAY_S``. A worker that dies again and again backs off, up to ``MAX_DELAY_S``.
``callagent cluster`` runs one supervisor per worker, in threads of one process; there a dead
worker's id is on its log lines and ``lost`` events, and only its own calls are closed.
Imports no pjsua2 and no models: the supervisor survives whatever the worker does.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from agent import log

RESTART_DELAY_S = 1.0
MAX_DELAY_S = 30.0
STABLE_S = 60.0
"""A worker that ran this long resets the back-off."""


class Supervisor:
    """Runs ``argv`` as the worker until stopped, restarting it when it dies.

    Args:
        argv: the worker's command line.
        db_url: the call log, where a dead worker's open calls are closed.
        worker: the worker's id in a cluster (``callagent cluster`` runs one supervisor per
            worker): only that worker's open calls are closed when it dies, and the id is on
            each log line and ``lost`` event. None for a lone ``serve``.
    """

    def __init__(self, argv: list[str], db_url: str, worker: str | None = None):
        self.argv = argv
        self.db_url = db_url
        self.worker = worker
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self._who = {"worker": worker} if worker else {}

    def run(self, stop: threading.Event) -> int:
        """Supervise until ``stop`` is set (then stop the worker) or it exits by itself."""
        delay = RESTART_DELAY_S
        while True:
            started = time.monotonic()
            self.proc = subprocess.Popen(self.argv)
            log.event("worker-started", pid=self.proc.pid, restarts=self.restarts, **self._who)
            while self.proc.poll() is None and not stop.is_set():
                stop.wait(0.2)
            if stop.is_set():
                return self._stop_worker()
            rc = self.proc.returncode
            if rc == 0:
                return 0  # it stopped cleanly by itself (e.g. signalled directly)
            why = _describe(rc)
            name = f"worker {self.worker} pid" if self.worker else "worker pid"
            lost = self._close_open_calls(f"{name} {self.proc.pid} died: {why}")
            if time.monotonic() - started > STABLE_S:
                delay = RESTART_DELAY_S
            log.event("worker-died", pid=self.proc.pid, reason=why, calls_lost=lost,
                      restart_in_s=delay, level=40, **self._who)
            if stop.wait(delay):
                return 1
            delay = min(delay * 2, MAX_DELAY_S)
            self.restarts += 1

    def _stop_worker(self) -> int:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return 0 if proc is None else max(0, proc.returncode)
        return terminate(proc, 30)

    def _close_open_calls(self, detail: str) -> int | None:
        """Close the calls the dead worker left open as ``lost``; None if the DB is down."""
        try:
            from db.migrate import make_engine
            from db.placement import close_lost_calls_of, this_host

            engine = make_engine(self.db_url)
            try:
                return close_lost_calls_of(engine, self.worker, this_host(), detail=detail)
            finally:
                engine.dispose()
        except Exception as e:  # the next worker closes them at its start anyway
            log.event("calllog-unreachable", error=repr(e), level=30)
            return None


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit {rc}"


def worker_argv(argv: list[str]) -> list[str]:
    """The worker's command line: this ``serve`` invocation, run as the worker."""
    return [sys.executable, "-m", "agent.cli.main", *argv, "--worker"]


def terminate(proc: subprocess.Popen, timeout_s: float) -> int:
    """SIGTERM ``proc``, SIGKILL if it has not ended within ``timeout_s``; its return code.

    SIGTERM first: an agent ends its calls and closes their records, kamailio its process group.
    """
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
