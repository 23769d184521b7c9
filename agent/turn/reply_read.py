"""How a reply reads its model's text: pieces pushed by the engine, or one step job each.

A mixin of :class:`~agent.turn.reply.Reply` (as :mod:`agent.turn.reply_tools` is). An engine
that decodes every call's replies on its own thread (llama-batch) pushes each piece into the
call's inbox as it samples it (:meth:`~agent.call.jobs.CallJobs.feed`): no thread waits on a
reply's next token, and the engine reads the reply's priority from the rank the loop sets
(:attr:`~agent.turn.urgency.Urgency.llm_rank`), never from the turn's live state. Other
backends are read a step job at a time, at the same rank.
Either way each piece reaches :meth:`Reading._took` on the call's loop.
"""

from __future__ import annotations

from concurrent.futures import Future

from models.llm.base import LLMStream


class Reading:
    """A reply's reading of its stream (mixed into ``Reply``)."""

    def _read(self) -> None:
        """Start taking the new stream's text."""
        stream = self._stream
        if self._in_flight.feed_in is None or not stream.pushes:
            self._step()
            return
        now = self._now

        def start(put, end) -> None:
            stream.push(lambda piece: put((piece, now())), end)
        self._in_flight.feed("llm", start, lambda f: self._pushed(stream, f))

    def _step(self) -> None:
        self._job("llm", self._timed(self._stream.step), stage="llm",
                  priority=self.urgency.llm_rank, then=self._stepped)

    def _stepped(self, f: Future) -> None:
        out = self._outcome(f, self._llm_end)
        if out is not None and self._took(*out):
            self._step()

    def _pushed(self, stream: LLMStream, f: Future) -> None:
        """A piece ``stream``'s engine pushed, or its end (None, or the error that ended it)."""
        live = stream is self._stream and not stream.ended
        if f.exception() is not None:
            if live:
                stream.took(None)
                self._fail(f.exception())
            else:
                self._finish()
            return
        item = f.result()
        if not live:  # closed or replaced (a tool's round, a second ask): what was on its way
            if item is None:
                self._finish()
            return
        piece, at = (None, None) if item is None else item
        self._took(stream.took(piece), at)  # a reply that wants no more closed its stream

    def _took(self, text: str | None, at: float | None) -> bool:
        """The stream's next text (None: its end) to the reply; True: it wants more."""
        if text is not None and self.t.llm_first_token_at is None:
            self.t.llm_first_token_at = at
        if self.cancelled or self._error is not None:
            self._llm_end()
            return False
        if text is None:
            if not self._feed(None):
                self._llm_end()
            return False
        return not self._feed(text)
