r"""What ``bench tools`` measured, and its tables: no models, no audio (see :mod:`.tools`).

A :class:`Turn` is one spoken request and what the agent did with it, as the call would have
done it; a :class:`ModelRun` is every request answered by one profile's models. The tables
are pure functions of those records.

A reply that made no tool call but says it acted is a *false claim*, and counts as a wrong
answer whatever was asked: the caller is told they are being put through, and nothing
happens. :data:`CLAIM` finds one: ``\b(?:A|B|...)\b``, ignoring case, in the reply with its
whitespace collapsed, where A, B, ... are (:data:`CLAIMS`)::

    (?:i'll|i will|i'm going to|let me) (?:now )?(?:transfer|connect|put you through|book)
    (?:i'll|i will|i'm going to|let me) (?:now )?(?:record|hang up|end (?:the|this|our) call)
    (?:i'll|i will|i'm going to|let me) (?:now )?take (?:a |your )?message
    (?:i'll|i will|i'm going to|let me) (?:now )?pass (?:it|that|this|your message) on
    transferr(?:ed|ing) you
    connect(?:ed|ing) you
    put(?:ting)? you through
    (?:i've|i have) (?:booked|recorded|taken|passed|noted)
    booked (?:it|that|you|a|the|your)
    recorded (?:it|that|your)
    (?:took|taken|taking) (?:a |your )?message
    hung up
    hanging up

An offer ("I can transfer you if you like") is not a claim; an announcement ("I'll transfer
you now", "Transferring you to accounts") is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.header import markdown_table
from db.stats import percentile

_WILL = "(?:i'll|i will|i'm going to|let me) (?:now )?"
CLAIMS = (
    _WILL + "(?:transfer|connect|put you through|book)",
    _WILL + "(?:record|hang up|end (?:the|this|our) call)",
    _WILL + "take (?:a |your )?message",
    _WILL + "pass (?:it|that|this|your message) on",
    "transferr(?:ed|ing) you",
    "connect(?:ed|ing) you",
    "put(?:ting)? you through",
    "(?:i've|i have) (?:booked|recorded|taken|passed|noted)",
    "booked (?:it|that|you|a|the|your)",
    "recorded (?:it|that|your)",
    "(?:took|taken|taking) (?:a |your )?message",
    "hung up",
    "hanging up",
)
"""The ways a reply claims an action, as listed in the module docstring."""
CLAIM = re.compile(r"\b(?:" + "|".join(CLAIMS) + r")\b", re.IGNORECASE)
"""A spoken claim to have acted (or to act now); shown in the module docstring."""

NONE = "none"
REPEAT = "repeat"
"""Chosen: the transcript was a guess and the agent asked the caller to say it again."""
SILENT = "silent"
"""Chosen: nothing said and nothing done (every round a call that could not be read): the
caller hears silence. Wrong whatever was asked."""


def false_claim(reply: str) -> str:
    """The words of ``reply`` that claim an action ("" when none do)."""
    m = CLAIM.search(" ".join(reply.replace("\u2019", "'").split()))
    return m.group(0) if m else ""


@dataclass
class Turn:
    """One request and what the agent did with it."""

    text: str
    """What the caller said (the script)."""
    expected: str
    """The tool it needs, or ``none``."""
    expected_target: str
    """The directory entry a transfer should reach ("" for other tools)."""
    heard: str
    """The ASR's transcript of it through the line."""
    chosen: str
    """The action the call would carry out (``end_call`` also when the reply only said
    goodbye), ``none``, ``repeat`` or ``silent``."""
    target: str = ""
    """The directory entry of a chosen transfer."""
    implicit: bool = False
    """``end_call`` read from a spoken goodbye, not called."""
    reply: str = ""
    """What the caller heard."""
    refused: list[str] = field(default_factory=list)
    """Tool calls the turn did not carry out: ``invalid`` (unknown tool or target, missing
    arguments) or ``malformed`` (no call could be read); the model was told and asked again."""
    refused_text: list[str] = field(default_factory=list)
    """What each refused call said (the model's text, or what was wrong with it)."""
    decision_s: float | None = None
    """Transcript to the first phrase's text: the LLM's time to its decision (a tool call's
    announcement) or to its first clause."""
    tts_s: float | None = None
    """That phrase's text to its first audio."""
    first_audio_s: float | None = None
    """Transcript to first audio (``decision_s + tts_s``)."""

    @property
    def called(self) -> bool:
        """The model made a tool call (carried out or not)."""
        return bool(self.refused) or (self.chosen not in (NONE, REPEAT, SILENT)
                                      and not self.implicit)

    @property
    def claim(self) -> str:
        """A false claim: the words of a reply with no tool call that says it acted."""
        return "" if self.called or self.chosen in (REPEAT, SILENT) else false_claim(self.reply)

    @property
    def right_tool(self) -> bool:
        return self.chosen == self.expected and not self.claim

    @property
    def right_target(self) -> bool:
        return self.chosen == "transfer" and self.target == self.expected_target

    def label(self, expected: bool) -> str:
        """``transfer children``, ``end_call``, ``none``: a confusion table's row or column."""
        tool, target = ((self.expected, self.expected_target) if expected
                        else (self.chosen, self.target))
        return f"{tool} {target}" if tool == "transfer" else tool


