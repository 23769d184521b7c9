"""A scripted SIP caller: play an audio file into a call and record what the other side says.

Used by ``callagent call`` to try an agent by hand or from a script. Any file soundfile reads
(WAV of any rate and encoding, FLAC, OGG) is resampled with soxr to the line's 8 kHz. The call
is hung up ``after_s`` seconds after the file has been played (or when the agent hangs up).

SIP goes through :class:`agent.sip.useragent.SipAgent` (the only pjsua2 importer); no models.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from agent.sip.audiolink import AudioLink
from agent.sip.events import CallConnected, CallDisconnected, MediaActive, SipError
from agent.sip.useragent import SipAgent
from dialplan.sip import SIPOptions
from models.audio import (
    PHONE_RATE,
    SPEECH_RMS,
    float_to_pcm16,
    frame_samples,
    read_audio,
    resample,
    rms,
)

FRAME = frame_samples(PHONE_RATE)


@dataclass
class CallResult:
    """What happened on the call, and what was heard."""

    connected: bool = False
    codec: str = ""
    status_code: int = 0
    reason: str = ""
    sip_call_id: str = ""
    heard: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    """Everything received, int16 at 8 kHz."""

    @property
    def heard_s(self) -> float:
        return len(self.heard) / PHONE_RATE

    @property
    def speech_s(self) -> float:
        """Seconds of received 20 ms frames louder than silence."""
        n = len(self.heard) // FRAME
        frames = self.heard[: n * FRAME].reshape(-1, FRAME)
        return sum(1 for f in frames if rms(f) > SPEECH_RMS) * FRAME / PHONE_RATE


class _Player:
    """Frame source (clock thread): ``lead`` silence, then the file, then silence."""

    def __init__(self, pcm: np.ndarray):
        pcm = np.concatenate([pcm, np.zeros((-len(pcm)) % FRAME, np.int16)])
        self._frames = [f.tobytes() for f in pcm.reshape(-1, FRAME)]
        self._i = 0
        self._silence = bytes(FRAME * 2)
        self.heard: list[bytes] = []

    def source(self) -> bytes:
        if self._i < len(self._frames):
            self._i += 1
            return self._frames[self._i - 1]
        return self._silence

    def sink(self, data: bytes) -> None:
        self.heard.append(data)

    @property
    def done(self) -> bool:
        return self._i >= len(self._frames)


def load_line_audio(path: str | Path, lead_s: float = 0.0) -> np.ndarray:
    """Read any audio file as 8 kHz int16 with ``lead_s`` of silence in front."""
    audio, rate = read_audio(path)
    pcm = float_to_pcm16(resample(audio, rate, PHONE_RATE))
    return np.concatenate([np.zeros(int(lead_s * PHONE_RATE), np.int16), pcm])


def call(uri: str, play: str | Path, record: str | Path | None = None, lead_s: float = 2.5,
         after_s: float = 8.0, port: int = 5070, rtp_port: int = 45000,
         timeout_s: float = 120.0, options: SIPOptions | None = None) -> CallResult:
    """Call ``uri``, play ``play`` once media is up, keep listening ``after_s``, hang up.

    Args:
        uri: ``sip:EXT@HOST:PORT`` of the agent.
        play: audio file to speak into the call.
        record: where to write what was heard (16-bit WAV, 8 kHz), if anywhere.
        lead_s: silence before the file (the agent's greeting plays meanwhile).
        after_s: how long to listen after the file ends.
        port: local SIP port.
        rtp_port: first local RTP port.
        timeout_s: give up after this long in any case.
        options: the caller's own SIP options instead of UDP on 127.0.0.1 ``port`` and
            ``rtp_port``: e.g. TLS (``transport = "tls"`` with a certificate) and ``srtp``.

    Returns:
        The call's outcome and the received audio.
    """
    player = _Player(load_line_audio(play, lead_s))
    events: queue.Queue = queue.Queue()
    options = options or SIPOptions(host="127.0.0.1", port=port, rtp_port=rtp_port, max_calls=1)
    ua = SipAgent(options, events, user="caller", clock_rate=PHONE_RATE)
    ua.start()
    result = CallResult()
    deadline = time.monotonic() + timeout_s
    hangup_at = None
    try:
        key = ua.dial(uri, AudioLink(sink=player.sink, source=player.source))
        while time.monotonic() < deadline:
            try:
                ev = events.get(timeout=0.1)
            except queue.Empty:
                ev = None
            if isinstance(ev, CallConnected):
                result.connected = True
            elif isinstance(ev, MediaActive):
                result.codec = ev.codec
            elif isinstance(ev, CallDisconnected):
                result.status_code, result.reason = ev.status_code, ev.reason
                break
            elif isinstance(ev, SipError):
                result.reason = ev.detail
            if result.codec and player.done and hangup_at is None:
                hangup_at = time.monotonic() + after_s
            if hangup_at is not None and time.monotonic() >= hangup_at:
                ua.hangup(key)
                hangup_at = float("inf")  # asked once; wait for the disconnect
    finally:
        ua.stop()
    result.heard = np.frombuffer(b"".join(player.heard), np.int16).copy()
    if record:
        sf.write(str(record), result.heard, PHONE_RATE, subtype="PCM_16")
    return result
