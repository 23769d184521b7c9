"""What a finished reply leaves: its result (text, metrics, action) and the call's history.

The last step of :class:`~agent.turn.reply.Reply` (a mixin, as :mod:`agent.turn.reply_tools`
and :mod:`agent.turn.reply_checks` are), once its state is ``done``: it uses the reply's
stream, what it said, its tool rounds and its gate.
"""

from __future__ import annotations

import numpy as np

from models.audio import float_to_pcm16
from models.llm.base import Message


class Reported:
    """A reply's report (mixed into ``Reply``)."""

    def _report(self, failed: bool, said_nothing: bool) -> None:
        """Fill the result, append this turn's exchange to the history, tell ``on_done``.

        Args:
            failed: the reply's work failed (its error goes to ``on_done``).
            said_nothing: the reply had nothing to answer or asked to repeat: the history
                keeps no exchange of it.
        """
        r = self.result
        if not failed and not self.cancelled and not said_nothing:
            self._out(float_to_pcm16(
                self._resampler.process(np.zeros(0, np.float32), last=True)))
        self.t.settle()
        self.t.tts_done_at = self._now()
        if self._stream is not None:
            r.llm = self._first_llm or self._stream.metrics
            plain = not (self._rounds or r.action or r.tools or r.unfounded)
            r.reply_text = self._stream.text.strip() if plain else " ".join(self._said)
        elif not r.reply_text:
            r.reply_text = " ".join(self._said)  # decided without the model
        r.cancelled = self.cancelled
        if r.action is None and not failed and self._scanner is not None:
            r.action = self._implied(r.reply_text)
        if self.gate_open and not (said_nothing or failed):
            self.history.append(Message("user", self.runner.asked(r.transcript)))
            self.history.extend(self._rounds)
            if r.action is not None and not r.action.implicit:
                self.history.append(Message("assistant", r.action.raw))
            elif r.reply_text:
                self.history.append(Message("assistant", r.reply_text))
        self._on_done(r, self._error)
