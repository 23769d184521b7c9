"""``bench call --turns N``: calls of N questions, each read off the wire turn by turn.

The caller's audio is one μ-law stream: a lead of silence, question 1, silence long enough for
the reply (``--gap-s``), question 2, ..., the last question, then the hold. Every stream of a run
has the same :class:`Layout`: each question is placed so that it *ends* at the same offset in
every caller's stream (the shorter questions start later), so the capture is read with one
layout whichever conversation a call carried. sipp's packets do not say which file they came
from, and a caller's RTP port is sipp's to choose.

On the wire, per call (:func:`wire_turns`):

* a question's end is the caller's last speech packet inside its window of the layout (from
  just after the previous question's end to just after its own), offsets counted from the
  caller's first packet, which carries the stream's first byte;
* its reply is the agent's first speech run that starts after that end and before the next
  question ends; voice-to-voice = reply start - question end, None when there was no reply.

From the call log, each question's turn (:func:`match_log_turns`): by turn index where the call
logged one turn per question, each ending near its question's end; otherwise (a turn
superseded, a noise taken for speech) by the turn's speech end nearest the question's end, so a
turn is never compared with another question's. The log's speech ends count from the call's
answer, a few ms before the caller's stream starts.

First turns and follow-ups are reported apart (:func:`print_turns_table`): a follow-up's prompt
carries the call's history, which costs prefill, and may reuse the first turn's cached prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.call_conversations import CONVERSATIONS
from bench.header import markdown_table
from db.stats import percentile
from models.audio import PHONE_RATE, speech_runs
from testkit.agentproc import read_call_log
from testkit.wire import RtpPacket, WireCall, levels, spoken_ulaw

SILENCE = b"\xff"
"""A μ-law zero sample: what a phone sends between its caller's words."""
LEAD_S = 3.0
"""Silence before the first question, as the one-question calls have: the greeting's time."""
WINDOW_SLACK_S = 1.0
"""How far past its layout end a question's speech is looked for: sipp's pacing and the
capture's stamps drift by tens of ms over a call, the gap between questions is seconds."""
MIN_GAP_S = 2.0
"""The shortest ``--gap-s``: a window reaches :data:`WINDOW_SLACK_S` past its question."""
BURST_GAP_S = 1.5
"""Without a layout, caller speech separated by more than this is another question."""
MATCH_S = 1.5
"""A logged turn whose speech ended this near a question's end is that question's."""
FIRST, FOLLOW_UP = "first", "follow-up"
KINDS = (FIRST, FOLLOW_UP)


def kind_of(turn: int) -> str:
    return FIRST if turn == 0 else FOLLOW_UP


# ---- the caller's audio ------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """Where each question ends in every caller's stream of a run, and its length."""

    ends_s: tuple[float, ...]
    """Offset (s from the stream's first byte) at which each question's audio ends."""
    duration_s: float
    """The whole stream: lead, questions, gaps and the hold after the last question."""

    @property
    def turns(self) -> int:
        return len(self.ends_s)

    @property
    def call_ms(self) -> int:
        """The caller's pause (ms) after it starts the stream: the call lasts as its audio."""
        return round(self.duration_s * 1000)


def lay_out(clips: Sequence[Sequence[bytes]], gap_s: float, hold_s: float,
            lead_s: float = LEAD_S) -> tuple[Layout, list[bytes]]:
    """Each call's μ-law stream from its questions' clips, all on one :class:`Layout`.

    Args:
        clips: per call, its questions' μ-law audio (8 kHz, one byte a sample), as many
            questions in every call.
        gap_s: silence between one question's end and the start of the longest next question.
        hold_s: silence after the last question until the caller hangs up.
        lead_s: silence before the first question.

    Returns:
        The layout and each call's stream.
    """
    turns = {len(c) for c in clips}
    if len(turns) != 1 or not clips[0]:
        raise ValueError(f"every call needs the same number (>= 1) of questions, got {turns}")
    n = turns.pop()
    # Question k of every call ends at ends[k]: its slot is as long as its longest clip.
    ends, at = [], round(lead_s * PHONE_RATE)
    for k in range(n):
        at += max(len(c[k]) for c in clips)
        ends.append(at)
        at += round(gap_s * PHONE_RATE)
    total = ends[-1] + round(hold_s * PHONE_RATE)
    streams = []
    for call in clips:
        buf = bytearray(SILENCE * total)
        for end, clip in zip(ends, call, strict=True):
            buf[end - len(clip):end] = clip
        streams.append(bytes(buf))
    return Layout(tuple(e / PHONE_RATE for e in ends), total / PHONE_RATE), streams


