"""Calls without SIP: caller audio played into a real :class:`CallSession`, paced as RTP would be.

``simulate FILE`` and ``bench pipeline`` run here, and so do the session tests: the file's audio
goes through an 8 kHz G.711 line, then :class:`SimulatedLine` plays pjmedia's part, handing the
session one 20 ms frame and taking one outbound frame per tick. Everything after the line is
the code a SIP call runs (greeting, turn-taking, barge-in, playout, call-log records); nothing
here decides when a turn starts or ends.

``fast`` runs on the call's :class:`~agent.call.clock.Clock`, which the line skips ahead only
while the session has no model work in flight (silence, caller speech no turn is working on
yet, reply audio already synthesised), so every recorded stage is still real seconds. The line
can also play a second channel: the agent's own voice coming back (echo), delayed and
attenuated.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from agent.call.clock import REAL_TIME, Clock
from agent.call.recorder import CallInfo
from agent.call.session import CallSession
from agent.sip.audiolink import AudioLink
from agent.turn.load import LoadPolicy
from agent.turn.runner import Stages, TurnRunner
from db.records import CallLog, Record, TurnRecord
from dialplan.profile import Profile
from models.audio import PHONE_RATE, SPEECH_RMS, rms, speech_runs, through_phone_line

FRAME_S = 0.02
TRAILING_SILENCE_S = 1.5
"""A caller who has said everything waits this long (and for the agent to finish) to hang up."""
MAX_WAIT_S = 30.0
"""...but never longer than this after the end of their audio."""


class SimulatedLine:
    """A phone line driving an :class:`AudioLink` frame by frame, as pjmedia's clock does.

    Args:
        link: the session's audio link.
        rate: the line's sample rate.
        clock: the session's clock.
        skip_while: in fast mode, True while the clock may jump over the next frame.
        sync: in fast mode, ``sync(n)`` returns once the session has handled ``n`` frames.
        echo_gain: level of the agent's own audio mixed back into the caller's channel.
        echo_delay_s: delay of that echo.
    """

    def __init__(self, link: AudioLink, rate: int = PHONE_RATE, clock: Clock = REAL_TIME,
                 skip_while: Callable[[], bool] | None = None,
                 sync: Callable[[int], object] | None = None,
                 echo_gain: float = 0.0, echo_delay_s: float = 0.1):
        self.link = link
        self.rate = rate
        self.clock = clock
        self.n = int(rate * FRAME_S)
        self._skip_while = skip_while
        self._sync = sync
        self._echo_gain = echo_gain
        self._echo: deque[np.ndarray] = deque(
            [np.zeros(self.n, np.int16)] * max(1, round(echo_delay_s / FRAME_S)))
        self._script: deque[np.ndarray] = deque()
        self._lock = threading.Lock()
        self.out: list[tuple[float, np.ndarray]] = []
        """(stamp, frame) of every outbound frame: what the caller heard."""
        self.script_done_at: float | None = None
        """Stamp of the first frame after the queued caller audio ran out."""
        self.hang_up_when: Callable[[SimulatedLine], bool] | None = None
        self.hung_up = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="line-clock", daemon=True)

    def say(self, pcm: np.ndarray) -> None:
        """Queue caller audio (int16 at the line rate) after whatever is still queued."""
        pcm = np.asarray(pcm, np.int16)
        pcm = np.concatenate([pcm, np.zeros((-len(pcm)) % self.n, np.int16)])
        with self._lock:
            self._script.extend(pcm.reshape(-1, self.n))
            self.script_done_at = None

    def start(self) -> SimulatedLine:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        due = self.clock.now()
        frames = 0
        while not self._stop.is_set():
            if self._skip_while is not None and self._skip_while():
                self.clock.skip(due - self.clock.now())
            else:
                time.sleep(max(0.0, due - self.clock.now()))
            now = self.clock.now()
            with self._lock:
                frame = self._script.popleft() if self._script else None
                if frame is None and self.script_done_at is None:
                    self.script_done_at = now
            if frame is None:
                frame = np.zeros(self.n, np.int16)
            if self._echo_gain:
                back = self._echo_gain * self._echo[0].astype(np.float32)
                frame = np.clip(frame + back, -32768, 32767).astype(np.int16)
            self.link.sink(frame.tobytes())
            frames += 1
            out = np.frombuffer(self.link.source(), np.int16)
            self.out.append((now, out))
            self._echo.append(out)
            self._echo.popleft()
            if self._sync is not None:
                self._sync(frames)
            if self.hang_up_when is not None and self.hang_up_when(self):
                self.hung_up.set()
                return
            due += FRAME_S

    def speech_spans(self, threshold: float = SPEECH_RMS) -> list[tuple[float, float]]:
        """(first, last) stamps of the runs of outbound frames louder than ``threshold``."""
        return speech_runs([(at, rms(f)) for at, f in list(self.out)], threshold,
                           min_gap_s=FRAME_S * 1.5)

    def audio(self) -> np.ndarray:
        """Everything the agent sent, int16 at the line rate."""
        frames = [f for _, f in list(self.out)]
        return np.concatenate(frames) if frames else np.zeros(0, np.int16)


class RecordingLog:
    """A call log that keeps every record and forwards it (to the real writer, if any)."""

    def __init__(self, inner: CallLog | None = None):
        self.inner = inner
        self.records: list[Record] = []

    def put(self, record: Record) -> None:
        self.records.append(record)
        if self.inner is not None:
            self.inner.put(record)


@dataclass
class SimulatedCall:
    """Result of a simulation: the call log's records and what the caller heard."""

    call_id: str
    records: list[Record] = field(default_factory=list)
    reply_audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    """The agent's side of the line at 8 kHz, from answer to hang-up."""
    end_reason: str = ""

    @property
    def turns(self) -> list[TurnRecord]:
        return [r for r in self.records if isinstance(r, TurnRecord)]


