"""Who says the questions in ``bench wer``: espeak-ng accents and variants, Kokoro voices.

No recordings ship, so synthetic voices stand in for callers; breadth is what keeps one
small set from picking the model (issue 13). The voices are read from espeak-ng itself
(``--voices=en``, ``--voices=variant``), so the set follows the installed espeak-ng. Kokoro
clips are slow to make (a model run each) and are kept on disk, keyed by model, voice
and text; espeak-ng clips are cheap and made afresh.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bench.wer.line import seed_for
from models import catalog
from models.tts import kokoro_voices
from testkit.samples import spoken

KOKORO_VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
"""The voices bundled with the Kokoro model (Japanese speakers reading English)."""
RATES = (140, 165, 190)
"""espeak-ng speaking rates (words per minute) the broad set cycles through."""
DEFAULT_WPM = 160
BABBLE_VOICES = ("en-us+m3", "en-gb+f2", "en-us+f4", "en-gb-scotland+m1", "en-029+m5",
                 "en-us-nyc+f1")

GROUP_ACCENTS = "espeak accents"
GROUP_MALE = "espeak variants M"
GROUP_FEMALE = "espeak variants F"
GROUP_WHISPER = "espeak whispered"
GROUP_KOKORO = "kokoro (ja voices)"
GROUP_CHOSEN = "named voices"
GROUP_KEYS = {"accents": GROUP_ACCENTS, "variants": (GROUP_MALE, GROUP_FEMALE, GROUP_WHISPER),
              "kokoro": GROUP_KOKORO}
"""Words ``--voices`` takes for a part of the broad set."""


@dataclass(frozen=True)
class Voice:
    """One synthetic talker."""

    name: str
    """``en-gb-x-rp+m2@165`` or ``kokoro:jf_alpha``."""
    group: str
    engine: Literal["espeak", "kokoro"]
    espeak: str = ""
    """espeak-ng voice (language, optionally ``+variant``)."""
    wpm: int = DEFAULT_WPM


def espeak_voice(spec: str, group: str = GROUP_CHOSEN, wpm: int = DEFAULT_WPM) -> Voice:
    return Voice(f"{spec}@{wpm}", group, "espeak", spec, wpm)


def kokoro_voice(name: str, group: str = GROUP_KOKORO) -> Voice:
    return Voice(f"kokoro:{name}", group, "kokoro")


def _espeak_list(kind: str) -> list[list[str]]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed: apt-get install espeak-ng")
    out = subprocess.run([exe, f"--voices={kind}"], check=True, capture_output=True, text=True)
    # Columns: Pty Language Age/Gender VoiceName File [Other Languages]; a file may hold a space.
    return [line.split(None, 4) for line in out.stdout.splitlines()[1:] if line.strip()]


def espeak_accents() -> tuple[list[str], list[str]]:
    """espeak-ng's own English voices, and the MBROLA ones skipped (no MBROLA voices here)."""
    accents, skipped = [], []
    for row in _espeak_list("en"):
        lang, file = row[1], row[4].split()[0]
        if file.startswith("mb/"):
            skipped.append(f"{row[3]} ({file})")
        elif lang.startswith("en") and lang not in accents:
            accents.append(lang)
    return accents, skipped


def espeak_variants() -> list[tuple[str, str]]:
    """``(variant, group)`` for every espeak-ng variant (a name may hold a space)."""
    variants = []
    for row in _espeak_list("variant"):
        file = re.sub(r"\s+\(.*\)$", "", row[4].strip())  # drop "Other Languages"
        name = file.removeprefix("!v/")
        group = (GROUP_WHISPER if "whisper" in name.lower()
                 else GROUP_FEMALE if row[2].endswith("F") else GROUP_MALE)
        variants.append((name, group))
    return variants


@dataclass(frozen=True)
class Plan:
    """Which voice says which question."""

    items: tuple[tuple[Voice, int], ...]
    """``(voice, question index)`` per utterance."""
    skipped: tuple[str, ...] = ()
    """Voices left out, with why."""