def conversation_audio(calls: int, turns: int, work: Path, gap_s: float, hold_s: float,
                       voices: Sequence[str]) -> tuple[Layout, list[Path]]:
    """The callers' streams (espeak-ng) of ``calls`` conversations, and their layout.

    The first ``turns`` questions of each of :data:`CONVERSATIONS` (``calls`` of them at most),
    a conversation in the next of ``voices``.
    """
    convs = [CONVERSATIONS[i][:turns] for i in range(min(calls, len(CONVERSATIONS)))]
    clips = [[spoken_ulaw(q, work / f"conversation{i}_q{k}.ulaw", lead_s=0, tail_s=0,
                          voice=voices[i % len(voices)]).read_bytes()
              for k, q in enumerate(conv)] for i, conv in enumerate(convs)]
    layout, streams = lay_out(clips, gap_s, hold_s)
    paths = []
    for i, stream in enumerate(streams):
        paths.append(work / f"conversation{i}.ulaw")
        paths[-1].write_bytes(stream)
    return layout, paths


# ---- the wire ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class WireTurn:
    """One question of a call on the wire, and the agent's reply to it."""

    asked_at: float | None
    """The caller's last speech packet of the question; None: no speech seen for it."""
    v2v_s: float | None
    """Reply start - question end; None: not asked, or no reply."""
    replies: list[tuple[float, float]] = field(default_factory=list)
    """The agent's speech runs answering it, for the packet gap and dead air."""


def speech_bursts(runs: list[tuple[float, float]],
                  gap_s: float = BURST_GAP_S) -> list[tuple[float, float]]:
    """Speech runs joined where less than ``gap_s`` of silence parts them: one per question."""
    out: list[list[float]] = []
    for a, b in runs:
        if out and a - out[-1][1] <= gap_s:
            out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def question_ends(caller: list[RtpPacket], turns: int,
                  layout: Layout | None = None) -> list[float | None]:
    """When each of the call's ``turns`` questions ended on the wire (None: not seen).

    With a layout, by its windows (see the module docstring). Without one, the caller's speech
    bursts (:func:`speech_bursts`) if there are exactly ``turns`` of them; otherwise which burst
    is which question cannot be told, and none is measured.
    """
    runs = speech_runs(levels(caller))
    if layout is None:
        bursts = speech_bursts(runs)
        return [b for _, b in bursts] if len(bursts) == turns else [None] * turns
    if not caller:
        return [None] * turns
    t0 = caller[0].at
    out: list[float | None] = []
    lo = float("-inf")
    for end in layout.ends_s[:turns]:
        hi = t0 + end + WINDOW_SLACK_S
        inside = [b for _, b in runs if lo < b <= hi]
        out.append(inside[-1] if inside else None)
        lo = hi
    return out


def wire_turns(call: WireCall, layout: Layout | None) -> list[WireTurn]:
    """Each question of ``call`` and its reply.

    Without a layout, a one-question call, read as :meth:`WireCall.voice_to_voice_s` reads it.
    """
    if layout is None:
        asked = speech_runs(levels(call.caller))
        return [WireTurn(asked[-1][1] if asked else None, call.voice_to_voice_s(),
                         call.reply_runs())]
    ends = question_ends(call.caller, layout.turns, layout)
    agent = speech_runs(levels(call.agent))
    t0 = call.caller[0].at if call.caller else 0.0
    out = []
    for k, end in enumerate(ends):
        if end is None:
            out.append(WireTurn(None, None))
            continue
        # A reply begun once the next question is over answers that one, not this.
        if k + 1 == len(ends):
            until = float("inf")
        else:
            nxt = ends[k + 1]
            until = nxt if nxt is not None else t0 + layout.ends_s[k + 1]
        replies = [r for r in agent if end < r[0] <= until]
        out.append(WireTurn(end, replies[0][0] - end if replies else None, replies))
    return out


# ---- the call log ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LogTurn:
    """One row of the call log's ``turns``: the agent's own clock."""

    index: int
    speech_end_s: float | None
    """From the call's start, on the agent's clock."""
    v2v_s: float | None
    unanswered: str = ""


def log_turns(db: Path, calls: Iterable[str]) -> dict[str, list[LogTurn]]:
    """The logged turns of ``calls``, by call id."""
    wanted = set(calls)
    out: dict[str, list[LogTurn]] = {c: [] for c in wanted}
    for cid, index, end, v2v, why in read_call_log(
            db, 'SELECT call_id, "index", speech_end_s, voice_to_voice_s, unanswered FROM turns'):
        if cid in wanted:
            out[cid].append(LogTurn(index, end, v2v, why or ""))
    return out


def match_log_turns(rows: list[LogTurn], layout: Layout) -> list[LogTurn | None]:
    """Each question's logged turn (None: none logged for it); see the module docstring."""
    rows = sorted(rows, key=lambda t: t.index)
    # One turn per question is not enough: a noise taken for a turn and a question the
    # agent missed leave as many turns as questions, shifted.
    if len(rows) == layout.turns and all(
            t.speech_end_s is None or abs(t.speech_end_s - end) <= MATCH_S
            for t, end in zip(rows, layout.ends_s, strict=True)):
        return list(rows)
    out: list[LogTurn | None] = [None] * layout.turns
    for row in rows:
        if row.speech_end_s is None:
            continue
        k = min(range(layout.turns), key=lambda i: abs(layout.ends_s[i] - row.speech_end_s))
        near = abs(layout.ends_s[k] - row.speech_end_s)
        if near <= MATCH_S and (out[k] is None
                                or near < abs(layout.ends_s[k] - out[k].speech_end_s)):
            out[k] = row
    return out


