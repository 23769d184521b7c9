"""The measurement of ``bench answers``: callers say a persona's calls, the agent answers them.

Each call of a persona's question files (:mod:`bench.conversations`) is made once per
voice group of :data:`GROUPS`, by one voice of the group for all its turns (the groups' voices
taken in turn, call by call), through the 8 kHz μ-law line and heard by the profile's ASR;
``typed`` hands the model the words as written. The turns are answered in order on one
history list, by a real :class:`~agent.turn.reply.Reply` each, as a call's turns are: turn N's
prompt holds turns 1..N-1. This runs for the persona's profile and for its under-load one (the
escalation to the profile's own model included, as in a call). Each reply is judged by
:mod:`bench.judge`. Only a reply's first clause is synthesised: the rest is heard by
no one, and the answer is judged on its text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from agent.answer import answer
from agent.turn.runner import StageCache, TurnRunner
from agent.turn.tools import target_of
from bench.conversations import HIDDEN, Call, Conversations
from bench.judge import Leaks, judge, spliced
from bench.scoring import known_numbers, normalize, wer
from bench.tools import REPLY_TIMEOUT_S, llm_label
from bench.wer.line import CONDITIONS, REFERENCE, apply, seed_for
from dialplan.options import TTSOptions
from dialplan.profile import Profile
from models.asr.base import Transcript
from models.audio import ASR_RATE
from models.metrics import ASRMetrics
from testkit.clips import kept_clip
from testkit.samples import spoken

GROUPS: dict[str, tuple[str, ...]] = {
    "Kokoro US/UK": ("kokoro:af_heart", "kokoro:am_michael", "kokoro:bf_emma",
                     "kokoro:bm_george", "kokoro:af_bella", "kokoro:am_adam"),
    "Kokoro accented": ("kokoro:ef_dora", "kokoro:ff_siwis", "kokoro:hf_alpha",
                        "kokoro:if_sara", "kokoro:pf_dora", "kokoro:im_nicola"),
    "espeak-ng": ("espeak:en-us", "espeak:en-gb+f3", "espeak:en-us+m5", "espeak:en-gb-x-rp"),
    "hibari": ("hibari:heart",),
    "typed": ("text:typed",),
}
"""The callers: each call is made once per group, by one of its voices. ``typed`` says nothing:
its words go to the model as written, so the ear's share of the misses shows."""

DEFAULT_GROUPS = ("Kokoro US/UK", "hibari")
"""Two groups by default: three personas' calls in both splits, twice over, already take
hours on two cores."""

OWN, UNDER = "default model", "under load"
"""The rungs: the profile's own models, and its under-load profile's."""


@dataclass
class Turn:
    """One turn of a call, said by one voice, answered by one rung's models, and judged."""

    persona: str
    split: str
    call: str
    index: int
    """The turn's place in its call, from 0."""
    say: str
    kind: str
    expected: str
    """A fact's pattern, an action's ``transfer:<entry>``/``end_call``/``take_message``, or
    ``unknown``."""
    follow_up: bool
    voice: str
    group: str
    heard: str
    wer: float
    words: int
    reply: str
    action: str
    """What the call does: ``none``, ``transfer:<entry>``, ``end_call``, ``take_message``."""
    repeat: bool
    right: bool
    invented: list[str]
    claim: str
    """Words claiming an action the call did not take ("" when none)."""
    spliced: str
    """The fixed phrase glued after other words of the reply ("" when none)."""
    leaked: str
    """The prompt's instruction words the reply read out ("" when none)."""
    objected: str
    """The sentence a check kept from the caller, and why ("" when none): the call log's
    ``unfounded``."""
    asr_s: float
    first_audio_s: float | None
    """From the transcript to the reply's first audio."""

    @property
    def answer_s(self) -> float | None:
        """From the end of the caller's audio to the first audio, endpointing left out."""
        return None if self.first_audio_s is None else self.asr_s + self.first_audio_s


@dataclass
class ModelRun:
    """A persona's calls of one split, answered by one rung."""

    persona: str
    split: str
    rung: str
    profile: str
    llm: str
    asr: str
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Persona:
    """A persona's profiles (its own first, then its under-load one) and its calls by split."""

    name: str
    profiles: list[Profile]
    splits: dict[str, Conversations]


