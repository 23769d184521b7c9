"""The agent under a benchmark or test, as a subprocess: a supervised ``serve`` or a ``cluster``.

Both are started with ``python -m agent.cli.main`` from the project root, log to a file, and
count as up once their log says so (``event=ready`` of the serve's worker; ``event=cluster-ready``
once kamailio routes to every worker). :func:`bench_config` writes the benchmarks' config (one
profile on extension 101, SQLite call log), which :func:`read_call_log` reads back;
:func:`shipped_models` reads what config.toml's default profile runs, for a bench of what ships;
:func:`free_port`, :func:`free_block` and :func:`caller_media` find ports on 127.0.0.1.
Started as processes, not imported: benches and tests stay clear of pjsua2 and of the cluster's
code, and measure what a user runs.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dialplan.profile import Profile

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A UDP port on 127.0.0.1 that nothing holds right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ephemeral_low(default: int = 32768) -> int:
    """The first port the kernel hands to sockets bound to port 0 (Linux; else ``default``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_block(n: int, kind: int = socket.SOCK_DGRAM, lo: int = 21000, hi: int | None = None,
               avoid: range = range(0)) -> int:
    """The first port of ``n`` consecutive free ports (UDP or TCP) on 127.0.0.1.

    Random, not first-fit: benchmarks and tests run side by side on one machine. None of them
    is in ``avoid``: a caller's media port inside the agent's RTP range, free until the agent
    takes it for a call, would be read on the wire as the agent's side of a call. Below the
    kernel's ephemeral ports where there is room (``hi`` unset): a block found free here is
    bound by its user moments later, and a port handed out meanwhile (another caller's SIP
    port from :func:`free_port`, any client socket) could take it. One bench call run lost a
    call so (sipp: "Unable to bind video RTP socket ... Address already in use").
    """
    if hi is None:
        hi = min(59000, ephemeral_low())
        hi = hi if hi - lo >= 20 * n else 59000
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        start = rng.randrange(lo, hi - n)
        if start < avoid.stop and avoid.start < start + n:
            continue
        socks = []
        try:
            for p in range(start, start + n):
                s = socket.socket(socket.AF_INET, kind)
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return start
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports in {lo}-{hi}")


def caller_media(callers: int, agent_ports: range) -> list[int]:
    """Each caller's media ports (``-mp``: sipp binds 4 from it), one free block for a round.

    Found one by one, a caller's block could be free only because the caller started before
    it had not bound its own yet.
    """
    start = free_block(4 * callers, avoid=agent_ports)
    return [start + 4 * i for i in range(callers)]


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) that process ``pid`` and its live descendants have used.

    Linux ``/proc``; 0 for processes gone meanwhile. What a process's finished children used
    is not counted: the agent's workers live as long as the bench reads them.
    """
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def read_call_log(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """The rows of one query of a benchmark's SQLite call log (the connection closed after)."""
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


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


def _start(argv: list[str], log_path: Path, ready: str, timeout_s: float,
           give_up: str | None = None) -> subprocess.Popen | None:
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "agent.cli.main", *argv], stdout=log,
                                stderr=subprocess.STDOUT, cwd=ROOT)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        if wait_for_line(log_path, ready, 1.0, proc):
            return proc
        if give_up and give_up in log_path.read_text(errors="replace"):
            break
    proc.kill()
    proc.wait()
    return None


def start_serve(config: Path, serve_log: Path, timeout_s: float = 240) -> subprocess.Popen | None:
    """Start a supervised ``callagent serve`` on ``config``, logging to ``serve_log``.

    Returns:
        The supervisor process once its worker logged ``event=ready``; None (process stopped)
        if it did not within ``timeout_s`` or the worker died first.
    """
    return _start(["serve", "--config", str(config)], serve_log, "event=ready", timeout_s,
                  give_up="event=worker-died")


def start_cluster(config: Path, log: Path, workers: int,
                  timeout_s: float = 400) -> subprocess.Popen | None:
    """Start ``callagent cluster --workers N`` on ``config``, logging to ``log``.

    The config's ``sip.port`` is kamailio's; worker i gets SIP port ``sip.port + i`` and the
    i-th block of 100 RTP ports from ``sip.rtp_port``.

    Returns:
        The cluster process once it logged ``event=cluster-ready`` (kamailio answers and routes
        to every worker); None (process stopped) if it did not within ``timeout_s``. A worker
        that dies while loading is restarted by the cluster, so only the timeout ends that.
    """
    return _start(["cluster", "--config", str(config), "--workers", str(workers)], log,
                  "event=cluster-ready", timeout_s)


