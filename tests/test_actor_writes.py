"""Only the call's loop writes a call's and its turns' state: an instrumented run.

Four simulated calls at once on fake stages (real sessions, real scheduler, real lines paced
in real time), with every attribute assignment of a turn, its timeline, its audio gate, its
reply (and the reply's result) and the call's state recorded with the thread that made it.
Each object belongs to the loop of its call: a turn, its timeline and its reply are built
there, the call's state by the session for its loop. Any write after construction from
another thread (a scheduler worker stamping a timeline, the line's clock thread stamping the
first frame out) fails the test with the class, the attribute and the thread.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict

import pytest
from fakes import FourCalls

from agent.call.session import CallSession
from agent.call.state import CallState
from agent.call.turn import Turn
from agent.turn.reply import Reply
from agent.turn.reply_state import AudioGate
from agent.turn.result import TurnResult
from agent.turn.timeline import TurnTimeline
from agent.turn.urgency import Urgency

pytestmark = pytest.mark.unit

WATCHED = (Turn, TurnTimeline, Reply, TurnResult, AudioGate, CallState)


class Writes:
    """Who built each watched object, and every assignment made to it after that."""

    def __init__(self):
        self.lock = threading.Lock()
        self.built: dict[int, tuple[object, threading.Thread]] = {}  # id -> (obj, builder)
        self.owner: dict[int, threading.Thread] = {}  # id -> the call loop it belongs to
        self.loops: set[threading.Thread] = set()
        self.bad: dict[tuple[str, str, str], int] = defaultdict(int)
        self.count = defaultdict(int)  # class name -> writes after construction

    def constructed(self, obj) -> None:
        with self.lock:
            self.built[id(obj)] = (obj, threading.current_thread())  # kept: no id reuse

    def wrote(self, obj, name: str) -> None:
        key = id(obj)
        if key not in self.built:
            return  # still inside its constructor
        me = threading.current_thread()
        with self.lock:
            owner = self.owner.get(key, self.built[key][1])
            self.count[type(obj).__name__] += 1
            if me is not owner or owner not in self.loops:
                self.bad[(type(obj).__name__, name, re.sub(r"-\w+$", "", me.name))] += 1


def _watch_ranking(monkeypatch) -> set[threading.Thread]:
    """The threads that work out a turn's priority from its state (Urgency, Turn._rank)."""
    threads: set[threading.Thread] = set()
    def watching(f):
        def watched(self, *a, **k):
            threads.add(threading.current_thread())
            return f(self, *a, **k)
        return watched

    for cls, name in ((Urgency, "llm"), (Urgency, "tts"), (Turn, "_rank")):
        monkeypatch.setattr(cls, name, watching(getattr(cls, name)))
    return threads


def _instrument(monkeypatch, writes: Writes) -> None:
    for cls in WATCHED:
        init, setattr_ = cls.__init__, cls.__setattr__

        def __init__(self, *a, __init=init, __cls=cls, **k):
            __init(self, *a, **k)
            if type(self) is __cls:
                writes.constructed(self)

        def __setattr__(self, name, value, __set=setattr_):
            writes.wrote(self, name)
            __set(self, name, value)

        monkeypatch.setattr(cls, "__init__", __init__)
        monkeypatch.setattr(cls, "__setattr__", __setattr__)

    session_init = CallSession.__init__

    def session(self, *a, **k):
        session_init(self, *a, **k)
        with writes.lock:
            writes.loops.add(self._thread)
            writes.owner[id(self._call)] = self._thread  # built here, written by its loop

    monkeypatch.setattr(CallSession, "__init__", session)


@pytest.mark.parametrize("pushes", [False, True], ids=["stepped", "pushed"])
def test_only_each_calls_loop_writes_its_turns_replies_and_state(monkeypatch, pushes):
    """Either way the LLM's words reach the reply: stepped or pushed.

    Stepped: each LLM step a scheduler job; pushed: a thread of the fake engine's hands over
    every piece, as llama-batch's does.
    """
    rig = FourCalls("We open at ten, and we close at six.", pushes=pushes)
    writes = Writes()
    _instrument(monkeypatch, writes)
    ranked = _watch_ranking(monkeypatch)
    results = rig.run()

    assert len(results) == 4 and all(len(r.turns) >= 1 for r in results)
    assert all(t.reply_text and t.voice_to_voice_s for r in results for t in r.turns)
    assert len(writes.loops) == 4
    # Each kind of state was written (the instrumentation saw the calls' work)...
    assert {name for name, n in writes.count.items() if n} >= {
        "Turn", "TurnTimeline", "Reply", "TurnResult", "AudioGate", "CallState"}, dict(writes.count)
    # ...and only ever by its own call's loop.
    assert not writes.bad, dict(writes.bad)
    # The turns' priorities are worked out on the loops alone: the scheduler's workers and the
    # LLM engine read the ranks the loops set, never the turns' state.
    assert ranked and ranked <= writes.loops, {t.name for t in ranked - writes.loops}
    if pushes:  # the replies' words came from the engine's thread, none from a step job
        assert rig.stages.llm.threads == {"fake-engine"}