class FirstClauseOnly:
    """The profile's TTS for a reply's first clause; nothing for the rest (not listened to)."""

    def __init__(self, tts):
        self._tts = tts

    def synthesize(self, text: str, first: bool = False):
        return self._tts.synthesize(text if first else "", first)

    def __getattr__(self, name):
        return getattr(self._tts, name)


def plan(calls: Sequence[Call], groups: Sequence[str]) -> list[tuple[Call, str, str]]:
    """(call, voice, group) for each call once per group, the group's voices taken in turn."""
    out = []
    for g in groups:
        voices = GROUPS[g]
        out += [(c, voices[i % len(voices)], g) for i, c in enumerate(calls)]
    return out


def say(voice: str, text: str, cache: StageCache, clips: Path | None) -> tuple[np.ndarray, int]:
    """``voice`` (``engine:name``) saying ``text``; model voices' clips are kept in ``clips``."""
    engine, name = voice.split(":", 1)
    if engine == "espeak":
        return spoken(text, voice=name, wpm=165)
    opts = (TTSOptions(backend="hibari") if engine == "hibari"
            else TTSOptions(backend="piper", model=name) if engine == "piper"
            else TTSOptions(backend="kokoro-onnx", voice=name))

    def make() -> tuple[np.ndarray, int]:
        speech = cache.models.tts(opts).synthesize(text)
        return speech.audio, speech.sample_rate

    return kept_clip(clips, f"{voice}\0{text}", make)


def typed(text: str) -> Transcript:
    """``text`` as if heard perfectly (the ``typed`` group)."""
    return Transcript(text=text, metrics=ASRMetrics("typed", 0.0, 0.0, 0.0))


def persona_texts(profile: Profile) -> tuple[list[str], list[str]]:
    """What a reply may state numbers of, and what it may say word for word.

    The first: the persona, its greeting, its facts. The second: the facts, the fixed phrases
    (greeting included) and the directory's entries and descriptions.
    """
    facts = [f.shown for f in profile.facts]
    entries = [f"the {n.replace('-', ' ')}" for n in profile.directory]
    phrases = [profile.greeting, profile.goodbye, profile.filler, profile.apology,
               profile.repeat, profile.dont_know, profile.message_prompt,
               profile.message_taken, profile.digits_prompt, profile.tool_error,
               *(t.format(name=e) for e in entries
                 for t in (profile.transferring, profile.transfer_failed)),
               *(e.description for e in profile.directory.values())]
    return [profile.system_prompt, profile.greeting, *facts], [*facts, *phrases]


def instruction_texts(runner: TurnRunner, history: list, words: str,
                      caller: Sequence[str]) -> list[str]:
    """The texts of the prompt a turn on ``words`` is asked with, less the caller's words.

    The system prompt as the runner builds it, and whatever the runner puts around the words
    (a turn's facts, its rule for what it does not know); replies are the agent's own.
    """
    texts = [runner.system_prompt]
    for m in runner.prompt(list(history), words):
        if m.role != "assistant" and isinstance(m.content, str):
            texts.append(m.content)
    for w in sorted({w for w in caller if w.strip()}, key=len, reverse=True):
        texts = [t.replace(w, " ") for t in texts]
    return texts


def action_of(result, profile: Profile) -> str:
    """What the call does after a turn, as a bench turn's ``action`` reads."""
    a = result.action
    if a is None:
        return "none"
    if a.name == "transfer":
        return f"transfer:{target_of(a, profile) or a.arguments.get('target', '?')}"
    return a.name


