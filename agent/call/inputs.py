"""A call's inputs from other threads: each one only puts a message in the call's inbox.

The SIP side (:mod:`agent.server`), a simulated line and the line's clock thread call these;
the call's loop (:class:`~agent.call.session.CallSession`, which mixes this in) handles the
messages one at a time. Nothing here reads or writes the call's state.
"""

from __future__ import annotations

import queue
import threading

from agent.call.clock import Clock
from agent.call.messages import (
    Disconnected,
    Dtmf,
    Frame,
    Held,
    LegEvent,
    LineDead,
    MediaActive,
    Message,
    Shutdown,
    TransferProgress,
)


class CallInputs:
    """The thread-safe half of a call session: its inbox, thread and progress condition."""

    clock: Clock
    _inbox: queue.SimpleQueue[Message]
    _thread: threading.Thread
    _progress: threading.Condition
    _frames_done: int
    _closed: bool

    def media_active(self, codec: str) -> None:
        self._inbox.put(MediaActive(codec))

    def dtmf(self, digit: str) -> None:
        self._inbox.put(Dtmf(digit))

    def disconnected(self, by_local: bool, code: int = 200) -> None:
        """The SIP call is gone (BYE either way, or a failure)."""
        self._inbox.put(Disconnected(by_local, code))

    def line_dead(self, reason: str) -> None:
        """The line is dead without a BYE (``rtp-timeout``...): hang up, no goodbye."""
        self._inbox.put(LineDead(reason))

    def transfer_status(self, code: int, reason: str, final: bool) -> None:
        """Progress of the REFER this call sent (its response, then the NOTIFYs)."""
        self._inbox.put(TransferProgress(code, reason, final))

    def leg(self, leg: str, kind: str, detail: str = "", code: int = 0) -> None:
        """News of a consult leg of this call (an attended transfer's call to its target)."""
        self._inbox.put(LegEvent(leg, kind, detail, code))

    def hold(self, held: bool) -> None:
        """The caller put the call on hold, or resumed it: no silence limit while held."""
        self._inbox.put(Held(held))

    def shutdown(self, reason: str = "shutdown") -> None:
        """The process is stopping (or the call's owner ends it): hang up, close the records.

        Args:
            reason: the call's end reason, unless it already has one.
        """
        self._inbox.put(Shutdown(reason))

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the session thread; True once it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_frames(self, n: int, timeout: float = 5.0) -> bool:
        """Block until the session thread has handled ``n`` inbound frames (or has ended)."""
        with self._progress:
            return self._progress.wait_for(
                lambda: self._frames_done >= n or not self._thread.is_alive(), timeout)

    def _on_frame(self, data: bytes) -> None:
        # The line's clock thread: stamp and queue, nothing else.
        if not self._closed:
            self._inbox.put(Frame(self.clock.now(), data))