@dataclass
class ModelRun:
    """Every request answered by one profile's models."""

    profile: str
    llm: str
    asr: str
    turns: list[Turn] = field(default_factory=list)

    @property
    def model(self) -> str:
        return Path(self.llm).name if "/" in self.llm else self.llm

    def right_tool(self) -> int:
        return sum(t.right_tool for t in self.turns)

    def transfers(self) -> list[Turn]:
        return [t for t in self.turns if t.expected == "transfer"]

    @property
    def name(self) -> str:
        """``model (profile)``: a run's name over its own tables."""
        return f"{self.model}, profile {self.profile}"

    def latency(self, tool: bool) -> list[Turn]:
        """Timed turns whose action the model called (``tool``), or that called nothing.

        A turn with a refused call, or that asked the caller to repeat, is neither.
        """
        return [t for t in self.turns
                if t.first_audio_s is not None and t.chosen != REPEAT
                and (t.called and not t.refused if tool else not t.called)]


def _pct(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "-"


def _s(values: Iterable[float | None], q: float = 50) -> float | None:
    return percentile(list(values), q)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"×{a / b:.2f}"


def summary_table(runs: list[ModelRun]) -> str:
    """One row per model: accuracy, failures, first audio; the first model is the baseline."""
    base = _s(t.first_audio_s for t in runs[0].latency(False)) if runs else None
    rows = []
    for r in runs:
        tool = _s(t.first_audio_s for t in r.latency(True))
        plain = _s(t.first_audio_s for t in r.latency(False))
        transfers = r.transfers()
        rows.append([
            r.model, r.profile, r.asr, _pct(r.right_tool(), len(r.turns)),
            _pct(sum(t.right_target for t in transfers), len(transfers)),
            sum(bool(t.claim) for t in r.turns), sum(t.chosen == SILENT for t in r.turns),
            sum(len(t.refused) for t in r.turns),
            sum(t.chosen == REPEAT for t in r.turns),
            f"{_fmt(tool)} / {_fmt(plain)} s", _ratio(tool, plain), _ratio(plain, base),
        ])
    return markdown_table(
        ["LLM", "profile", "ASR", "right tool (or none)", "right transfer target",
         "false claims", "silent turns", "refused calls", "asked to repeat",
         "first audio p50 tool / plain", "tool / plain",
         f"plain vs {runs[0].model if runs else '-'}"],
        rows, right=range(3, 12))


def confusion_table(run: ModelRun) -> str:
    """Expected (rows) against chosen (columns), transfers by target; rows add up to totals."""
    rows_order = list(dict.fromkeys(t.label(True) for t in run.turns))
    cols = rows_order + sorted({t.label(False) for t in run.turns} - set(rows_order))
    rows = []
    for want in rows_order:
        turns = [t for t in run.turns if t.label(True) == want]
        cells = [sum(t.label(False) == c for t in turns) or "" for c in cols]
        rows.append([want, len(turns), *cells, sum(bool(t.claim) for t in turns) or ""])
    return markdown_table(["expected \\ chosen", "requests", *cols, "false claims"], rows,
                          right=range(1, len(cols) + 3))


def latency_table(runs: list[ModelRun]) -> str:
    """Transcript to first audio of tool turns against plain turns, per model (p50 / p90)."""
    rows = []
    for r in runs:
        plain = _s(t.first_audio_s for t in r.latency(False))
        for tool, kind in ((True, "tool call (its announcement)"),
                           (False, "no tool call (first clause)")):
            turns = r.latency(tool)
            first = _s(t.first_audio_s for t in turns)
            rows.append([
                r.model, r.profile, kind, len(turns),
                f"{_fmt(_s(t.decision_s for t in turns))} / "
                f"{_fmt(_s((t.decision_s for t in turns), 90))}",
                _fmt(_s(t.tts_s for t in turns)),
                f"{_fmt(first)} / {_fmt(_s((t.first_audio_s for t in turns), 90))}",
                _ratio(first, plain) if tool else "baseline",
            ])
    return markdown_table(["LLM", "profile", "turns", "n", "LLM to the phrase p50 / p90 s",
                           "its TTS p50 s", "first audio p50 / p90 s", "vs no tool call"],
                          rows, right=range(3, 8))


def failures(run: ModelRun) -> list[str]:
    """One markdown line per wrong turn: what was said, heard, expected, done and replied."""
    out = []
    for t in run.turns:
        if t.right_tool and (t.expected != "transfer" or t.right_target):
            continue
        why = f"false claim \"{t.claim}\"" if t.claim else f"chose {t.label(False)}"
        extra = ""
        if t.refused:
            extra = (f"; refused {', '.join(t.refused)} (first: "
                     f"`{' '.join(t.refused_text[0].split())[:100]}`)")
        out.append(f"- \"{t.text}\" (heard \"{t.heard}\"): expected {t.label(True)}, {why}"
                   f"{extra}; said \"{' '.join(t.reply.split())[:120]}\"")
    return out