def measure(persona: Persona, groups: Sequence[str], cache: StageCache, clips: Path | None,
            progress: Callable[[str], None] = lambda s: None,
            show_heldout: bool = False) -> list[ModelRun]:
    """Say, hear and answer every call of every split with each profile.

    One run per split and rung. Held-out texts stay out of ``progress`` unless
    ``show_heldout``.
    """
    planned = {s: plan(c.calls, groups) for s, c in persona.splits.items()}
    audio: dict = {}  # (voice, text) -> the line's 16 kHz audio; None for typed
    for split, rows in planned.items():
        todo = [(v, t.say) for c, v, _ in rows for t in c.turns]
        for i, (voice, text) in enumerate(todo):
            if (voice, text) in audio:
                continue
            if voice.startswith("text:"):
                audio[voice, text] = None
                continue
            a, rate = say(voice, text, cache, clips)
            audio[voice, text] = apply(CONDITIONS[REFERENCE], a, rate,
                                       seed_for("bench answers", voice + text))
            shown = f": {text}" if split not in HIDDEN or show_heldout else ""
            progress(f"{persona.name} {split}: said {i + 1}/{len(todo)} ({voice}){shown}")
    heard: dict = {}  # (ASR options, voice, text) -> (transcript, seconds)
    runs, own = [], None  # own: the profile's runner, which an under-load one escalates to
    for profile in persona.profiles:
        stages = cache.stages(profile)
        for i, key in enumerate(audio):
            if (profile.asr, *key) in heard:
                continue
            a = audio[key]
            if a is None:
                heard[profile.asr, *key] = (typed(key[1]), 0.0)
                continue
            t0 = time.monotonic()
            tr = stages.asr.transcribe(a)
            heard[profile.asr, *key] = (tr, time.monotonic() - t0)
            progress(f"{persona.name}: heard {i + 1}/{len(audio)} ({profile.asr.model})")
        runner = TurnRunner(replace(stages, tts=FirstClauseOnly(stages.tts)), profile)
        progress(f"{persona.name} {profile.name}: warming up {profile.llm.model}")
        runner.warm_up()
        own = own or runner
        for split, rows in planned.items():
            run = ModelRun(persona.name, split, OWN if runner is own else UNDER, profile.name,
                           llm_label(profile.llm.model), profile.asr.model)
            show = split not in HIDDEN or show_heldout
            for n, (call, voice, group) in enumerate(rows):
                turns = make_call(call, voice, group, runner, None if runner is own else own,
                                  audio, heard, persona.name, split, show)
                run.turns += turns
                for t in turns:
                    progress(f"{persona.name} {split} {run.rung} call {n + 1}/{len(rows)} "
                             f"turn {t.index + 1} {'ok   ' if t.right else 'WRONG'} "
                             f"{t.kind:7} {voice}" + (
                                 f" heard \"{t.heard.strip()[:50]}\" -> "
                                 f"\"{' '.join(t.reply.split())[:90]}\""
                                 f"{' [' + t.action + ']' if t.action != 'none' else ''}"
                                 if show else ""))
            runs.append(run)
    return runs


def make_call(call: Call, voice: str, group: str, runner: TurnRunner,
              escalate: TurnRunner | None, audio: dict, heard: dict, persona: str,
              split: str, show: bool = True) -> list[Turn]:
    """One call's turns, said by ``voice``, answered in order on one history, and judged.

    ``show``: a stuck reply's error may name the words (not for a held-out call).
    """
    profile = runner.profile
    known_texts, allowed = persona_texts(profile)
    known, leaks = known_numbers(known_texts), Leaks(allowed)
    phrases = (profile.dont_know, profile.apology, profile.repeat)
    history: list = []
    caller: list[str] = []
    out = []
    for j, spec in enumerate(call.turns):
        tr, asr_s = heard[profile.asr, voice, spec.say]
        a = audio[voice, spec.say]
        caller += [spec.say, tr.text]
        instructions = instruction_texts(runner, history, tr.text, caller)
        try:
            r, t = answer(runner, tr, history,
                          audio_in_s=0.0 if a is None else len(a) / ASR_RATE,
                          escalate=escalate, timeout_s=REPLY_TIMEOUT_S)
        except TimeoutError:
            if show:
                raise
            raise TimeoutError(f"{persona} {split}: no reply in call {call.name}, turn {j + 1}"
                               ) from None
        action = action_of(r, profile)
        verdict = judge(spec, r.reply_text, action, known | known_numbers(caller))
        first = (None if t.tts_first_audio_at is None or t.asr_done_at is None
                 else t.tts_first_audio_at - t.asr_done_at)
        out.append(Turn(
            persona=persona, split=split, call=call.name, index=j, say=spec.say,
            kind=spec.kind, expected=spec.expected, follow_up=spec.follow_up, voice=voice,
            group=group, heard=tr.text, wer=wer(spec.say, tr.text),
            words=len(normalize(spec.say).split()), reply=r.reply_text, action=action,
            repeat=bool(r.asked_to_repeat), right=verdict.right, invented=list(verdict.invented),
            claim=verdict.claim, spliced=spliced(r.reply_text, phrases),
            leaked=leaks.leaked(r.reply_text, instructions, caller),
            objected=r.unfounded or "", asr_s=asr_s, first_audio_s=first))
    return out
