"""What the agent does on a call besides talking: hang up, transfer, take a message, keypad.

An action comes from the LLM (a tool call in a turn's result, see :mod:`agent.turn.tools`) or
from the caller's keypad (``[profiles.X.keypad]``). Either way the caller first hears what is
about to happen ("Transferring you to the front desk now."), and the action runs once that
phrase has played: a speculative turn's action never runs (its turn must be heard first), and
the call never hangs up or transfers over its own words. Every action, and how it ended, is a
``tool_calls`` row in the call log. A transfer's row is written ``pending`` when its REFER goes
out, updated by each NOTIFY, and closed by its outcome: ``ok``, ``sip-NNN``, ``timeout`` (no
final NOTIFY in :data:`TRANSFER_WAIT_S`), or, when the call ends first, ``caller-gone`` (a phone
may drop the dialog once it has the REFER) or ``ended-REASON``. A failed one is said to the
caller (and told to the model) and the call goes on. An ``attended`` entry's transfer is a
:class:`~agent.call.consult.Consult`; failed, it offers a message, and a "yes" starts one.

:class:`CallActions` runs on the call's loop only; the session gives it what it may do to the
line (say a cached phrase, hang up, send REFER, start a turn from typed digits).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import soundfile as sf

from agent import log
from agent.call.announce import answer_of
from agent.call.consult import Consult, ConsultKit, said_when_failed
from agent.call.messages import LegEvent, LegFrame
from agent.call.recorder import CallRecorder, ended_outcome
from agent.call.turn import Turn
from agent.turn.tools import ToolCall, spoken_name, target_of, tool_response
from db.records import PENDING
from dialplan.profile import Profile
from models.audio import ASR_RATE
from models.llm.base import Message

DIGIT_PAUSE_S = 3.0
"""Typed digits without ``#`` become the caller's words after this long without another."""
MESSAGE_PAUSE_S = 2.5
"""A message ends after the caller has been silent this long (they may pause mid-message)."""
TRANSFER_WAIT_S = 30.0
"""A transfer with no final NOTIFY by then has failed."""


@dataclass
class _Pending:
    call: ToolCall
    source: str
    turn_index: int | None


@dataclass
class _Transfer:
    target: str
    sent_at: float
    action: _Pending
    seq: int
    """Its ``tool_calls`` row (:meth:`CallRecorder.action_started`)."""
    status: str = "REFER sent"
    """The latest news of it, for the row's detail."""


@dataclass
class _Message:
    parts: dict[int, tuple[str, np.ndarray]] = field(default_factory=dict)
    """Turn index -> its words and audio (a speculative part is replaced by its final turn)."""
    last_at: float = 0.0


@dataclass(frozen=True)
class Line:
    """What the call's actions may do to the line (each returns at once)."""

    say: Callable[[str], None]
    """Play a fixed phrase of the profile (from its cache) now."""
    hangup: Callable[[str], None]
    """End the call with this end reason (BYE)."""
    typed: Callable[[str], bool]
    """Start a turn from the caller's typed digits; False while it cannot start yet."""
    transfer: Callable[[str], None] | None = None
    """Send REFER to this URI (None: a line that cannot transfer, e.g. a simulation)."""
    send_dtmf: Callable[[str], None] | None = None
    """Send RFC 2833 digits down the line (None: a line that cannot)."""


