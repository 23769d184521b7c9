"""What crosses the wire in a SIP benchmark or test, and the tools that put it there and record it.

* reading: a classic pcap file, its IPv4/UDP datagrams that parse as RTP, each packet's G.711
  level, the packets of one call grouped by the agent's RTP port (:class:`WireCall`) and split
  into calls when a later round reuses the port (:func:`each_call`);
* recording: :class:`Capture`, ``tshark`` on loopback for a UDP port range;
* calling: ``sipp`` scenarios with ``@@TOKEN@@`` placeholders (:func:`scenario`, :func:`sipp`)
  and a spoken question as raw μ-law for sipp's ``rtp_stream`` (:func:`spoken_ulaw`).

Shared by ``bench call``, ``bench soak`` and the SIP and cluster tests. Speech runs come from the
one detector, :func:`models.audio.speech_runs`. Imports no pjsua2.
"""

from __future__ import annotations

import re
import signal
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.audio import PHONE_RATE, alaw_decode, rms, speech_runs, ulaw_decode

SCENARIOS = Path(__file__).resolve().parent / "sipp"
ROUTED = (Path(__file__).resolve().parents[1] / "agent" / "cluster" / "sipp"
          / "uac_stream_routed.xml")
"""The caller through a proxy: ACK and BYE follow the 200 OK's Record-Route (kamailio)."""


# ---- reading: pcap and RTP ---------------------------------------------------------------------

@dataclass(frozen=True)
class RtpPacket:
    """One RTP packet seen on the wire."""

    at: float
    src_port: int
    dst_port: int
    payload_type: int
    seq: int
    payload: bytes

    @property
    def level(self) -> float:
        """RMS of the decoded G.711 payload (0..1); 0 for other payload types."""
        if self.payload_type not in (0, 8) or not self.payload:
            return 0.0
        return rms((ulaw_decode if self.payload_type == 0 else alaw_decode)(self.payload))


