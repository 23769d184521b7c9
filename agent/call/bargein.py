"""Is the caller interrupting the agent, or is that the agent's own echo?

SIP has no echo canceller in this agent, so while the agent speaks, its voice may come back on
the inbound stream (phones, gateways). Caller audio counts towards a barge-in only while the VAD
hears speech *and* the caller's level exceeds ``barge_in_echo_ratio`` times the agent's own
outbound level over the last 400 ms (echo is quieter than what caused it). Such speech must add up
to ``barge_in_min_s`` before the reply is stopped, so a cough or a click does not cut it.
Pure logic: no threads, no SIP, no models.
"""

from __future__ import annotations

import math
from collections import deque

from dialplan.options import AudioOptions


class BargeInGate:
    """Accumulates qualifying caller speech frame by frame while the agent is speaking.

    Levels are compared over windows, not frame by frame: speech dips between syllables (an
    espeak question over G.711 swings widely in level within a word), and a per-frame rule
    fired only long after ``barge_in_min_s`` of real speech (the sipp barge-in test).

    Args:
        options: VAD thresholds, ``barge_in_min_s`` and ``barge_in_echo_ratio``.
        frame_s: duration of one inbound frame.
    """

    LEVEL_WINDOW = 10  # caller level over 200 ms
    SILENCE_RESET_S = 0.24  # this much VAD silence ends a stretch (a pause between words less)

    def __init__(self, options: AudioOptions, frame_s: float = 0.02):
        self.o = options
        self.frame_s = frame_s
        self._speech = 0  # frames of qualifying speech (counts, so no float drift)
        self._silence = 0
        self._power: deque[float] = deque(maxlen=self.LEVEL_WINDOW)

    @property
    def speech_s(self) -> float:
        """Qualifying caller speech in the current stretch."""
        return self._speech * self.frame_s

    def reset(self) -> None:
        self._speech = 0
        self._silence = 0
        self._power.clear()

    def update(self, probability: float, caller_rms: float, agent_rms: float) -> bool:
        """Add one inbound frame; True once it confirms a barge-in.

        Args:
            probability: the VAD's latest speech probability.
            caller_rms: RMS of this inbound frame.
            agent_rms: the agent's outbound RMS over the last 400 ms (0 when silent).
        """
        self._power.append(caller_rms * caller_rms)
        if probability < self.o.vad_release:
            self._silence += 1
            if self._silence * self.frame_s >= self.SILENCE_RESET_S - 1e-9:
                self._speech = 0  # the caller stopped: a new stretch must start over
            return False
        self._silence = 0
        caller_level = math.sqrt(sum(self._power) / len(self._power))
        loud_enough = caller_level > self.o.barge_in_echo_ratio * agent_rms
        if probability >= self.o.vad_threshold and loud_enough:
            self._speech += 1
        else:
            # Speech-like but as quiet as echo: let it wear the count down, not reset it, so
            # echo peaks cannot add up over a long reply but a real voice dipping once can.
            self._speech = max(0, self._speech - 1)
        return self.speech_s >= self.o.barge_in_min_s - 1e-9
