"""The console's live state: the calls that are up, built from the workers' events, and pushed.

One :class:`Hub` per console. :meth:`Hub.publish` (the receiver's thread) applies an event to
its table of calls and hands it to every browser's :class:`Subscription`; that hand-over is
``loop.call_soon_threadsafe`` of a non-blocking put, so a browser that reads slowly costs the
hub nothing: once it is :data:`SUB_BACKLOG` events behind, its stream ends (its page reconnects
and starts again from a fresh snapshot). A call leaves the table when its state becomes
``ended`` (at the BYE, before its records are closed), at ``call.ended``, when its worker's
heartbeat no longer lists it, or when its worker has been silent for :data:`STALE_S` (it died;
the supervisor closes its calls as ``lost`` in the call log). Imports no web framework.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from agent.console.events import LiveEvent, make

SUB_BACKLOG = 1000
"""Events a browser may fall behind before its stream is ended."""
STALE_S = 3.5
"""A worker that sent nothing (not even its heartbeat) this long has died: its calls are gone."""
MISSED_S = 2.5
"""A call its worker's heartbeat no longer lists, this long after it started, has ended."""
MAX_LINES = 200
"""Lines of a live conversation kept (the call page has the whole call)."""
ENDED_KEPT = 500
"""Ended calls remembered, so that their late records do not bring them back."""


@dataclass
class LiveCall:
    """A call that is up, as the console shows it (mutated by the hub only, under its lock)."""

    call_id: str
    source: str
    started: float
    """Unix time the hub first heard of it."""
    caller: str = ""
    extension: str = ""
    profile: str = ""
    direction: str = ""
    worker: str = ""
    answered_at: float | None = None
    state: str = "ringing"
    state_since: float | None = None
    turns: int = 0
    voice_to_voice_s: float | None = None
    """Of its last answered turn."""
    lines: list[dict[str, Any]] = field(default_factory=list)
    """The conversation: ``{turn, who: caller|agent, text, at, final}``."""

    def as_json(self) -> dict[str, Any]:
        return {"id": self.call_id, "source": self.source, "caller": self.caller,
                "extension": self.extension, "profile": self.profile,
                "direction": self.direction, "worker": self.worker,
                "answered_at": self.answered_at, "state": self.state,
                "state_since": self.state_since, "turns": self.turns,
                "voice_to_voice_s": self.voice_to_voice_s,
                "lines": [dict(line) for line in self.lines]}

    def apply(self, ev: LiveEvent) -> None:
        d = ev.data
        if ev.kind == "call.started":
            for key in ("caller", "extension", "profile", "direction", "worker"):
                setattr(self, key, str(d.get(key, "")))
            self.answered_at = d.get("answered_at")
        elif ev.kind == "state":
            self.state, self.state_since = str(d.get("state", "")), ev.at
        elif ev.kind == "heard":
            self._line(int(d["turn"]), "caller", d, ev.at)
        elif ev.kind == "reply":
            self._line(int(d["turn"]), "agent", d, ev.at)
        elif ev.kind == "turn":
            self.turns = int(d.get("index", self.turns)) + 1
            if not d.get("unanswered") and d.get("voice_to_voice_s") is not None:
                self.voice_to_voice_s = d["voice_to_voice_s"]

    def _line(self, turn: int, who: str, d, at: float) -> None:
        old = next((i for i, line in enumerate(self.lines)
                    if line["turn"] == turn and line["who"] == who), None)
        if d.get("dropped"):
            if old is not None:
                del self.lines[old]
            return
        line = {"turn": turn, "who": who, "text": str(d.get("text", "")), "at": at,
                "final": bool(d.get("final", who == "caller"))}
        if old is None:
            self.lines.append(line)
            del self.lines[:-MAX_LINES]
        else:
            self.lines[old] = line


class Subscription:
    """One browser's stream of events, read on the console's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue()
        self.closed = False

    async def get(self) -> LiveEvent | None:
        """The next event; None: the stream is over (it fell behind)."""
        return await self.queue.get()

    def _put(self, ev: LiveEvent) -> None:  # on the loop
        if self.closed:
            return
        if self.queue.qsize() >= SUB_BACKLOG:
            self._end()
            return
        self.queue.put_nowait(ev)

    def _end(self) -> None:  # on the loop
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Hub:
    """The calls that are up, and the browsers watching them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: OrderedDict[str, LiveCall] = OrderedDict()
        self._ended: deque[str] = deque(maxlen=ENDED_KEPT)
        self._seen: dict[str, float] = {}  # source -> monotonic time of its last datagram
        self._subs: set[Subscription] = set()
        self._seq = 0
        self.received = 0

    # ---- in ----------------------------------------------------------------------------------

    def publish(self, ev: LiveEvent) -> None:
        """Apply one event from a worker and push it to every browser (any thread)."""
        with self._lock:
            self.received += 1
            self._seen[ev.source] = time.monotonic()
            if ev.kind == "alive":
                self._alive(ev)
                return
            if ev.call_id in self._ended:
                return  # the late records of a call that is gone
            call = self._calls.get(ev.call_id)
            if call is None:
                call = self._calls[ev.call_id] = LiveCall(ev.call_id, ev.source, ev.at)
            call.apply(ev)
            if ev.kind == "call.ended" or (ev.kind == "state" and call.state == "ended"):
                self._drop(ev.call_id)
            self._push(ev)

    def _alive(self, ev: LiveEvent) -> None:
        listed = set(ev.data.get("calls", ()))
        for cid, call in list(self._calls.items()):
            if (call.source == ev.source and cid not in listed
                    and ev.at - call.started > MISSED_S):
                self._gone(cid, "end-missed")

    def expire(self, now: float | None = None) -> None:
        """Drop the calls of workers silent for :data:`STALE_S` (the receiver calls this)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            silent = {s for s, t in self._seen.items() if now - t > STALE_S}
            for cid, call in list(self._calls.items()):
                if call.source in silent:
                    self._gone(cid, "worker-silent")
            for s in silent:
                del self._seen[s]

    def _gone(self, call_id: str, reason: str) -> None:
        self._drop(call_id)
        self._push(make("call.gone", call_id, time.time(), {"reason": reason}))

    def _drop(self, call_id: str) -> None:
        self._calls.pop(call_id, None)
        self._ended.append(call_id)

    def _push(self, ev: LiveEvent) -> None:
        self._seq += 1
        ev = replace(ev, seq=self._seq)
        for sub in list(self._subs):
            try:
                sub.loop.call_soon_threadsafe(sub._put, ev)
            except RuntimeError:  # its loop is closed: the console is stopping
                self._subs.discard(sub)

    # ---- out ---------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """``{seq, calls}``: every call that is up, and the last event number applied."""
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        return {"seq": self._seq, "calls": [c.as_json() for c in self._calls.values()]}

    def call(self, call_id: str) -> dict[str, Any] | None:
        """One call that is up, or None."""
        with self._lock:
            call = self._calls.get(call_id)
            return None if call is None else call.as_json()

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> tuple[Subscription, dict[str, Any]]:
        """A new browser's stream and the snapshot it starts from (no event between them)."""
        sub = Subscription(loop)
        with self._lock:
            self._subs.add(sub)
            return sub, self._snapshot()

    def end_streams(self) -> None:
        """End every browser's stream (the console is stopping: none is left cut mid-way)."""
        with self._lock:
            for sub in list(self._subs):
                try:
                    sub.loop.call_soon_threadsafe(sub._end)
                except RuntimeError:
                    self._subs.discard(sub)

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    @property
    def watchers(self) -> int:
        with self._lock:
            return len(self._subs)