def broad_plan(n_questions: int, seed: int, per_accent: int = 6, per_kokoro: int = 6,
               groups: tuple[str, ...] = ()) -> Plan:
    """The default set: every accent, every variant, every Kokoro voice, questions balanced.

    Each espeak-ng accent says ``per_accent`` questions at the rates of :data:`RATES` in turn;
    each variant says one, on an accent and rate taken in turn; each Kokoro voice says
    ``per_kokoro``. Questions are dealt from a seeded shuffle, so each is said about equally
    often.

    Args:
        n_questions: how many questions there are.
        seed: the deal's seed.
        per_accent: questions per espeak-ng accent.
        per_kokoro: questions per Kokoro voice.
        groups: keep only these voice groups (empty: all).
    """
    accents, skipped_mb = espeak_accents()
    variants = espeak_variants()
    rng = np.random.default_rng(seed_for(seed, "deal"))
    deck: list[int] = []

    def deal() -> int:
        if not deck:
            deck.extend(rng.permutation(n_questions).tolist())
        return deck.pop()

    voices: list[Voice] = []
    for a in accents:
        voices += [espeak_voice(a, GROUP_ACCENTS, RATES[k % len(RATES)]) for k in range(per_accent)]
    for k, (v, group) in enumerate(variants):
        voices.append(espeak_voice(f"{accents[k % len(accents)]}+{v}", group,
                                   RATES[k % len(RATES)]))
    for name in KOKORO_VOICES:
        voices += [kokoro_voice(name)] * per_kokoro
    items = tuple((v, deal()) for v in voices)
    if groups:
        items = tuple(it for it in items if it[0].group in groups)
    skipped: tuple[str, ...] = ()
    if skipped_mb:
        skipped = (f"{len(skipped_mb)} MBROLA voices (no MBROLA voice data installed: "
                    f"{', '.join(skipped_mb)})",)
    return Plan(items, skipped)


def parse_voices(specs: list[str], n_questions: int, seed: int) -> Plan:
    """The plan ``--voices`` asks for: group words restrict the broad set; voices say all.

    ``accents``, ``variants`` and ``kokoro`` keep those parts of the broad set;
    ``kokoro:NAME`` and an espeak-ng voice (``en-gb``, ``en-us+f3``, ``en-029@140``) say every
    question.

    Raises:
        ValueError: an unknown Kokoro voice, or a rate that is not a number.
    """
    groups: list[str] = []
    items: list[tuple[Voice, int]] = []
    for spec in specs:
        if spec in GROUP_KEYS:
            g = GROUP_KEYS[spec]
            groups += list(g) if isinstance(g, tuple) else [g]
            continue
        if spec.startswith("kokoro:"):
            name = spec.split(":", 1)[1]
            known = (*KOKORO_VOICES, *kokoro_voices.ENGLISH, *kokoro_voices.ACCENTED)
            if name not in known:
                raise ValueError(f"--voices: unknown Kokoro voice '{name}' "
                                 f"(bundled: {', '.join(known)})")
            voice = kokoro_voice(name, GROUP_CHOSEN)
        else:
            spec_voice, _, wpm = spec.partition("@")
            if wpm and not wpm.isdigit():
                raise ValueError(f"--voices: '{spec}': the rate after @ must be words per minute")
            voice = espeak_voice(spec_voice, GROUP_CHOSEN, int(wpm or DEFAULT_WPM))
        items += [(voice, q) for q in range(n_questions)]
    plan = broad_plan(n_questions, seed, groups=tuple(groups)) if groups else Plan(())
    return Plan(plan.items + tuple(items), plan.skipped)


class Synthesizer:
    """Makes each planned utterance's audio; Kokoro clips are cached on disk."""

    def __init__(self, kokoro_factory: Callable[[str], object] | None = None,
                 cache: Path | None = None):
        """``kokoro_factory(voice)`` returns a TTS (``models.registry.ModelCache.tts``)."""
        self._kokoro_factory = kokoro_factory
        self._cache = cache if cache is not None else catalog.cache_dir() / "bench-wer"

    def say(self, voice: Voice, text: str) -> tuple[np.ndarray, int]:
        """Mono float32 audio of ``voice`` saying ``text``, and its rate."""
        if voice.engine == "espeak":
            return spoken(text, voice=voice.espeak, wpm=voice.wpm)
        name = voice.name.split(":", 1)[1]
        key = hashlib.sha256(f"kokoro-82m-int8\0{name}\0{text}".encode()).hexdigest()[:24]
        path = self._cache / f"{key}.npz"
        if path.exists():
            with np.load(path) as z:
                return z["audio"], int(z["rate"])
        if self._kokoro_factory is None:
            raise RuntimeError("Kokoro voices need a TTS factory")
        speech = self._kokoro_factory(name).synthesize(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, audio=speech.audio, rate=speech.sample_rate)
        tmp.replace(path)
        return speech.audio, speech.sample_rate

    def babble_talkers(self, text: str, rate: int) -> list[np.ndarray]:
        """Six espeak-ng talkers reading ``text``, at ``rate``: the babble noise source."""
        from models.audio import resample

        out = []
        for v in BABBLE_VOICES:
            audio, r = spoken(text, voice=v, wpm=170)
            out.append(resample(audio, r, rate))
        return out