class CallActions:
    """A call's actions; see the module docstring.

    Args:
        profile: tools, directory, keypad and phrases.
        rec: the call's records.
        line: what the actions may do to the line.
        history: the call's chat history (a failed transfer is told to the model).
        media_dir: where callers' messages are written.
        caller: the caller's URI (kept with their message).
        consult: what attended transfers need (None: a line that cannot place a second call;
            an attended entry's transfer is then made blind).
    """

    def __init__(self, profile: Profile, rec: CallRecorder, line: Line,
                 history: list[Message], media_dir: str | Path = "recordings",
                 caller: str = "", consult: ConsultKit | None = None):
        self.profile = profile
        self._rec = rec
        self._line = line
        self._history = history
        self._media = Path(media_dir)
        self._caller = caller
        self.pending: _Pending | None = None
        """An action waiting for its phrase to be heard."""
        self._transfer: _Transfer | None = None
        self._message: _Message | None = None
        self._messages = 0
        self._digits = ""
        self._digit_at = 0.0
        self._collecting = False
        self._typed: str | None = None  # typed words waiting for the caller's turn
        self._kit = consult
        self._consult: Consult | None = None
        """The attended transfer that has the caller (on hold, or bridged)."""
        self._legs: dict[str, Consult] = {}  # every one started: their legs' news, their end
        self._offer = False  # a message was offered after an attended transfer failed
        self._offer_taken: Turn | None = None  # the turn that said yes to it

    @property
    def call_id(self) -> str:
        return self._rec.call_id

    @property
    def transferring(self) -> bool:
        """A REFER is out and its outcome has not come: the caller is being put through."""
        return self._transfer is not None or self._consult is not None

    @property
    def holding(self) -> bool:
        """An attended transfer has the caller's audio (on hold, or bridged to the target)."""
        return self._consult is not None and self._consult.holding

    # ---- from turns ----------------------------------------------------------------------------

    def after_turn(self, turn: Turn) -> None:
        """A turn is done: its action waits for its phrase to be heard (if it was heard)."""
        r = turn.result
        if r is not None and not r.kept:
            self._offer = False  # answered otherwise: the offer of a message is over
        if r is None or r.action is None or turn.cancelled or not turn.gate_open or turn.error:
            return
        self.pending = _Pending(r.action, r.action.source, turn.index)

    def keep(self, turn: Turn, text: str, now: float) -> str:
        """Why a transcribed turn is not for the LLM ("" if it is).

        While a message is left its words and audio are kept as part of it (``message``);
        words said while a transfer runs go unanswered (``transferring``).
        """
        if self.transferring:
            return "transferring"
        if self._offer and self._message is None and answer_of(text) == "yes":
            self._offer_taken = turn  # a message once the turn is endpointed (see tick)
            return "message-offer"
        if self._message is None:
            return ""
        if text.strip():
            self._message.parts[turn.index] = (text.strip(), turn.utterance.audio)
            self._message.last_at = now
        return "message"

    # ---- the keypad ------------------------------------------------------------------------

    def dtmf(self, digit: str, now: float) -> None:
        """A keypad digit: a mapped action, or part of the number the caller is typing."""
        action = self.profile.keypad.get(digit)
        if action and not self._digits and not self._collecting:
            self._keypad(digit, action)
            return
        self._digit_at = now
        self._digits += digit
        if digit == "#":
            self._words(now)

    def _keypad(self, digit: str, action: str) -> None:
        kind, _, arg = action.partition(":")
        log.event("keypad", self.call_id, digit=digit, action=action)
        if kind == "say":
            self._record(ToolCall("say", {"text": arg}), "keypad", "ok")
            self._line.say(arg)
        elif kind == "transfer":
            call = ToolCall("transfer", {"target": arg})
            self.pending = _Pending(call, "keypad", None)
            self._line.say(self._transferring(arg))
        elif action == "message":
            self.pending = _Pending(ToolCall("take_message"), "keypad", None)
            self._line.say(self.profile.message_prompt)
        elif action == "end":
            self.pending = _Pending(ToolCall("end_call"), "keypad", None)
            self._line.say(self.profile.goodbye)

    def _words(self, now: float) -> None:
        """The typed digits become the caller's words ("keypad: 4729#")."""
        words, self._digits = f"keypad: {self._digits}", ""
        self._collecting = False
        log.event("keypad-typed", self.call_id, digits=words.removeprefix("keypad: "))
        self._rec.event("dtmf-typed", words)
        self._typed = words
        self._start_typed()

    def _start_typed(self) -> None:
        if self._typed is not None and self._line.typed(self._typed):
            self._typed = None

    # ---- running an action -----------------------------------------------------------------

    def heard(self, now: float) -> None:
        """The agent has finished speaking: run the action its words announced."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        call = pending.call
        if call.name == "end_call":
            self._record(call, pending.source, "ok", turn=pending.turn_index,
                         detail="implicit" if call.implicit else "")
            self._line.hangup("agent")
        elif call.name == "transfer":
            self._start_transfer(pending, now)
        elif call.name == "take_message":
            self._record(call, pending.source, "ok", turn=pending.turn_index)
            self._message = _Message(last_at=now)
        elif call.name == "collect_digits":
            self._record(call, pending.source, "ok", turn=pending.turn_index)
            self._collecting = True
            self._digit_at = now
        elif call.name == "send_digits":
            sent = self._line.send_dtmf is not None
            self._record(call, pending.source, "ok" if sent else "no-dtmf-on-this-line",
                         turn=pending.turn_index)
            if sent:
                self._line.send_dtmf(str(call.arguments.get("digits", "")))

    def _start_transfer(self, pending: _Pending, now: float) -> None:
        target = target_of(pending.call, self.profile)
        entry = self.profile.directory.get(target or "")
        if entry is not None and entry.attended and self._attended(pending, target, entry, now):
            return
        if entry is None or self._line.transfer is None:
            why = "unknown-target" if entry is None else "no-transfer-on-this-line"
            self._record(pending.call, pending.source, why, turn=pending.turn_index)
            self._failed(target or "staff", why)
            return
        seq = self._rec.action_started(pending.call.name, pending.call.arguments_json,
                                       pending.source, pending.turn_index, "REFER sent")
        self._transfer = _Transfer(target, now, pending, seq)
        log.event("transfer", self.call_id, target=target, uri=entry.uri,
                  attended=entry.attended)
        self._line.transfer(entry.uri)

    def _attended(self, pending: _Pending, target: str, entry, now: float) -> bool:
        """Start an attended transfer; False: it cannot be (it is made blind)."""
        if self._kit is None:
            return False
        consult = Consult(self._kit, self._rec, target, entry, self._consult_ended)
        if not consult.start(pending.call, pending.source, pending.turn_index, now):
            self._rec.event("consult", "no call slot free for the call to the target "
                                       "(sip.max_calls): made blind")
            return False
        self._consult = self._legs[consult.leg_id] = consult
        log.event("transfer", self.call_id, target=target, uri=entry.uri, attended=True,
                  consult=consult.leg_id)
        return True

    def leg(self, msg: LegEvent | LegFrame, now: float) -> None:
        """A frame or SIP event of an attended transfer's call to its target."""
        if (consult := self._legs.get(msg.leg)) is not None:
            consult.leg_input(msg, now)

    def _consult_ended(self, outcome: str) -> None:
        """The attended transfer settled the caller's side: ``ok`` and the rest."""
        c = self._consult
        if outcome == "bridged":
            return  # the consult keeps the caller's audio until a side hangs up
        self._consult = None
        if outcome in ("ok", "bridge-ended"):
            return self._line.hangup("transferred" if outcome == "ok" else "callee-bye")
        text = said_when_failed(self.profile, c.target, outcome)
        self._history.append(Message("user", tool_response(json.dumps(
            {"transfer": "failed", "target": c.target, "reason": outcome,
             "offered": "take_message"}))))
        self._history.append(Message("assistant", text))
        self._offer = True
        self._line.say(text)

    def transfer_status(self, code: int, reason: str, final: bool, now: float) -> None:
        """The REFER's progress (its response, then the NOTIFYs' sipfrag status)."""
        if self._consult is not None:
            self._consult.refer_status(code, reason, final, now)
            return
        t = self._transfer
        if t is None:
            return
        log.event("transfer-status", self.call_id, code=code, reason=reason, final=final,
                  level=logging.INFO if final else logging.DEBUG)
        t.status = f"{code} {reason}".strip()
        if not final:
            self._rec.action_news(t.seq, PENDING, t.status, now - t.sent_at)
            return
        ok = 200 <= code < 300
        self._close_transfer("ok" if ok else f"sip-{code}", t.status, now)
        if ok:
            self._line.hangup("transferred")
        else:
            self._failed(t.target, f"sip-{code}")

    def _close_transfer(self, outcome: str, detail: str, now: float) -> None:
        t, self._transfer = self._transfer, None
        if self.profile.directory[t.target].attended:
            detail += " (attended asked; made blind)"
        self._rec.action_news(t.seq, outcome, detail, now - t.sent_at)

    def _failed(self, target: str, why: str) -> None:
        self._history.append(Message("user", tool_response(json.dumps(
            {"transfer": "failed", "target": target, "reason": why}))))
        self._line.say(self.profile.transfer_failed.format(name=spoken_name(target)))

    def _transferring(self, target: str) -> str:
        return self.profile.transferring.format(name=spoken_name(target))

    # ---- deadlines ---------------------------------------------------------------------------

    def tick(self, now: float, caller_speaking: bool, turn_in_flight: bool) -> None:
        """Typed digits that stopped, a message that ended, a transfer that never answered."""
        if self._digits and now - self._digit_at >= DIGIT_PAUSE_S:
            self._words(now)
        elif self._collecting and not self._digits and now - self._digit_at >= 4 * DIGIT_PAUSE_S:
            self._collecting = False  # they never typed: their words go to the LLM again
        self._start_typed()
        m = self._message
        if (m is not None and m.parts and not caller_speaking and not turn_in_flight
                and now - m.last_at >= MESSAGE_PAUSE_S):
            self._save_message()
            self._line.say(self.profile.message_taken)
        if self._consult is not None:
            self._consult.tick(now)
        if (taken := self._offer_taken) is not None and (taken.endpointed or taken.cancelled):
            self._offer_taken = None
            if not taken.cancelled and not taken.merged and self._offer:
                self._offer = False  # "yes" to the offer of a message: the caller leaves one
                self.pending = _Pending(ToolCall("take_message"), "offer", taken.index)
                self._line.say(self.profile.message_prompt)
        t = self._transfer
        if t is not None and now - t.sent_at >= TRANSFER_WAIT_S:
            self._close_transfer("timeout", f"no final NOTIFY in {TRANSFER_WAIT_S:g} s; "
                                 f"last: {t.status}", now)
            self._failed(t.target, "timeout")

    def finish(self, end_reason: str, now: float) -> None:
        """The call ends: keep a message being left, close what the end cut short.

        A transfer still waiting for its outcome, or an action announced and never run, gets
        the outcome :func:`~agent.call.recorder.ended_outcome` gives the end reason.
        """
        if self._message is not None and self._message.parts:
            self._save_message()
        gone = ended_outcome(end_reason)
        for consult in self._legs.values():
            consult.finish(end_reason, now)
        if self._transfer is not None:
            self._close_transfer(gone, f"the call ended ({end_reason}) "
                                 f"{now - self._transfer.sent_at:.1f} s after the REFER, before "
                                 f"its outcome; last: {self._transfer.status}", now)
        if self.pending is not None:  # announced, never run: the caller did not stay for it
            p, self.pending = self.pending, None
            self._record(p.call, p.source, gone, f"not run: the call ended ({end_reason}) "
                         "while it was announced", turn=p.turn_index)

    def _save_message(self) -> None:
        m, self._message = self._message, None
        parts = [m.parts[i] for i in sorted(m.parts)]
        text = " ".join(t for t, _ in parts)
        audio = np.concatenate([a for _, a in parts]) if parts else np.zeros(0, np.float32)
        self._messages += 1
        path: str | None = None
        try:
            day = self._media / "messages" / datetime.now(UTC).strftime("%Y-%m-%d")
            day.mkdir(parents=True, exist_ok=True)
            out = day / f"{self.call_id}-{self._messages}.wav"
            sf.write(str(out), audio, ASR_RATE, subtype="PCM_16")
            path = str(out)
        except OSError as e:  # a full disk keeps the words, and says why there is no audio
            self._rec.event("error", f"message audio not written: {e!r}")
        self._rec.message(text, self._caller, path, len(audio) / ASR_RATE)
        log.event("message", self.call_id, chars=len(text), audio=path,
                  duration_s=round(len(audio) / ASR_RATE, 1))

    def _record(self, call: ToolCall, source: str, outcome: str, detail: str = "",
                latency_s: float | None = None, turn: int | None = None) -> None:
        self._rec.tool(call.name, call.arguments_json, source, outcome, detail, latency_s, turn)
