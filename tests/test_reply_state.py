"""The reply's and the call's state machines: their tables, refused moves, and the audio gate."""

from __future__ import annotations

import pytest

from agent.call.state import TRANSITIONS as CALL
from agent.call.state import CallState
from agent.turn.reply_state import (
    LLM_OVER,
    TRANSITIONS,
    AudioGate,
    IllegalTransition,
    ReplyState,
    check,
)

pytestmark = pytest.mark.unit

S = ReplyState


def test_every_state_has_a_row_and_every_one_leads_to_done():
    assert set(TRANSITIONS) == set(S)
    for state in S:  # each state reaches DONE through the table
        seen, todo = {state}, [state]
        while todo:
            for nxt in TRANSITIONS[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        assert S.DONE in seen, state
    assert TRANSITIONS[S.DONE] == frozenset()
    # The model's side is over in these only; a reply streaming or running a tool is not.
    assert not LLM_OVER & {S.NEW, S.ASKING, S.TOOL_HELD, S.TOOL}


@pytest.mark.parametrize("old,new", [(S.DONE, S.ASKING), (S.SPEAKING, S.ASKING),
                                     (S.NEW, S.DONE), (S.REPEATING, S.APOLOGISING),
                                     (S.TOOL, S.TOOL_HELD), (S.SPEAKING, S.SPEAKING)])
def test_a_move_the_table_forbids_raises(old, new):
    with pytest.raises(IllegalTransition, match=f"{old.value} -> {new.value}"):
        check(TRANSITIONS, old, new)


def test_the_gate_opens_once_and_runs_what_waited_for_it():
    gate, ran = AudioGate(), []
    gate.when_open(lambda: ran.append("reply"))
    assert not gate.is_open and ran == []
    assert gate.open() is True and gate.is_open and ran == ["reply"]
    assert gate.open() is False and ran == ["reply"]  # opened once
    gate.when_open(lambda: ran.append("late"))  # open already: nothing is left waiting
    assert ran == ["reply"] and AudioGate(is_open=True).is_open


def test_the_call_refuses_a_transition_its_table_does_not_list():
    seen = []
    state = CallState(now=lambda: 1.0, on_change=seen.append)
    for new in ("greeting", "listening", "thinking", "speaking", "listening", "ended"):
        state.set(new)
    assert [(c.old, c.new) for c in seen][-2:] == [("speaking", "listening"),
                                                  ("listening", "ended")]
    with pytest.raises(IllegalTransition, match="ended -> listening"):
        state.set("listening")
    state.set("ended")  # the same state again is no transition
    assert state.state == "ended" and len(seen) == 6
    assert set(CALL) == {"ringing", "screening", "greeting", "listening", "thinking",
                         "speaking", "ended"}
