"""What the agent does when the CPU is overloaded: every such decision, in one place.

A process has one :class:`LoadPolicy`, built from its config and scheduler and handed to every
call. Each rule below trades something a caller would notice for time; what each costs is
measured by the benchmark named beside it, not assumed:

1. **Priorities** (:class:`~agent.turn.urgency.Urgency`, levels in :mod:`models.priority`):
   the work a caller is waiting to hear goes first; a reply that keeps ahead of playout waits.
   Costs nothing a caller hears (``bench call``, 4 at once).
2. **Pairing** (``[scheduler] pairs``): two callers' urgent jobs share the two cores, one each,
   rather than queue for both (``bench call``, 4 at once).
3. **Batching**: utterances that wait for the CPU together are transcribed in one pass
   (``asr.max_batch``), and every call's reply is decoded in one llama.cpp batch
   (``llm.backend = "llama-batch"``). Same words, same tokens (``bench asr``, ``bench llm``).
4. **The cheaper rung** (``profiles.X.under_load``, :meth:`LoadPolicy.under_load`): a turn
   that starts behind other calls' turns still waiting for their first audio, or while
   first-audio work has lately waited too long, is answered by the under-load profile's
   smaller models, in the same voice and persona. Costs recognition accuracy and answer
   quality on those turns (``bench wer``, ``bench call`` counts the "say that again" turns).
5. **Background work only when idle** (:meth:`LoadPolicy.may_prefill`): the caller's words so
   far go into the LLM's cache only while no other call is busy and the CPU has been quiet;
   under load a lone background pass still delays the next turn (``bench call``).
6. **A phrase while waiting** (``limits.filler_after_s``, the session): a caller whose answer is
   late hears the profile's filler once. Off by default.
7. **Admission** (:meth:`LoadPolicy.refuse`, ``sip.admit_max_wait_s``): while first-audio work
   waits too long, new calls are refused with ``sip.overload_code`` rather than answered late.
8. **Post-call summaries wait** (:meth:`LoadPolicy.may_summarize`, :mod:`agent.summary`): one
   starts when no call is up, or when the calls up are quiet as for rule 5, and runs at
   background priority; while calls are up under load it waits and catches up later. Costs
   the summaries' delay, nothing a caller hears (``bench summary``, the summary tests).

Imports no SIP; reads nothing from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.turn.backlog import Backlog
from dialplan.options import LimitOptions
from dialplan.sip import SIPOptions
from models.priority import Priority
from models.scheduler import Scheduler

UNDER_LOAD_WINDOW_S = 30.0
"""How far back the scheduler's measured waits count for ``limits.under_load_after_s``."""
PREFILL_QUIET_S = 0.3
"""The words so far are transcribed and prefilled only after the CPU has had no other work
for this long (and none waits): a background job is not preempted, and started in the gap
between two jobs of another caller's turn it delays that turn (``bench call``, 4 at once)."""
PREFILL_MAX_WAIT_S = 0.1
PREFILL_LOAD_WINDOW_S = 30.0
"""Nor, while other calls are up, when callers' first-audio work has lately waited for the CPU
(p90 over more than ``PREFILL_MAX_WAIT_S``, over this window): under load the idle moments are
short and a background pass that starts in one still delays the next turn. A call alone
ignores it: the waits it then sees are its own reply's jobs queued behind each other."""


@dataclass
class LoadPolicy:
    """The process's rules under load (see the module docstring), shared by every call.

    Args:
        scheduler: the process's scheduler (its measured waits are the load).
        backlog: turns of every call not yet heard answered, and which calls are up.
    """

    scheduler: Scheduler
    backlog: Backlog = field(default_factory=Backlog)

    def measured_wait(self, window_s: float = UNDER_LOAD_WINDOW_S) -> float:
        """p90 seconds first-audio work waited for the CPU over the last ``window_s``."""
        return self.scheduler.recent_wait(Priority.FIRST_AUDIO, window_s)

    def under_load(self, limits: LimitOptions, call: object, ahead: int) -> bool:
        """Whether ``call``'s turn starting now takes the cheaper rung.

        Overloaded: ``ahead`` turns of other calls are still waiting for their first audio
        (this one would wait for all of them), or as many other callers are still speaking
        (their turns will compete with this one's), or first-audio work has lately waited
        longer than ``limits.under_load_after_s``.
        """
        ahead = max(ahead, self.backlog.busy_others(call))
        return bool((limits.under_load_ahead and ahead >= limits.under_load_ahead)
                    or self.measured_wait() > limits.under_load_after_s)

    def may_prefill(self, call: object, again: bool = False) -> bool:
        """Whether ``call``'s words so far may be transcribed and prefilled now.

        ``again``: asked once more after the ASR pass, before the LLM's (the measured-load
        rule is not asked twice).
        """
        if self.backlog.busy_others(call) or not self.scheduler.quiet_for(PREFILL_QUIET_S):
            return False
        if again or self.backlog.alone(call):
            return True
        return self.measured_wait(PREFILL_LOAD_WINDOW_S) <= PREFILL_MAX_WAIT_S

    def may_summarize(self, short_steps: bool, crowded: bool = False) -> bool:
        """Whether a post-call summary may start now (rule 8).

        Args:
            short_steps: the LLM reads a background prompt a few tokens a step
                (:attr:`~models.llm.base.LLM.reads_in_short_steps`); else it starts only
                when no call is up, since its whole prompt would be one job a caller waits on.
            crowded: the calls up need every LLM context (the summary would hold one).
        """
        if self.backlog.alone(None):
            return True
        if not short_steps or crowded or self.backlog.busy_others(None):
            return False
        return (self.scheduler.quiet_for(PREFILL_QUIET_S)
                and self.measured_wait(PREFILL_LOAD_WINDOW_S) <= PREFILL_MAX_WAIT_S)

    def refuse(self, sip: SIPOptions, active_calls: int) -> float | None:
        """The measured wait that refuses a new call now, or None to answer it."""
        if sip.admit_max_wait_s <= 0 or not active_calls:
            return None  # off, or no call in progress: the measured waits are history
        waited = self.measured_wait(sip.admit_window_s)
        return waited if waited > sip.admit_max_wait_s else None
