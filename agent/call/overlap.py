"""Caller speech over the agent's audio: echo, a backchannel, or the caller going on?

Turn-taking (:mod:`agent.call.turntaking`) asks two things when speech begins while the agent
is talking, and this module answers them: whether speech that began over the agent's voice is
the caller's (it goes on past the echo's tail once the agent fell silent, :class:`EchoWatch`),
and whether the caller's speech began before the reply now playing did (the caller was still
talking: :func:`began_before_reply`). Pure logic, on the call's loop; imports only the turn.
"""

from __future__ import annotations

from agent.call.turn import Turn
from models.vad.segmenter import Utterance

RESUMED_GRACE_S = 0.3
"""Caller speech that began this soon after a reply started is the caller going on (a
mid-thought pause taken for the end), not a barge-in: the caller hears the reply ~0.1 s after
it leaves (jitter buffer, packetisation) and cannot react to it in under ~0.2 s."""

ECHO_TAIL_S = 0.4
"""Echo of the agent's voice ends this long after its audio does (the barge-in gate's echo
window): speech going on longer than that after the agent fell silent is the caller's."""


class EchoWatch:
    """Speech that began while the agent was talking, until it is known to be the caller's.

    ``suspect`` while such speech is undecided; ``quiet_at`` is when the agent's audio ended
    (None while it still plays).
    """

    def __init__(self):
        self.suspect = False
        self.quiet_at: float | None = None

    def began_over_agent(self) -> None:
        """Speech began over the greeting or a reply: decided once the agent falls silent."""
        self.suspect, self.quiet_at = True, None

    def agent_quiet(self, at: float) -> None:
        """The agent's greeting or reply finished playing at ``at``."""
        self.quiet_at = at

    def clear(self) -> None:
        """The speech is decided (the caller's, or dropped with a barge-in)."""
        self.suspect = False

    def callers(self, end_at: float) -> bool:
        """Speech that began over the agent and went on after it fell silent is the caller's."""
        return self.quiet_at is not None and end_at - self.quiet_at >= ECHO_TAIL_S

    def after_agent_ms(self, end_at: float) -> int:
        """How long the speech went on after the agent fell silent, in ms (for the log)."""
        return round((end_at - (self.quiet_at or end_at)) * 1000)


def same_speech(turn: Turn, utt: Utterance) -> bool:
    """The turn (speculated at a pause) ends where the endpointed utterance ends.

    Compared by the segmenter's speech-end offset (exact: both come from the same chunk
    count), not by audio length: a trimmed length recomputed from float seconds once came out
    one sample short and split a turn in two.
    """
    return turn.utterance.end_s == utt.end_s


def began_before_reply(turn: Turn, start_at: float) -> bool:
    """The caller's speech began before the turn's reply reached the line (none of it echo)."""
    first = turn.timeline.first_frame_out_at
    return first is None or start_at < first
