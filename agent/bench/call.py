"""``callagent bench call``: voice-to-voice and packet pacing measured on the wire.

Starts ``callagent serve`` (a subprocess with its own port and SQLite file), captures loopback
RTP with ``tshark``, and has ``sipp`` call it 1 and then N at a time, each caller streaming a
spoken question (espeak-ng, 8 kHz μ-law). From the capture, per call:

* voice-to-voice = first agent RTP packet with speech after the question - last caller RTP
  packet with speech (packet timestamps from the kernel, not the agent's own stamps);
* frame gap = interval between consecutive agent RTP packets inside a reply (target <= 40 ms).

A benchmark, not a test: it prints numbers and asserts nothing. The wire helpers (pcap reader,
RTP parsing, packet levels) are shared with the SIP acceptance tests; speech runs come from the
one detector, :func:`models.audio.speech_runs`. Imports no pjsua2.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.bench.samples import QUESTION
from db.stats import percentile
from models.audio import PHONE_RATE, alaw_decode, rms, speech_runs, ulaw_decode

SCENARIOS = Path(__file__).resolve().parent / "sipp"


# ---- wire: pcap and RTP ------------------------------------------------------------------------

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


# ---- tools: tshark, sipp, espeak ---------------------------------------------------------------

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


def scenario(name: str, out: Path, **tokens: object) -> Path:
    """Copy ``agent/bench/sipp/NAME.xml`` to ``out`` with its ``@@TOKEN@@`` placeholders filled."""
    text = (SCENARIOS / f"{name}.xml").read_text()
    for key, value in tokens.items():
        text = text.replace(f"@@{key.upper()}@@", str(value))
    out.write_text(text)
    return out


def sipp(scenario_path: Path, extension: str, port: int, local_port: int, media_port: int,
         calls: int = 1, concurrent: int = 1, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run sipp as a UAC against ``127.0.0.1:port``; rc 0 means every call succeeded."""
    cmd = ["sipp", "-sf", str(scenario_path), "-s", extension, f"127.0.0.1:{port}",
           "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(local_port), "-mp", str(media_port),
           "-m", str(calls), "-l", str(concurrent), "-r", str(concurrent), "-nostdin",
           "-timeout", f"{int(timeout_s)}s", "-timeout_error", "-trace_err",
           "-error_file", str(scenario_path.with_suffix(".err"))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 15)


def spoken_ulaw(text: str, out: Path, lead_s: float = 3.0, tail_s: float = 1.0) -> Path:
    """espeak-ng ``text`` -> 8 kHz μ-law raw file with silence around it (sipp rtp_stream)."""
    wav = out.with_suffix(".wav")
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True)
    subprocess.run(["sox", str(wav), "-r", str(PHONE_RATE), "-c", "1", "-e", "u-law", "-t", "raw",
                    str(out), "pad", str(lead_s), str(tail_s)], check=True)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(path: Path, needle: str, timeout_s: float, proc=None) -> bool:
    """Poll a log file for ``needle``; False on timeout or if ``proc`` exited."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if path.exists() and needle in path.read_text(errors="replace"):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def start_serve(config: Path, serve_log: Path, timeout_s: float = 240) -> subprocess.Popen | None:
    """Start a supervised ``callagent serve`` on ``config``, logging to ``serve_log``.

    Returns:
        The supervisor process once its worker logged ``event=ready``; None (process stopped)
        if it did not within ``timeout_s`` or the worker died first.
    """
    with open(serve_log, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "agent.cli.main", "serve", "--config",
                                 str(config)], stdout=log, stderr=subprocess.STDOUT,
                                cwd=Path(__file__).resolve().parents[2])
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        if wait_for_line(serve_log, "event=ready", 1.0, proc):
            return proc
        if "event=worker-died" in serve_log.read_text(errors="replace"):
            break
    proc.kill()
    proc.wait()
    return None


# ---- the benchmark -----------------------------------------------------------------------------



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                        help="simultaneous calls per round (default: 1 4)")
    parser.add_argument("--rounds", type=int, default=2, help="calls per caller slot")
    parser.add_argument("--profile-llm", default="qwen2.5-1.5b-instruct",
                        help="LLM of the bench profile (default: the shipped default)")
    parser.add_argument("--asr-model", default="base", help="ASR model of the bench profile")
    parser.add_argument("--llm-threads", type=int, default=2,
                        help="llama.cpp threads (the scheduler runs one model job at a time)")
    parser.add_argument("--hold-s", type=float, default=20.0,
                        help="call length after answer; the caller sends silence till its BYE")
    parser.add_argument("--keep", default=None, help="keep captures and logs in this folder")


def run(args: argparse.Namespace) -> int:
    from agent.sip.useragent import (
        RTP_PORT_RANGE,  # pjsua2 only when the bench runs, not at CLI parse
    )

    for tool in ("sipp", "tshark", "espeak-ng", "sox"):
        if shutil.which(tool) is None:
            print(f"bench call: {tool} not found (make setup installs it)", file=sys.stderr)
            return 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="callagent-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    port, rtp = free_port(), 46000
    agent_ports = range(rtp, rtp + RTP_PORT_RANGE)
    config = work / "config.toml"
    config.write_text(bench_config(port, rtp, work, args.profile_llm, args.llm_threads,
                                   args.asr_model))
    # Silence after the question until the BYE: a phone keeps sending RTP (no RTP = dead line).
    audio = spoken_ulaw(QUESTION, work / "question.ulaw", tail_s=args.hold_s)
    serve_log = work / "serve.log"
    proc = start_serve(config, serve_log)
    if proc is None:
        print(f"bench call: agent did not start, see {serve_log}", file=sys.stderr)
        return 1
    try:
        medians = {n: report_round(n, args, work, port, audio, agent_ports)
                   for n in args.concurrency}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    _unanswered(work / "calls.db")
    baseline = _serial_baseline(config)
    print(f"naive serial pipeline (same models, same question, hangover + ASR + LLM to first "
          f"clause + TTS): {baseline * 1000:.0f} ms")
    for n, v in medians.items():
        if v is not None:
            print(f"concurrency {n}: wire voice-to-voice p50 / serial = {v / 1000 / baseline:.2f}x")
    print(f"captures and logs: {work}")
    return 0


def _unanswered(db: Path) -> None:
    """Turns the agent recorded without reply audio, by reason (from its call log)."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT unanswered, COUNT(*) FROM turns GROUP BY unanswered").fetchall()
    except sqlite3.OperationalError:  # a call log from before the unanswered column
        rows = []
    finally:
        con.close()
    total = sum(n for _, n in rows)
    missed = {why: n for why, n in rows if why}
    print(f"turns recorded: {total}, unanswered: {sum(missed.values())} {missed or ''}")


