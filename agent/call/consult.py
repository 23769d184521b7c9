"""Attended (warm) transfer: the caller on hold, the target called, told who is coming, asked.

One :class:`Consult` per attended transfer (a directory entry with ``attended = true``), run on
the caller's call's loop; :class:`~agent.call.actions.CallActions` starts it and acts on its
end. Its phases:

1. ``dialing``: the caller hears hold audio (:mod:`agent.call.hold`) and hears nothing else;
   their words are not turns. The agent calls the target on a second call of its own, the
   *consult leg* (:mod:`agent.call.legs`): a row of its own in the call log, direction
   ``outbound``, whose first event names the caller's call (``consult-for``), as the caller's
   ``consult`` event and the transfer's ``tool_calls`` row name the leg. Meanwhile the LLM
   writes one sentence about the call from its history (:mod:`agent.call.announce`, a
   ``PLAYOUT`` job, below the callers' turns); failed, refused or not ready
   :data:`SUMMARY_WAIT_S` after the answer, the profile's ``consult_summary`` is said instead.
2. ``announcing``: the target answered and hears the sentence, then ``consult_ask``.
3. ``asking``: "yes" or key 1 accepts, "no" or key 2 declines. Keys count from the answer on,
   words once the question has been said (before, the agent's own voice is on the line).
4. ``joining``: a REFER with Replaces to the caller. A 2xx NOTIFY is ``ok`` (the agent hangs up
   the caller's call; the target's side ends the leg as it replaces it, or the agent does).
   The REFER refused (4xx, 501), failing, or without a final NOTIFY in :data:`REFER_WAIT_S`:
   the two calls' audio is bridged (``bridging``, then ``bridged``, outcome ``bridged``) until
   one of them hangs up.

No answer (``consult_ring_s``, 408, 480), busy (``sip-486``), declined (by word, key or hanging
up), no decision in ``consult_answer_s`` (``timeout``): the leg is ended, the hold stops and the
caller hears what happened and is offered a message. The caller leaving first closes the row
``caller-gone``. Imports no pjsua2 and no database code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from agent.call import announce
from agent.call.hold import HoldAudio
from agent.call.jobs import CallJobs
from agent.call.legs import ConsultLine, LegInputs
from agent.call.messages import LegEvent, LegFrame
from agent.call.playout import Playout
from agent.call.recorder import CallInfo, CallRecorder, ended_outcome
from agent.sip.audiolink import AudioLink
from agent.turn.runner import Stages
from agent.turn.tools import ToolCall, spoken_name
from db.records import PENDING
from dialplan.profile import DirectoryEntry, Profile
from models.audio import line_resampler, pcm16_to_float
from models.llm.base import Message
from models.priority import Priority
from models.vad.segmenter import Segmenter, Utterance

SUMMARY_WAIT_S = 4.0
"""After the target answers, how long the announcement waits for the LLM's sentence."""
REFER_WAIT_S = 30.0
"""A REFER with no final NOTIFY by then has failed: the calls are bridged instead."""
HOLD_AHEAD_S = 0.6
"""Hold audio queued ahead on the caller's playout (topped up a second at a time)."""
HOLDING = ("dialing", "announcing", "asking", "joining", "bridging")
BUSY = (486, 600)
NO_ANSWER = (408, 480, 487)


def said_when_failed(profile: Profile, target: str, outcome: str) -> str:
    """What the caller hears when an attended transfer failed: what happened, and an offer."""
    phrase = (profile.consult_busy if outcome in ("sip-486", "sip-600") else
              profile.consult_declined if outcome in ("declined", "timeout") else
              profile.consult_no_answer)
    return phrase.format(name=spoken_name(target))


@dataclass(frozen=True)
class ConsultKit:
    """What a call lends its attended transfers (built once by its session)."""

    line: ConsultLine
    profile: Profile
    stages: Stages
    jobs: CallJobs
    phrase: Callable[[str], np.ndarray]
    """The profile's cached fixed phrases, at the line's rate."""
    playout: Playout
    """The caller's: the hold audio goes there."""
    history: list[Message]
    post_leg: Callable[..., None]
    """The caller's session's :meth:`~agent.call.inputs.CallInputs.leg`."""
    post_frame: Callable[[LegFrame], None]
    """Puts a leg frame in the caller's session's inbox (the clock thread)."""
    clock: Callable[[], float]
    rate: int
    call_id: str