def simulate(
    audio: np.ndarray,
    rate: int,
    profile: Profile,
    stages: Stages,
    call_log: CallLog | None = None,
    fast: bool = False,
    law: str = "ulaw",
    source: str = "simulate",
    greeting: bool = True,
    phrase: Callable[[str], np.ndarray] | None = None,
    echo_gain: float = 0.0,
    under_load: tuple[Profile, Stages] | None = None,
    load: LoadPolicy | None = None,
) -> SimulatedCall:
    """Place one call from caller audio into a :class:`CallSession` and hang up when done.

    The caller's audio starts when the call is answered (as sipp's RTP stream does), so speech
    in the first seconds overlaps the greeting. After it, the caller waits in silence until the
    agent has answered everything (:data:`TRAILING_SILENCE_S` at least), then hangs up.

    Args:
        audio: mono float32 caller audio at ``rate``.
        rate: its sample rate (any).
        profile: the agent profile (prompt, greeting, stage options).
        stages: loaded models for that profile.
        call_log: where call/turn/event records also go (None: only the result).
        fast: skip the clock over frames while nothing computes (see the module docstring).
        law: G.711 variant of the simulated line.
        source: recorded in the call log.
        greeting: play the profile's greeting (benchmarks that time answers turn it off).
        phrase: cached fixed phrases (a process that already synthesised them passes its own).
        echo_gain: the agent's voice mixed back into the caller's channel at this level.
        under_load: the profile's cheaper profile and its models (as ``serve`` passes them:
            :meth:`~agent.turn.profiles.ReadyProfiles.for_call` gives both what it gives
            ``serve``, once :meth:`~agent.turn.profiles.ReadyProfiles.prepare` warmed them).
        load: the process's rules under load; calls placed at once share one, as ``serve``'s
            calls do (None: the call's own).

    Returns:
        The records the session wrote, the agent's audio and the end reason.
    """
    if not greeting:
        profile = replace(profile, greeting="")
    line_pcm = through_phone_line(audio, rate, law)
    clock = Clock()
    records = RecordingLog(call_log)
    agent_hung_up = threading.Event()
    session = CallSession(
        profile, stages, records, hangup=agent_hung_up.set,
        phrase=phrase or TurnRunner(stages, profile, out_rate=PHONE_RATE).prepare_phrases(),
        info=CallInfo(caller_uri=f"file:{source}", source=source), rate=PHONE_RATE, clock=clock,
        under_load=under_load, load=load)
    line = SimulatedLine(session.link, PHONE_RATE, clock,
                         skip_while=(lambda: not session.computing) if fast else None,
                         sync=session.wait_frames if fast else None, echo_gain=echo_gain)
    line.say(line_pcm)
    line.hang_up_when = lambda ln: _caller_done(ln, session, agent_hung_up)
    session.start()
    session.media_active("PCMU" if law == "ulaw" else "PCMA")
    line.start()
    while not (line.hung_up.wait(0.05) or agent_hung_up.is_set()):
        pass
    line.stop()
    session.disconnected(by_local=agent_hung_up.is_set())
    session.join(15.0)
    return SimulatedCall(call_id=session.call_id, records=records.records,
                         reply_audio=line.audio(), end_reason=session.end_reason)


def _caller_done(line: SimulatedLine, session: CallSession, agent_hung_up: threading.Event) -> bool:
    """The caller hangs up: audio over, agent done answering (or they waited long enough)."""
    if agent_hung_up.is_set():
        return True
    done_at = line.script_done_at
    if done_at is None:
        return False
    waited = line.clock.now() - done_at
    return (waited >= TRAILING_SILENCE_S and session.idle) or waited >= MAX_WAIT_S
