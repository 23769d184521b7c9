"""How a call ends: its goodbye, the hangup, and the records closed once its loop stops.

A mixin of :class:`~agent.call.session.CallSession` (as :class:`~agent.call.inputs.CallInputs`
is), kept apart so that the session's loop reads on its own. It runs on the call's loop and
uses the session's parts (turn-taking, playout, pacing, records); it has no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from agent import log

FINISH_WAIT_S = 5.0
"""How long an ended call waits for its model work in flight, to record its last turn."""


class CallClosing:
    """The end of a call (mixed into ``CallSession``)."""

    _hangup: Callable[[], None]

    def _end_by(self, reason: str) -> None:
        """The agent ends the call (after its goodbye or a transfer): BYE, end reason."""
        self.end_reason = self.pacing.closing = reason
        self._request_hangup()

    def _goodbye(self, reason: str, text: str | None = None) -> None:
        text = self.profile.goodbye if text is None else text
        self.pacing.closing = reason
        self.end_reason = reason
        self._cancel_turns()
        log.event("limit", self.call_id, reason=reason)
        if text.strip():
            self._play(self._phrase(text))
        self._set_state("speaking")

    def _cancel_turns(self) -> None:
        self.turntaking.cancel_all()
        self.playout.clear()

    def _request_hangup(self) -> None:
        if self.pacing.hangup_requested(self.clock.now()):
            self._cancel_turns()
            self._hangup()

    def _finish(self) -> None:
        self._closed = True
        self._cancel_turns()
        # The turns' work in flight comes back (cancelled jobs at once, running ones when
        # they end), and with it their records.
        self.jobs.drain(self._inbox, lambda msg: self._turn_done(msg.turn), FINISH_WAIT_S)
        self.actions.finish(self.end_reason or "error", self.clock.now())
        self._rec.flush(self.playout.busy, self._t0, self.end_reason, final=True)
        self._set_state("ended")
        with self._progress:
            self._progress.notify_all()
        saved = None
        if self.recording is not None:
            saved = self.recording.close()
            if why := self.recording.take_stop_reason():
                self._rec.event("recording-stopped", why)
        self._rec.ended(self.end_reason or "error", self.barge_ins, self.codec,
                        self.playout.metrics(), self.clock.now() - self._t0, saved)