def _serial_baseline(config: Path) -> float:
    """Median voice-to-voice (s) of the naive serial pipeline on the bench's question.

    The same models, loaded in this process once the agent has stopped (same machine, same run).
    """
    from agent.bench.baseline import serial_turn
    from agent.bench.samples import spoken
    from agent.turn.runner import StageCache
    from dialplan import load_config

    profile = load_config(config).profiles["fast"]
    stages = StageCache().stages(profile)
    audio, rate = spoken(QUESTION)
    serial_turn(audio, rate, profile, stages)  # warm-up
    return float(np.median([serial_turn(audio, rate, profile, stages).voice_to_voice_s
                            for _ in range(3)]))


def report_round(n: int, args, work: Path, port: int, audio: Path,
                 agent_ports: range) -> float | None:
    xml = scenario("uac_stream", work / f"stream_{n}.xml", audio=audio,
                   hold_ms=int(args.hold_s * 1000))
    cap = work / f"calls_{n}.pcap"
    with Capture(cap, agent_ports) as capture:
        res = sipp(xml, "101", port, free_port(), 47000, calls=n * args.rounds, concurrent=n,
                   timeout_s=args.hold_s * args.rounds + 60)
    calls = split_calls(capture.packets(), agent_ports)
    v2v, gaps = [], []
    for call in each_call(calls):
        if (v := call.voice_to_voice_s()) is not None:
            v2v.append(v * 1000)
        gaps.extend(gaps_ms(call.agent, call.reply_runs()))

    def pct(xs: list[float], q: float) -> str:
        v = percentile(xs, q)
        return "    n/a" if v is None else f"{v:7.0f}"

    print(f"concurrency {n}: {len(v2v)}/{n * args.rounds} calls measured, sipp rc={res.returncode}"
          f" | voice-to-voice p50 {pct(v2v, 50)} ms p95 {pct(v2v, 95)} ms"
          f" | reply packet gap p50 {pct(gaps, 50)} ms p99 {pct(gaps, 99)} ms"
          f" max {max(gaps) if gaps else float('nan'):.0f} ms", flush=True)
    return percentile(v2v, 50)


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


def bench_config(port: int, rtp: int, work: Path, llm: str, threads: int,
                 asr: str = "base") -> str:
    """A config for the bench: one profile on extension 101, SQLite in ``work``."""
    return f"""
system_prompt = "You are the phone assistant of a public library. The library opens 10 am \
to 4 pm on Saturday. Answer in one short spoken sentence."
[sip]
port = {port}
rtp_port = {rtp}
max_calls = 4
[db]
url = "sqlite:///{work}/calls.db"
spool_dir = "{work}/spool"
[profiles.fast]
greeting = "Hello, quick assistant here."
llm = {{ model = "{llm}", max_tokens = 40, threads = {threads} }}
asr = {{ model = "{asr}", initial_prompt = "A caller phones the public library with a question." }}
[dialplan]
"101" = "fast"
"""

