"""The ``bench wer`` measurement: utterances × line conditions × ASR variants, per utterance.

Every planned utterance goes through the reference line (μ-law) for each model; the other
conditions, the extra beam widths and the context variants (``initial_prompt``, ``hotwords``)
run on a stratified seeded subset of the same utterances, so each is compared with the
reference on exactly those utterances. Results are per-utterance errors and compute times;
statistics and tables live in :mod:`bench.wer.stats` and :mod:`bench.wer.report`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bench.wer import line as line_mod
from bench.wer.line import REFERENCE, Condition, seed_for
from bench.wer.questions import BABBLE_TEXT, QUESTIONS, errors, normalize
from bench.wer.voices import Plan, Synthesizer, Voice
from dialplan.options import ASROptions
from models.registry import backend_class


@dataclass(frozen=True)
class Variant:
    """One way of running the ASR."""

    model: str
    beam: int = 1
    context: str = "none"
    """``none``, ``domain`` (the profile's system prompt as ``initial_prompt``), ``greeting``
    (the agent's last words as ``initial_prompt``), or ``hotwords``."""

    @property
    def label(self) -> str:
        extra = [f"beam {self.beam}"] if self.beam != 1 else []
        extra += [self.context] if self.context != "none" else []
        return " ".join([self.model, *extra])


@dataclass(frozen=True)
class Utterance:
    """One question said by one voice."""

    index: int
    text: str
    voice: Voice
    audio: np.ndarray = field(repr=False)
    rate: int
    in_subset: bool


@dataclass
class Run:
    """One variant on one condition, per utterance."""

    variant: Variant
    condition: str
    utts: list[int]
    errors: np.ndarray
    words: np.ndarray
    compute_s: np.ndarray
    audio_s: np.ndarray
    hyps: list[str]

    @property
    def capped(self) -> np.ndarray:
        """Errors per utterance, at most its reference words.

        A runaway transcript then counts as one utterance missed, not as hundreds of
        insertions that outweigh every other utterance.
        """
        return np.minimum(self.errors, self.words)

    @property
    def loops(self) -> int:
        """Runaway transcripts: more than twice the words said, plus 5 (a decoding loop)."""
        heard = np.array([len(normalize(h).split()) for h in self.hyps])
        return int(np.sum(heard > 2 * self.words + 5))

    def restrict(self, keep: list[int]) -> Run:
        """The same run on the utterances ``keep`` only (in that order)."""
        pos = {u: i for i, u in enumerate(self.utts)}
        idx = [pos[u] for u in keep]
        return Run(self.variant, self.condition, list(keep), self.errors[idx], self.words[idx],
                   self.compute_s[idx], self.audio_s[idx], [self.hyps[i] for i in idx])


@dataclass(frozen=True)
class Settings:
    """What one ``bench wer`` run measures."""

    models: tuple[str, ...]
    conditions: tuple[Condition, ...]
    plan: Plan
    subset: int = 40
    """Utterances (stratified by voice group) for the other conditions, beams and context."""
    beams: tuple[int, ...] = (5,)
    """Beam widths besides 1, on the subset and the reference line."""
    contexts: tuple[str, ...] = ("domain", "greeting", "hotwords")
    domain: str = ""
    greeting: str = ""
    hotwords: tuple[str, ...] = ()
    asr: ASROptions = field(default_factory=ASROptions)
    """The profile's ASR options (threads, compute type, language) every variant starts from."""
    seed: int = 0
    questions: tuple[str, ...] = QUESTIONS


@dataclass
class Results:
    """Everything measured."""

    settings: Settings
    utterances: list[Utterance]
    runs: list[Run]

    def find(self, variant: Variant, condition: str = REFERENCE) -> Run | None:
        return next((r for r in self.runs
                     if r.variant == variant and r.condition == condition), None)

    @property
    def subset(self) -> list[int]:
        return [u.index for u in self.utterances if u.in_subset]


def stratified_subset(groups: list[str], size: int, seed: int) -> set[int]:
    """About ``size`` indices, each group represented in proportion (at least one each)."""
    if size >= len(groups):
        return set(range(len(groups)))
    rng = np.random.default_rng(seed_for(seed, "subset"))
    chosen: set[int] = set()
    for g in sorted(set(groups)):
        members = [i for i, x in enumerate(groups) if x == g]
        k = max(1, round(len(members) * size / len(groups)))
        chosen |= set(rng.permutation(members)[:k].tolist())
    return chosen


def options_for(s: Settings, v: Variant) -> ASROptions:
    """The ASR options of a variant, starting from the profile's."""
    prompt = {"domain": s.domain, "greeting": s.greeting}.get(v.context, "")
    hotwords = s.hotwords if v.context == "hotwords" else ()
    return dataclasses.replace(s.asr, model=v.model, beam_size=v.beam, initial_prompt=prompt,
                               hotwords=tuple(hotwords))


def plan_work(s: Settings) -> list[tuple[Variant, str, bool]]:
    """``(variant, condition, subset only)`` in the order they run, models loaded once each."""
    # Without the reference line there is nothing to compare on a subset: all utterances.
    paired = any(c.name == REFERENCE for c in s.conditions)
    work = []
    for m in s.models:
        for c in s.conditions:
            work.append((Variant(m), c.name, paired and c.name != REFERENCE))
        work += [(Variant(m, beam=b), REFERENCE, True) for b in s.beams if b != 1]
        work += [(Variant(m, context=c), REFERENCE, True) for c in s.contexts]
    return work


def synthesize(s: Settings, synth: Synthesizer, tick: Callable[[], None]) -> list[Utterance]:
    """Every planned utterance's clean audio, and which are in the subset."""
    picked = stratified_subset([v.group for v, _ in s.plan.items], s.subset, s.seed)
    out = []
    for i, (voice, q) in enumerate(s.plan.items):
        text = s.questions[q]
        audio, rate = synth.say(voice, text)
        out.append(Utterance(i, text, voice, audio, rate, i in picked))
        tick()
    return out


def measure(s: Settings, synth: Synthesizer, utterances: list[Utterance],
            tick: Callable[[str], None]) -> list[Run]:
    """Transcribe every planned (variant, condition, utterance) and score it.

    Args:
        s: what to measure.
        synth: makes the babble talkers when a condition needs them.
        utterances: from :func:`synthesize`.
        tick: called with the current variant's label after each transcription.
    """
    subset = [u.index for u in utterances if u.in_subset]
    everyone = [u.index for u in utterances]
    conds = {c.name: c for c in s.conditions}
    conds.setdefault(REFERENCE, line_mod.CONDITIONS[REFERENCE])
    babble: dict[int, list[np.ndarray]] = {}
    lines: dict[tuple[str, int], np.ndarray] = {}

    def line_audio(cond: Condition, u: Utterance) -> np.ndarray:
        key = (cond.name, u.index)
        if key not in lines:
            talkers = None
            if cond.noise == "babble":
                if u.rate not in babble:
                    babble[u.rate] = synth.babble_talkers(BABBLE_TEXT, u.rate)
                talkers = babble[u.rate]
            lines[key] = line_mod.apply(cond, u.audio, u.rate, seed_for(s.seed, u.index),
                                        talkers)
        return lines[key]

    runs: list[Run] = []
    loaded: tuple[ASROptions, object] | None = None
    for variant, cname, subset_only in plan_work(s):
        o = options_for(s, variant)
        if loaded is None or loaded[0] != o:
            loaded = None  # free the previous model before loading the next
            model = backend_class("asr", o.backend)(o)
            model.transcribe(line_audio(conds[REFERENCE], utterances[0]))  # warm-up, not timed
            loaded = (o, model)
        asr = loaded[1]
        idx = subset if subset_only else everyone
        errs, words, comp, dur, hyps = [], [], [], [], []
        for i in idx:
            u = utterances[i]
            t = asr.transcribe(line_audio(conds[cname], u))
            e, n = errors(u.text, t.text)
            errs.append(e)
            words.append(n)
            comp.append(t.metrics.duration_s)
            dur.append(t.metrics.audio_s)
            hyps.append(t.text)
            tick(f"{variant.label} / {cname}")
        runs.append(Run(variant, cname, list(idx), np.array(errs), np.array(words),
                        np.array(comp), np.array(dur), hyps))
    return runs


def transcriptions(s: Settings, n_all: int, n_subset: int) -> int:
    """How many transcriptions :func:`measure` will make (for a progress bar)."""
    return sum(n_subset if sub else n_all for _, _, sub in plan_work(s))