def read_pcap(path: str | Path) -> list[tuple[float, bytes]]:
    """Frames of a classic libpcap file as (timestamp, link-layer bytes)."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        return []
    magic = data[:4]
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
              b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if endian is None:
        raise ValueError(f"{path}: not a libpcap file (write it with tshark -F pcap)")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    frames, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frames.append((sec + frac / (1e9 if nano else 1e6), data[off:off + incl], linktype))
        off += incl
    return [(t, _strip_link(b, lt)) for t, b, lt in frames]


def _strip_link(frame: bytes, linktype: int) -> bytes:
    # Ethernet (1; what Linux "lo" gives), Linux cooked (113), BSD loopback (0), raw IP (101).
    return {1: frame[14:], 113: frame[16:], 0: frame[4:], 101: frame}.get(linktype, b"")


def rtp_packets(path: str | Path) -> list[RtpPacket]:
    """Every IPv4/UDP datagram of a pcap that parses as RTP version 2."""
    out = []
    for at, ip in read_pcap(path):
        if len(ip) < 28 or ip[0] >> 4 != 4 or ip[9] != 17:
            continue
        ihl = (ip[0] & 0x0F) * 4
        src, dst = struct.unpack("!HH", ip[ihl:ihl + 4])
        udp = ip[ihl + 8:]
        if len(udp) < 12 or udp[0] >> 6 != 2:
            continue
        cc = udp[0] & 0x0F
        pt = udp[1] & 0x7F
        if 72 <= pt <= 76:  # RTCP (SR, RR, SDES, BYE, APP) on the odd port
            continue
        seq = struct.unpack("!H", udp[2:4])[0]
        out.append(RtpPacket(at, src, dst, pt, seq, bytes(udp[12 + 4 * cc:])))
    return out


def levels(packets: list[RtpPacket]) -> list[tuple[float, float]]:
    """``(stamp, RMS)`` of each packet, for :func:`models.audio.speech_runs`."""
    return [(p.at, p.level) for p in packets]


def gaps_ms(packets: list[RtpPacket], runs: list[tuple[float, float]]) -> list[float]:
    """Intervals between consecutive packets inside each run (ms)."""
    out = []
    for a, b in runs:
        stamps = [p.at for p in packets if a <= p.at <= b]
        out.extend(np.diff(stamps) * 1000)
    return out


_SILENT = {0: {0xFF, 0x7F}, 8: {0xD5, 0x55}}
"""G.711 bytes of a zero sample (μ-law, A-law): what the agent sends when it has no audio."""


def dead_air_ms(packets: list[RtpPacket], runs: list[tuple[float, float]],
                min_frames: int = 3) -> list[float]:
    """Holes of exact digital silence inside a reply, from its first speech to its last (ms).

    The agent keeps sending packets when a reply's next audio is late (the packet gap stays
    20 ms), so a late chunk shows only as frames of zero samples. The voice's own pauses can
    be zeros too: Piper's left short holes in some single calls whose playout never ran dry
    (bench call, one call); under load the late chunks dominate: nearly all the dead air read
    here is the agent's own underruns (bench call, 4 at once).
    """
    if not runs:
        return []
    start, end = runs[0][0], runs[-1][1]
    out, hole = [], 0
    for p in packets:
        if not start <= p.at <= end:
            continue
        silent = _SILENT.get(p.payload_type)
        if silent is not None and p.payload and set(p.payload) <= silent:
            hole += 1
            continue
        if hole >= min_frames:
            out.append(hole * 20.0)
        hole = 0
    if hole >= min_frames:
        out.append(hole * 20.0)
    return out


@dataclass
class WireCall:
    """One call as seen on the wire."""

    caller: list[RtpPacket]
    """Caller -> agent packets."""
    agent: list[RtpPacket]
    """Agent -> caller packets."""

    def voice_to_voice_s(self, after: float = 0.0) -> float | None:
        """End of the caller's last speech run -> start of the agent's next speech run."""
        asked = [r for r in speech_runs(levels(self.caller)) if r[0] >= after]
        if not asked:
            return None
        end = asked[-1][1]
        replies = [r for r in speech_runs(levels(self.agent)) if r[0] > end]
        return replies[0][0] - end if replies else None

    def reply_runs(self) -> list[tuple[float, float]]:
        asked = speech_runs(levels(self.caller))
        end = asked[-1][1] if asked else 0.0
        return [r for r in speech_runs(levels(self.agent)) if r[0] > end]


def split_calls(packets: list[RtpPacket], agent_ports: range) -> dict[int, WireCall]:
    """Group packets by the agent's RTP port (one port per call)."""
    calls: dict[int, WireCall] = {}
    for p in packets:
        if p.src_port in agent_ports:
            calls.setdefault(p.src_port, WireCall([], [])).agent.append(p)
        elif p.dst_port in agent_ports:
            calls.setdefault(p.dst_port, WireCall([], [])).caller.append(p)
    return calls


def each_call(calls: dict[int, WireCall]) -> list[WireCall]:
    """Split each port's packets into calls: a later round reuses the port after a pause."""
    out = []
    for call in calls.values():
        tagged = sorted([(p.at, False, p) for p in call.caller]
                        + [(p.at, True, p) for p in call.agent], key=lambda x: x[0])
        cur, last = WireCall([], []), None
        for at, from_agent, p in tagged:
            if last is not None and at - last > 0.3:  # both sides send every 20 ms in a call
                out.append(cur)
                cur = WireCall([], [])
            (cur.agent if from_agent else cur.caller).append(p)
            last = at
        if cur.caller or cur.agent:
            out.append(cur)
    return out


# ---- recording and calling: tshark, sipp, espeak ------------------------------------------------

