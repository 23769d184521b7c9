"""A transfer's ``tool_calls`` row in every ending of its call (issue 61), on fake stages.

The row is written ``pending`` when the REFER goes out, updated by each NOTIFY and closed by an
outcome however the call goes: the target answers or refuses (test_call_actions.py), no final
NOTIFY comes (``timeout``), the caller hangs up or their line goes dead after the REFER
(``caller-gone``), the agent stops (``ended-shutdown``), or the caller leaves while the
transfer is still being announced (the row says it never ran). The real REFER with sipp peers
is test_sip_transfer_log.py; the database side (the spool, ``lost``) is test_db_tool_rows.py.
"""

from __future__ import annotations

import pytest
from fakes import tone
from test_call_actions import Call, rows, stages_saying
from test_tools import CALL

import agent.call.actions as actions
from db.records import CallEnded, ToolCallRecord
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


def transferring(tmp_path, **over) -> Call:
    """A call whose caller asked to be transferred; returns once the REFER went out."""
    call = Call(tmp_path, stages_saying(CALL, "We open at nine.",
                                        heard=("put me through", "when do you open")), **over)
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.refers, timeout=10)
    return call


def transfer_row(call: Call) -> ToolCallRecord:
    (row,) = [r for r in rows(call.log) if r.name == "transfer"]
    return row


def test_the_row_is_pending_from_the_refer_and_follows_the_notifies(tmp_path):
    call = transferring(tmp_path)
    (first,) = call.log.of(ToolCallRecord)
    assert (first.outcome, first.detail, first.latency_s, first.seq) == (
        "pending", "REFER sent", 0.0, 1)
    call.session.transfer_status(100, "Trying", final=False)
    call.session.transfer_status(180, "Ringing", final=False)
    assert wait_until(lambda: transfer_row(call).detail == "180 Ringing")
    news = call.log.of(ToolCallRecord)
    assert [r.outcome for r in news] == ["pending"] * 3
    assert news[1].latency_s <= news[2].latency_s  # later news is further into the transfer
    call.session.transfer_status(486, "Busy Here", final=True)
    assert wait_until(lambda: transfer_row(call).outcome == "sip-486")
    assert call.close().end_reason == "caller-bye"
    assert transfer_row(call).outcome == "sip-486"  # the caller's BYE later changes nothing


@pytest.mark.parametrize("how", ["bye", "rtp-timeout"])
def test_a_caller_who_leaves_after_the_refer_leaves_a_caller_gone_row(tmp_path, how):
    call = transferring(tmp_path)
    call.session.transfer_status(100, "Trying", final=False)
    if how == "rtp-timeout":  # the phone dropped the dialog: no BYE, no RTP
        call.session.line_dead("rtp-timeout")
        assert wait_until(lambda: call.hangups, timeout=5)
    ended = call.close()
    assert ended.end_reason == ("caller-bye" if how == "bye" else "rtp-timeout")
    row = transfer_row(call)
    assert (row.name, row.source, row.outcome) == ("transfer", "llm", "caller-gone")
    assert f"the call ended ({ended.end_reason})" in row.detail
    assert row.detail.endswith("last: 100 Trying")
    assert row.latency_s > 0
    # Written before the call's end, so a report of the call has it.
    records = call.log.records
    assert records.index(row) < records.index(call.log.of(CallEnded)[0])


def test_no_final_notify_is_a_timeout_said_to_the_caller_and_the_call_goes_on(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(actions, "TRANSFER_WAIT_S", 1.0)
    call = transferring(tmp_path)
    said = len(call.line.speech_spans())
    assert wait_until(lambda: transfer_row(call).outcome == "timeout", timeout=5)
    row = transfer_row(call)
    assert row.detail == "no final NOTIFY in 1 s; last: REFER sent"
    assert 1.0 <= row.latency_s < 1.5
    # The caller hears transfer_failed (a phrase on the line), the model is told why.
    assert wait_until(lambda: len(call.line.speech_spans()) > said, timeout=5)
    told = [m.content for m in call.session.history if "<tool_response>" in m.content]
    assert len(told) == 1 and '"reason": "timeout"' in told[0]
    assert not call.hangups
    assert call.close().end_reason == "caller-bye"


def test_the_agent_stopping_mid_transfer_closes_the_row(tmp_path):
    call = transferring(tmp_path)
    call.session.shutdown()
    assert wait_until(lambda: call.hangups, timeout=5)
    assert call.close().end_reason == "shutdown"
    assert transfer_row(call).outcome == "ended-shutdown"


def test_a_transfer_still_announced_when_the_caller_leaves_is_a_row_that_never_ran(tmp_path):
    call = Call(tmp_path, stages_saying(CALL, heard=("put me through",)))
    call.tts.s_per_char = 0.1  # "Transferring you to the children now.": about 4 s
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.session.state == "speaking" and call.session.actions.pending,
                      timeout=10)
    assert call.close().end_reason == "caller-bye"
    assert call.refers == []
    row = transfer_row(call)
    assert (row.outcome, row.seq) == ("caller-gone", None)
    assert row.detail == "not run: the call ended (caller-bye) while it was announced"