class Consult:
    """One attended transfer; see the module docstring.

    Args:
        kit: what the call lends it.
        rec: the caller's call's records.
        target: the directory entry's name.
        entry: the directory entry.
        on_end: told the outcome once the caller's side of it is settled (``ok``,
            ``bridged``, ``bridge-ended`` when a bridged leg hangs up, or a failure).
    """

    def __init__(self, kit: ConsultKit, rec: CallRecorder, target: str, entry: DirectoryEntry,
                 on_end: Callable[[str], None]):
        self._kit = kit
        self._rec = rec
        self.target = target
        self.entry = entry
        self._on_end = on_end
        self._name = spoken_name(target)
        self.leg_id = uuid.uuid4().hex[:16]
        self.phase = "dialing"
        self.key: int | None = None
        self._inputs = LegInputs(self.leg_id, kit.post_leg)
        self.playout = Playout(kit.rate, clock=kit.clock)
        self._link = AudioLink(sink=self._frame, source=self.playout.next_frame)
        self._hold = HoldAudio(kit.profile.hold_audio, kit.rate)
        self._vad = Segmenter(kit.stages.vad.new_stream(), kit.profile.audio,
                              model=kit.stages.vad.model_name)
        self._to16k = line_resampler(kit.rate)
        self._leg_rec = rec.leg(self.leg_id)
        self._seq = 0
        self._t0 = self._answered_at = self._asked_at = self._joined_at = 0.0
        self._summary: str | None = None
        self._announced = self._asked_again = False
        self._voiced_at: float | None = None  # when the announcement's audio was queued
        self._leg_up = self._leg_ended = self._closed = self._hung_up = False
        self._leg_reason = ""
        self._codec = ""
        self._why = ""

    @property
    def holding(self) -> bool:
        """The caller's audio is the transfer's: on hold, or bridged to the target."""
        return self.phase != "done"

    # ---- start -----------------------------------------------------------------------------

    def start(self, call: ToolCall, source: str, turn_index: int | None, now: float) -> bool:
        """Call the target and put the caller on hold; False when no call slot is free."""
        kit = self._kit
        self.key = kit.line.dial(self.entry.uri, self._link, self._inputs)
        if self.key is None:
            return False
        self._t0 = now
        self._leg_up = True
        self._seq = self._rec.action_started(call.name, call.arguments_json, source,
                                             turn_index, self._detail("dialing"))
        self._leg_rec.started(CallInfo(caller_uri=self.entry.uri, direction="outbound"),
                              kit.profile, kit.stages)
        self._leg_rec.event("consult-for", f"call {kit.call_id}: attended transfer of its "
                                           f"caller to {self.target}")
        self._rec.event("consult", f"call {self.leg_id} to {self.target} ({self.entry.uri})")
        kit.playout.clear()
        kit.playout.start_reply()
        self._top_up()
        messages = announce.summary_messages(kit.history, self._name)
        if messages is None:
            self._summarized(None, "template: the caller has said nothing yet")
        else:
            kit.jobs.submit(announce.summarize, kit.stages.llm, messages, stage="llm",
                            priority=Priority.PLAYOUT, then=self._summary_done)
        return True

    # ---- the leg's news --------------------------------------------------------------------

    def leg_input(self, msg: LegEvent | LegFrame, now: float) -> None:
        """A frame or SIP event of the consult leg."""
        if isinstance(msg, LegFrame):
            if self.phase == "asking":
                self._listen(msg.data)
            return
        kind = msg.kind
        if kind == "media":
            self._codec = msg.detail
            if self.phase != "dialing":
                return
            self.phase, self._answered_at = "announcing", now
            self._news("answered", now)
            self._leg_rec.event("answered", msg.detail)
        elif kind == "dtmf":
            self._leg_rec.event("dtmf", msg.detail)
            if self.phase in ("announcing", "asking") and msg.detail in "12":
                self._decided("yes" if msg.detail == "1" else "no", f"key {msg.detail}", now)
        elif kind == "gone":
            self._gone(msg.code, msg.detail == "local", now)
        elif kind == "bridged" and self.phase == "bridging":
            self.phase = "bridged"
            self._kit.playout.clear()  # the hold ends: the caller hears the target
            self._close("bridged", f"{self._why}; the calls' audio bridged", now)
            self._leg_rec.event("bridged", f"with call {self._kit.call_id}")
            self._on_end("bridged")
        elif kind == "bridge-failed" and self.phase == "bridging":
            self._fail("bridge-failed", f"{self._why}; the bridge failed: {msg.detail}", now)
        elif kind == "shutdown":
            self._hangup_leg(msg.detail or "shutdown")

    def _gone(self, code: int, by_local: bool, now: float) -> None:
        self._leg_up = False
        if self.phase == "dialing":
            outcome = ("sip-486" if code == 486 else "no-answer" if code in NO_ANSWER
                       else "declined" if code == 603 else f"sip-{code}")
            self._leg_reason = f"unanswered-{code}"
            self._fail(outcome, f"the target's line answered {code}", now)
        elif self.phase in ("announcing", "asking"):
            self._leg_reason = "callee-bye"
            self._fail("declined", "the target hung up before deciding", now)
        elif self.phase == "joining":
            self._leg_reason = "replaced"  # the target's side swapped it for the caller's call
        elif self.phase == "bridged":
            self._leg_reason = "callee-bye"
            self.phase = "done"
            self._on_end("bridge-ended")
        self._end_leg(self._leg_reason or ("agent-hangup" if by_local else "callee-bye"), now)

    # ---- the clock ---------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Hold audio, the announcement, and the deadlines (after every message of the call)."""
        p = self._kit.profile
        if self.phase in HOLDING:
            self._top_up()
        if self.phase == "dialing" and now - self._t0 >= p.consult_ring_s:
            self._leg_reason = "no-answer"
            self._fail("no-answer", f"no answer in {p.consult_ring_s:g} s", now)
        elif self.phase == "announcing":
            if not self._announced and (self._summary is not None
                                        or now - self._answered_at >= SUMMARY_WAIT_S):
                self._announce()
            elif self._voiced_at is not None and not self.playout.busy:
                self.phase, self._asked_at = "asking", now
                self._news("asked", now)
        elif self.phase == "asking" and now - self._asked_at >= p.consult_answer_s:
            self._leg_reason = "timeout"
            self._fail("timeout", f"no answer to the question in {p.consult_answer_s:g} s", now)
        elif self.phase == "joining" and now - self._joined_at >= REFER_WAIT_S:
            self._bridge(f"no final NOTIFY to the REFER in {REFER_WAIT_S:g} s", now)

    def _top_up(self) -> None:
        if self._kit.playout.queued_s < HOLD_AHEAD_S:
            self._kit.playout.push(self._hold.next(1.0))

    # ---- the announcement and the answer -------------------------------------------------

    def _summary_done(self, f: Future) -> None:
        if f.exception() is not None:
            self._summarized(None, f"template: the LLM failed ({f.exception()!r})")
            return
        sentence = announce.one_sentence(f.result())
        self._summarized(sentence, "llm" if sentence else f"template: refused {f.result()!r}")

    def _summarized(self, sentence: str | None, how: str) -> None:
        if self._summary is not None or self._leg_ended:  # the template was said already
            return
        self._summary = sentence or self._kit.profile.consult_summary.format(name=self._name)
        self._leg_rec.event("summary", f"{how}: {self._summary}")

    def _announce(self) -> None:
        self._announced = True
        if self._summary is None:
            self._summarized(None, f"template: no sentence from the LLM in {SUMMARY_WAIT_S:g} s")
        kit = self._kit
        kit.jobs.submit(announce.synthesize, kit.stages.tts, self._summary, kit.rate,
                        stage="tts", priority=Priority.PLAYOUT, then=self._voiced)

    def _voiced(self, f: Future) -> None:
        if self.phase != "announcing":
            return
        kit = self._kit
        template = kit.profile.consult_summary.format(name=self._name)
        pcm = f.result() if f.exception() is None else kit.phrase(template)
        self.playout.start_reply()
        self.playout.push(pcm)
        self.playout.push(np.zeros(int(0.3 * kit.rate), np.int16))
        self.playout.push(kit.phrase(kit.profile.consult_ask))
        self.playout.end_reply()
        self._voiced_at = kit.clock()

    def _listen(self, data: bytes) -> None:
        for ev in self._vad.feed(self._to16k.process(pcm16_to_float(data))):
            if isinstance(ev, Utterance):
                self._kit.jobs.submit(self._kit.stages.asr.transcribe, ev.audio, stage="asr",
                                      priority=Priority.PLAYOUT, then=self._heard)

    def _heard(self, f: Future) -> None:
        if self.phase != "asking" or f.exception() is not None:
            return
        text = f.result().text.strip()
        answer = announce.answer_of(text)
        self._leg_rec.event("heard", f"{answer or 'unclear'}: {text}")
        if answer is not None:
            self._decided(answer, f"said {text!r}", self._kit.clock())
        elif text and not self._asked_again:  # once: ask again, and wait for the answer
            self._asked_again = True
            self.playout.start_reply()
            self.playout.push(self._kit.phrase(self._kit.profile.consult_ask))
            self.playout.end_reply()

    def _decided(self, answer: str, how: str, now: float) -> None:
        self.playout.clear()
        if answer == "no":
            self._leg_reason = "declined"
            self._fail("declined", f"declined ({how})", now)
            return
        self.phase, self._joined_at = "joining", now
        self._news(f"accepted ({how}); REFER with Replaces sent", now)
        self._leg_rec.event("accepted", how)
        self._kit.line.replaces(self.key)

    # ---- joining ---------------------------------------------------------------------------

    def refer_status(self, code: int, reason: str, final: bool, now: float) -> None:
        """The REFER with Replaces: its response, then the NOTIFYs (``final`` last)."""
        if self.phase != "joining":
            return
        status = f"{code} {reason}".strip()
        if not final:
            self._news(f"REFER: {status}", now)
        elif 200 <= code < 300:
            self._leg_reason = "transferred"
            self.phase = "done"
            self._close("ok", f"REFER with Replaces: {status}", now)
            self._on_end("ok")
        else:
            self._bridge(f"REFER with Replaces: {status}", now)

    def _bridge(self, why: str, now: float) -> None:
        self._why = why
        if not self._leg_up:
            self._fail("bridge-failed", f"{why}; the target's call had ended", now)
            return
        self.phase = "bridging"
        self._news(f"{why}; bridging the calls' audio", now)
        self._kit.line.bridge(self.key)

    # ---- ending ----------------------------------------------------------------------------

    def finish(self, end_reason: str, now: float) -> None:
        """The caller's call ends: close what is open, end the leg."""
        if self.phase not in ("done", "bridged"):
            self._close(ended_outcome(end_reason), f"the call ended ({end_reason}) while "
                                                   f"{self.phase}", now)
        self.phase = "done"
        self._leg_reason = self._leg_reason or ended_outcome(end_reason)
        self._hangup_leg(self._leg_reason)
        self._end_leg(self._leg_reason, now)  # its disconnect will find no loop to tell
        self._inputs.owner_ended()

    def _fail(self, outcome: str, detail: str, now: float) -> None:
        self.phase = "done"
        self._close(outcome, detail, now)
        self._hangup_leg(self._leg_reason or outcome)
        self.playout.clear()
        self._kit.playout.clear()  # the hold ends; the caller hears why next
        self._on_end(outcome)

    def _hangup_leg(self, reason: str) -> None:
        if self._leg_up and self.key is not None and not self._hung_up:
            self._hung_up = True
            self._leg_reason = self._leg_reason or reason
            self._kit.line.hangup(self.key)

    def _end_leg(self, reason: str, now: float) -> None:
        if self._leg_ended or self.key is None:
            return
        self._leg_ended = True
        self._leg_rec.ended(reason, 0, self._codec, self.playout.metrics(), now - self._t0)

    def _detail(self, status: str) -> str:
        return f"attended, consult call {self.leg_id}: {status}"

    def _news(self, status: str, now: float) -> None:
        if not self._closed:
            self._rec.action_news(self._seq, PENDING, self._detail(status), now - self._t0)

    def _close(self, outcome: str, detail: str, now: float) -> None:
        if self._closed:
            return
        self._closed = True
        self._rec.action_news(self._seq, outcome, self._detail(detail), now - self._t0)

    def _frame(self, data: bytes) -> None:
        # pjmedia's clock thread: stamp and queue, nothing else.
        if not self._leg_ended:
            self._kit.post_frame(LegFrame(self.leg_id, self._kit.clock(), data))