# ---- one round's turns, and the table ----------------------------------------------------------

@dataclass
class TurnStats:
    """One round's turns by kind (:data:`FIRST`, :data:`FOLLOW_UP`): wire and call log."""

    wire_ms: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    """Voice-to-voice on the wire, one per answered turn."""
    agent_ms: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    """The agent's own voice-to-voice (call log), one per logged turn that has one."""
    asked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    """Questions seen on the wire."""
    unanswered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    """Questions seen on the wire that got no reply speech before the next one ended."""
    log_unanswered: dict[str, dict[str, int]] = field(
        default_factory=lambda: {k: {} for k in KINDS})
    """Per kind, the call log's reasons for no reply ("not logged": no turn matched)."""


def turn_stats(wire: Iterable[list[WireTurn]], logged: Iterable[list[LogTurn]],
               layout: Layout) -> TurnStats:
    """A round's :class:`TurnStats` from its calls on the wire and its calls' logged turns."""
    s = TurnStats()
    for call in wire:
        for k, t in enumerate(call):
            kind = kind_of(k)
            if t.asked_at is None:
                continue
            s.asked[kind] += 1
            if t.v2v_s is None:
                s.unanswered[kind] += 1
            else:
                s.wire_ms[kind].append(t.v2v_s * 1000)
    for rows in logged:
        for k, t in enumerate(match_log_turns(rows, layout)):
            kind = kind_of(k)
            why = "not logged" if t is None else t.unanswered
            if why:
                s.log_unanswered[kind][why] = s.log_unanswered[kind].get(why, 0) + 1
            elif t.v2v_s is not None:
                s.agent_ms[kind].append(t.v2v_s * 1000)
    return s


def _ms(xs: list[float], q: float) -> str:
    v = percentile(xs, q)
    return "n/a" if v is None else f"{v:.0f}"


def _ratio(a: list[float], b: list[float]) -> str:
    pa, pb = percentile(a, 50), percentile(b, 50)
    return "n/a" if pa is None or not pb else f"{pa / pb:.2f}x"


def turns_rows(setup: str, concurrency: int, s: TurnStats,
               baseline_s: float) -> list[tuple[object, ...]]:
    """A round's rows: first turns, follow-ups, and follow-up p50 over first-turn p50."""
    rows: list[tuple[object, ...]] = []
    for kind in KINDS:
        wire = s.wire_ms[kind]
        p50 = percentile(wire, 50)
        whys = s.log_unanswered[kind]
        rows.append((setup, concurrency, kind, f"{len(wire)}/{s.asked[kind]}", _ms(wire, 50),
                     _ms(wire, 95), "n/a" if p50 is None else f"{p50 / 1000 / baseline_s:.2f}x",
                     _ms(s.agent_ms[kind], 50), _ms(s.agent_ms[kind], 95),
                     f"{s.unanswered[kind]}/{s.asked[kind]}",
                     ", ".join(f"{w} {n}" for w, n in sorted(whys.items())) or "0"))
    rows.append((setup, concurrency, "follow-up / first", "",
                 _ratio(s.wire_ms[FOLLOW_UP], s.wire_ms[FIRST]), "", "",
                 _ratio(s.agent_ms[FOLLOW_UP], s.agent_ms[FIRST]), "", "", ""))
    return rows


def print_turns_table(rounds: Iterable, baseline_s: float, layout: Layout,
                      gap_s: float) -> None:
    """The rounds' turns in one markdown table, first and follow-up apart.

    ``rounds`` are :class:`bench.call_round.Round`; those without ``turn_stats`` are left
    out.
    """
    rows = [row for r in rounds if r.turn_stats is not None
            for row in turns_rows(r.setup, r.concurrency, r.turn_stats, baseline_s)]
    print(f"\nTurns: {layout.turns} questions a call, {gap_s:g} s of silence after each "
          f"before the next, a call {layout.duration_s:.0f} s.\n")
    print(markdown_table(("setup", "calls", "turn", "answered", "v2v p50 ms", "v2v p95 ms",
                          "p50/serial", "agent p50 ms", "agent p95 ms", "unanswered",
                          "call log unanswered"), rows, right=range(1, 10)))
    print("\nturn: a call's first question, or its follow-ups (which need the call's earlier "
          "turns); answered: questions with a reply on the wire / questions seen on the wire; "
          "v2v on the wire, agent: the call log's own clock; follow-up / first: p50 over p50.")