def bench_config(port: int, rtp: int, work: Path, llm: str, threads: int,
                 asr: str = "base", *, stage_threads: int | None = None,
                 max_silence_s: float | None = None, llm_backend: str = "llama-batch",
                 under_load: tuple[str, str] | None = None, sip_extra: str = "",
                 tts: str = "kokoro", max_tokens: tuple[int, int] = (40, 40),
                 persona: Profile | None = None) -> str:
    """A config for the benchmarks: one profile on extension 101, SQLite in ``work``.

    Args:
        port: ``sip.port`` (kamailio's under a cluster).
        rtp: ``sip.rtp_port``, the first RTP port.
        work: where the call log and the spool go.
        llm: the profile's LLM model.
        llm_backend: the profile's ``llm.backend``.
        threads: the LLM's threads.
        asr: the profile's ASR model.
        stage_threads: ASR and TTS threads (None: their defaults).
        max_silence_s: the profile's ``limits.max_silence_s`` (None: the default), longer than
            a caller who holds the line in silence while 8 calls queue for 2 cores.
        under_load: (ASR model, LLM model) of an ``under_load`` profile "quick" for the bench
            profile (None: none, every turn on the profile's own models).
        sip_extra: more ``[sip]`` keys (e.g. ``allow = [...]``).
        tts: ``kokoro`` (as shipped: af_heart with hibari's lead, and hibari under load) or
            ``piper``.
        max_tokens: ``llm.max_tokens`` of the profile and of its ``under_load`` profile.
        persona: a shipped profile whose persona the bench profile takes (system prompt,
            greeting, knowledge file, tools and directory); None: a one-line persona.
    """
    asr_threads = "" if stage_threads is None else f", threads = {stage_threads}"
    voice = ('backend = "piper"' if tts == "piper"
             else 'backend = "kokoro-onnx", voice = "af_heart", lead = "hibari"')
    tts_threads = "" if stage_threads is None else f", threads = {stage_threads}"
    extra = f"tts = {{ {voice}{tts_threads} }}\n"
    if max_silence_s is not None:
        extra += f"limits = {{ max_silence_s = {max_silence_s:g} }}\n"
    system = ('system_prompt = "You are the phone assistant of a public library. The library '
              'opens 10 am to 4 pm on Saturday. Answer in one short spoken sentence."')
    greeting = 'greeting = "Hello, quick assistant here."'
    if persona is not None:
        system, greeting, extra = "", _persona(persona), extra + _directory(persona)
    return f"""
{system}
[sip]
port = {port}
rtp_port = {rtp}
max_calls = 4
{sip_extra}
[db]
url = "sqlite:///{work}/calls.db"
spool_dir = "{work}/spool"
[profiles.fast]
{greeting}
llm = {{ backend = "{llm_backend}", model = "{llm}", max_tokens = {max_tokens[0]}, \
threads = {threads} }}
asr = {{ model = "{asr}", initial_prompt = "A caller phones the public library with a question."\
{asr_threads} }}
{extra}{_quick(under_load, llm_backend, threads, asr_threads, tts, max_tokens[1])}[dialplan]
"101" = "fast"
"""


def _persona(p: Profile) -> str:
    """A shipped profile's persona as ``[profiles.fast]`` keys (its knowledge file absolute)."""
    keys = {"system_prompt": p.system_prompt, "greeting": p.greeting, "tools": list(p.tools)}
    if p.knowledge:
        keys["knowledge"] = str((ROOT / p.knowledge).resolve())
    return "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())


def _directory(p: Profile) -> str:
    """Its directory as an inline ``directory`` key of the profile."""
    if not p.directory:
        return ""
    entries = ", ".join(f'{json.dumps(n)} = {{ uri = {json.dumps(e.uri)}, description = '
                        f'{json.dumps(e.description)} }}' for n, e in p.directory.items())
    return f"directory = {{ {entries} }}\n"


def _quick(models: tuple[str, str] | None, backend: str, threads: int, asr_threads: str,
           tts: str = "kokoro", max_tokens: int = 40) -> str:
    if models is None:
        return ""
    asr, llm = models
    voice = 'tts = { backend = "hibari" }\n' if tts != "piper" else ""
    return f"""under_load = "quick"
[profiles.quick]
llm = {{ backend = "{backend}", model = "{llm}", max_tokens = {max_tokens}, threads = {threads} }}
asr = {{ model = "{asr}"{asr_threads} }}
{voice}"""


@dataclass(frozen=True)
class Shipped:
    """What a profile of the shipped config.toml runs, in :func:`bench_config`'s terms."""

    profile: str
    asr: str
    """ASR model (``asr.model``)."""
    llm: str
    """LLM model (``llm.model``), as the config names it (a ``-fastest`` pick stays a pick)."""
    llm_backend: str
    threads: int
    """``llm.threads``."""
    max_tokens: tuple[int, int]
    """``llm.max_tokens`` of the profile and of its ``under_load`` profile."""
    under_load: tuple[str, str] | None
    """(ASR, LLM) of its ``under_load`` profile; None: it has none."""
    tts: str
    """``kokoro`` (af_heart with hibari's lead) or ``piper``: :func:`bench_config`'s ``tts``."""

    def describe(self) -> str:
        """One line: ``base + qwen... (under load: base + qwen...), kokoro``."""
        quick = f" (under load: {' + '.join(self.under_load)})" if self.under_load else ""
        voice = "af_heart with hibari's lead" if self.tts == "kokoro" else "piper"
        return f"{self.asr} + {self.llm}{quick}, {voice}"


def shipped_models(config: Path = ROOT / "config.toml", profile: str = "default") -> Shipped:
    """The models ``profile`` of ``config`` (the shipped config.toml) runs.

    Raises:
        ValueError: the profile is not there, or its voice is one :func:`bench_config` cannot
            write (only kokoro-onnx af_heart with hibari's lead, or piper).
    """
    from dialplan import load_config

    profiles = load_config(config).profiles
    if profile not in profiles:
        raise ValueError(f"{config}: no profile {profile!r}")
    p = profiles[profile]
    quick = profiles.get(p.under_load) if p.under_load else None
    if p.tts.backend == "piper":
        tts = "piper"
    elif (p.tts.backend, p.tts.voice, p.tts.lead) == ("kokoro-onnx", "af_heart", "hibari"):
        tts = "kokoro"
    else:
        raise ValueError(f"{config}: profile {profile!r} speaks with {p.tts.backend} "
                         f"{p.tts.voice!r} (lead {p.tts.lead!r}); the bench config has only "
                         "kokoro-onnx af_heart with hibari's lead, and piper")
    return Shipped(profile, p.asr.model, p.llm.model, p.llm.backend, p.llm.threads,
                   (p.llm.max_tokens, quick.llm.max_tokens if quick else p.llm.max_tokens),
                   (quick.asr.model, quick.llm.model) if quick else None, tts)