class Capture:
    """``tshark`` on loopback for a UDP port range, written as classic pcap."""

    def __init__(self, path: Path, ports: range):
        self.path = path
        self.ports = ports
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Capture:
        bpf = f"udp portrange {self.ports.start}-{self.ports.stop - 1}"
        self._err = open(self.path.with_suffix(".tshark.log"), "w")  # noqa: SIM115
        self.proc = subprocess.Popen(["tshark", "-i", "lo", "-f", bpf, "-F", "pcap", "-w",
                                      str(self.path)], stdout=subprocess.DEVNULL,
                                     stderr=self._err)
        log = self.path.with_suffix(".tshark.log")
        end = time.monotonic() + 15
        while time.monotonic() < end and "Capturing on" not in log.read_text():
            time.sleep(0.1)
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(0.3)  # let the last packets reach the file
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)
        self._err.close()

    def packets(self) -> list[RtpPacket]:
        return rtp_packets(self.path)


def scenario(name: str | Path, out: Path, **tokens: object) -> Path:
    """Copy ``testkit/sipp/NAME.xml`` (or a path) to ``out``, ``@@TOKEN@@``s filled in."""
    text = (name if isinstance(name, Path) else SCENARIOS / f"{name}.xml").read_text()
    for key, value in tokens.items():
        text = text.replace(f"@@{key.upper()}@@", str(value))
    out.write_text(text)
    return out


DTMF_PCAPS = Path("/usr/share/sip-tester")
"""sip-tester's RFC 2833 captures: ``dtmf_2833_<digit|pound|star>.pcap``."""


def keys_xml(keys: str, gap_ms: int = 400) -> str:
    """The sipp actions that type ``keys`` (0-9, *, #) with sip-tester's DTMF pcaps."""
    names = {"#": "pound", "*": "star"}
    out = []
    for k in keys:
        pcap = DTMF_PCAPS / f"dtmf_2833_{names.get(k, k)}.pcap"
        out.append(f'  <nop><action><exec play_pcap_audio="{pcap}"/></action></nop>\n'
                   f'  <pause milliseconds="{gap_ms}"/>')
    return "\n".join(out)


def sipp_argv(scenario_path: Path, extension: str, port: int, local_port: int, media_port: int,
              calls: int = 1, concurrent: int = 1, timeout_s: float = 60) -> list[str]:
    """The sipp command of a UAC: ``calls`` calls, ``concurrent`` at once, to 127.0.0.1:port."""
    return ["sipp", "-sf", str(scenario_path), "-s", extension, f"127.0.0.1:{port}",
            "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(local_port), "-mp", str(media_port),
            "-m", str(calls), "-l", str(concurrent), "-r", str(concurrent), "-nostdin",
            "-timeout", f"{int(timeout_s)}s", "-timeout_error", "-trace_err",
            "-error_file", str(scenario_path.with_suffix(".err"))]


def sipp(scenario_path: Path, extension: str, port: int, local_port: int, media_port: int,
         calls: int = 1, concurrent: int = 1, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run :func:`sipp_argv` to the end; rc 0 means every call succeeded."""
    return subprocess.run(sipp_argv(scenario_path, extension, port, local_port, media_port,
                                    calls, concurrent, timeout_s),
                          capture_output=True, text=True, timeout=timeout_s + 15)


def sipp_refusals(scenario_path: Path) -> dict[int, int]:
    """Final error statuses (4xx-6xx) that ended sipp's calls, by code, from its error file.

    sipp aborts a call on a response its scenario did not expect and writes the message there.
    """
    err = scenario_path.with_suffix(".err")
    text = err.read_text(errors="replace") if err.exists() else ""
    out: dict[int, int] = {}
    for code in re.findall(r"Aborting call on unexpected message.*?received 'SIP/2\.0 ([4-6]\d\d)",
                           text):
        out[int(code)] = out.get(int(code), 0) + 1
    return out


def spoken_ulaw(text: str, out: Path, lead_s: float = 3.0, tail_s: float = 1.0,
                voice: str = "en") -> Path:
    """espeak-ng ``text`` -> 8 kHz μ-law raw file with silence around it (sipp rtp_stream)."""
    wav = out.with_suffix(".wav")
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), text], check=True)
    subprocess.run(["sox", str(wav), "-r", str(PHONE_RATE), "-c", "1", "-e", "u-law", "-t", "raw",
                    str(out), "pad", str(lead_s), str(tail_s)], check=True)
    return out
