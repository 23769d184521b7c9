"""A call's turns as they happen, for the live console: the caller's words, then the agent's.

The call log records a turn once its reply has played out; a console that waited for that
would show a conversation seconds late. :class:`TurnFeed` publishes instead what the call's
loop knows as it learns it: the caller's words once the turn has ended and is transcribed
(``heard``), the agent's first words when their audio starts (``reply``), and the whole reply
when the turn's work is done (``reply``, ``final``). A turn merged into the next one (the caller
went on) is withdrawn (``heard`` with ``dropped``): its words come again with that turn.
Runs on the call's loop; ``publish`` must not block (:class:`agent.console.feed.LiveFeed`'s
does not). Imports nothing of the console, SIP or the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.call.turn import Turn

Publish = Callable[[str, str, dict[str, Any]], None]
"""``publish(kind, call_id, data)``."""


class TurnFeed:
    """What one call has published of its turns, so each word is published once.

    Args:
        publish: where the events go.
        call_id: the call's id.
    """

    def __init__(self, publish: Publish, call_id: str):
        self._publish = publish
        self.call_id = call_id
        self._heard: dict[int, str] = {}
        self._said: dict[int, str] = {}
        self._final: set[int] = set()

    def update(self, turn: Turn | None) -> None:
        """Publish what is new about ``turn`` (called when its work reports, and at its end)."""
        if turn is None:
            return
        key = turn.index
        if turn.merged or (turn.cancelled and not turn.audible):
            if key in self._heard and key not in self._final:
                self._final.add(key)
                self._publish("heard", self.call_id, {"turn": key, "text": self._heard[key],
                                                      "dropped": True})
            return
        words = turn.typed if turn.typed is not None else turn.transcript
        if turn.endpointed and words and key not in self._heard:
            self._heard[key] = words
            self._publish("heard", self.call_id, {"turn": key, "text": words})
        if key in self._final:
            return
        if turn.done and turn.result is not None:
            self._final.add(key)
            text = turn.result.reply_text.strip()
            if text and turn.audible:
                self._publish("reply", self.call_id, {"turn": key, "text": text, "final": True})
        elif turn.audible and turn.reply is not None and key not in self._said:
            text = turn.reply.said.strip()
            if text:
                self._said[key] = text
                self._publish("reply", self.call_id, {"turn": key, "text": text,
                                                      "final": False})
