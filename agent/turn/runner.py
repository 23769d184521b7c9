"""A profile's stages for its calls' turns: the models, the prompt, the fixed phrases.

One :class:`TurnRunner` per profile (and one for its under-load profile) is shared by that
profile's calls. It implements no stage and runs no turn itself: a turn's answer is a
:class:`~agent.turn.reply.Reply` on its call's loop, whose model jobs use these stages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agent.turn.guard import Instructions
from agent.turn.knowledge import knowledge_of
from agent.turn.mcp_tool import McpHub
from agent.turn.result import TurnResult
from agent.turn.routing import LookupRouter
from agent.turn.textsplit import speakable
from agent.turn.timeline import TurnTimeline
from agent.turn.tools import TOOL_RESPONSE, Toolbox, spoken_name
from db.records import TurnRecord
from dialplan.profile import Profile
from models.asr.base import ASR, Transcript
from models.audio import ASR_RATE, StreamResampler, float_to_pcm16
from models.eot.base import EndOfTurn
from models.llm.base import LLM, Message
from models.priority import Priority, priority
from models.registry import ModelCache
from models.tts.base import TTS
from models.vad.base import VAD
from models.vad.segmenter import SpeechPaused, Utterance


@dataclass
class Stages:
    """The loaded models one profile uses (shared objects, see :class:`StageCache`)."""

    vad: VAD
    asr: ASR
    llm: LLM
    tts: TTS
    eot: EndOfTurn | None = None
    """End-of-turn model, if the profile uses one."""
    mcp: McpHub | None = None
    """The process's MCP sessions (a profile whose tools name an MCP server calls them)."""


WARM_UP_SPEECH = (
    "Thank you for calling; we are open from nine in the morning until six in the evening on "
    "weekdays, and from ten until four on Saturdays, and you can ask us about prices, bookings "
    "and directions on the phone or online, or leave a message for the team.")
"""As long as a reply's longest sentence: the TTS warm-up (see :meth:`TurnRunner.warm_up`)."""


class StageCache:
    """Loads each distinct model once per process and hands out per-profile :class:`Stages`.

    With them, the process's MCP sessions (:class:`~agent.turn.mcp_tool.McpHub`): a profile
    whose tools name an MCP server opens its session as it loads, once per process.
    """

    def __init__(self, cache: ModelCache | None = None):
        self.models = cache or ModelCache()
        self.mcp = McpHub()

    def stages(self, profile: Profile) -> Stages:
        m = self.models
        eot = profile.audio.end_of_turn
        for name, server in profile.mcp_servers.items():
            self.mcp.tools(name, server)  # the first profile to name it opens it, and waits
        return Stages(
            vad=m.vad(), asr=m.asr(profile.asr), llm=m.llm(profile.llm), tts=m.tts(profile.tts),
            eot=None if eot in ("", "off") else m.eot(eot), mcp=self.mcp,
        )

    def close(self) -> None:
        """End the MCP sessions (their servers' processes stop); the models stay loaded."""
        self.mcp.close()


class TurnRunner:
    """Runs turns for one call with one profile's stages.

    Args:
        stages: the profile's shared models.
        profile: prompt and stage options.
        out_rate: sample rate of the audio handed to ``emit`` (the line's).
        clock: where timeline stamps come from (``time.monotonic`` unless simulated).
        phrases: another runner's :meth:`speak` at the same rate (the server's, per profile), so
            a call's runner says ``repeat`` and ``apology`` from the profile's cache instead of
            synthesising them on the turn's critical path.
    """

    def __init__(self, stages: Stages, profile: Profile, out_rate: int = 8000,
                 clock: Callable[[], float] = time.monotonic,
                 phrases: Callable[[str], np.ndarray] | None = None):
        self.stages = stages
        self.profile = profile
        self.out_rate = out_rate
        self.now = clock
        self._shared = phrases
        self._phrases: dict[str, np.ndarray] = {}
        self.tools = Toolbox(profile, stages.mcp)
        lookups = self.tools.lookups() if stages.llm.weighs and stages.llm.continues else {}
        self.router = LookupRouter(profile.system_prompt, lookups) if lookups else None
        """Picks the look-up tool the caller's words ask for (:mod:`agent.turn.routing`)."""
        self.knowledge = (knowledge_of(profile.facts, f"{profile.system_prompt} {profile.greeting}")
                          if profile.facts else None)
        """The profile's facts: what the prompt holds and what a reply's checks read."""
        self.facts_in_prefix = self.knowledge is not None and fits_in_prefix(
            stages.llm, self.knowledge.block(), profile.llm)
        """All the facts are in the system prompt (:func:`fits_in_prefix`); else each turn's
        words carry the few that match them."""
        facts = self.knowledge.block() if self.facts_in_prefix else ""
        persona = "\n\n".join(t for t in (profile.system_prompt, facts) if t)
        self.plain_prompt = persona
        """The persona and its facts, without the tools: for a model that answered neither in
        words nor with a call (:meth:`~agent.turn.reply_tools.ToolSteps._ask_plain`)."""
        self.system_prompt = self.tools.system_prompt(persona)
        """The persona, its facts and its tools: the one prefix every turn starts with, primed
        once per context, so a turn prefills only the caller's new words (bench answers, the
        LLM's first token). The facts before the tools: after them, next to the conversation,
        the 1.5B answered fewer facts right (bench answers, typed)."""
        self.instructions = Instructions(self.system_prompt, [
            *(f.shown for f in profile.facts), *fixed_phrases(profile), profile.dont_know,
            *(e.description for e in profile.directory.values())])
        """What a reply must not read out: the prompt's words that are no fact or phrase."""

    @property
    def main_prompt(self) -> str:
        """The system prompt every turn starts with: the one every context is primed with."""
        return self.system_prompt

    def prime(self) -> None:
        """Put this profile's system prompt in the LLM's KV cache before the first turn.

        Above background priority: the prefix holds every fact, and background prompt work
        goes a couple of tokens a step (models.llm.llama_batch.engine.BACKGROUND_CHUNK), which
        made a profile's start take minutes. It runs while the process loads, before any call.
        """
        with priority(Priority.PLAYOUT):
            self.stages.llm.prime(self.main_prompt)
            if self.router is not None:  # its own prefix, in one context
                self.stages.llm.prime(self.router.prompt, spread=False)

    def warm_up(self, warmed: set[int] | None = None) -> None:
        """Run every stage once, so the first calls do not pay their first pass.

        A fresh process's first ASR pass is the slowest (bench asr). The LLM primes this
        profile's prompt in every context it has (see the backend's ``prime``): four first
        callers all start warm. ``warmed``: the ids of models another profile already warmed
        (profiles share a model when they name the same one): their first pass is paid, so
        only this profile's prompt is primed on them; the ones warmed here are added.
        """
        warmed = set() if warmed is None else warmed

        def first(model: object) -> bool:
            new = id(model) not in warmed
            warmed.add(id(model))
            return new

        with priority(Priority.BACKGROUND):
            # In the scheduler's workers, where the calls' LLM work runs: on the main thread,
            # the warm-up's decoding left every later call's decoding slower (bench call, one
            # call). Not explained; the main thread keeps its OpenMP team.
            self.stages.llm.scheduler.submit(self.prime, stage="llm").result()
            if first(self.stages.asr):
                self.stages.asr.warm_up()
            if self.stages.eot is not None and first(self.stages.eot):
                self.stages.eot.score(np.zeros(ASR_RATE, np.float32))
            # A long chunk: the TTS runtime's memory arena grows to the largest chunk it has
            # seen and keeps it, so it grows here, once, not over the first calls (without
            # this, Piper's RSS grew over its first replies: bench soak).
            if first(self.stages.tts):
                self.stages.tts.warm_up(WARM_UP_SPEECH)

    def prepare_phrases(self) -> Callable[[str], np.ndarray]:
        """Synthesise the profile's fixed phrases now; returns :meth:`speak` for a session.

        A session says them from its own thread (the filler while a turn is late): rendered
        there, the phrase waited for the CPU slot that the late answer held, and the answer's
        first audio could win that race: the caller heard no filler (seen in CI runs).
        """
        for text in fixed_phrases(self.profile):
            self.speak(text)
        return self.speak

    def speak(self, text: str) -> np.ndarray:
        """Synthesise a fixed phrase (greeting, goodbye) once; int16 at ``out_rate``."""
        if self._shared is not None:
            return self._shared(text)
        if text not in self._phrases:
            speech = self.stages.tts.synthesize(speakable(text))
            rs = StreamResampler(speech.sample_rate, self.out_rate)
            self._phrases[text] = float_to_pcm16(rs.process(speech.audio, last=True))
        return self._phrases[text]

    def forget(self, text: str) -> None:
        """Drop a phrase said for one call only (a campaign row's greeting with its name in it).

        Otherwise it stays for the process's life; the profile's own phrases stay.
        """
        if text not in fixed_phrases(self.profile):
            self._phrases.pop(text, None)

    def prompt(self, history: list[Message], words: str,
               after: list[Message] | tuple = (), tools: bool = True) -> list[Message]:
        """What the LLM is asked: the persona, its facts and tools, the call so far, the words.

        One construction for the turn and for the prefill of the words so far, whose cached
        tokens the turn reuses only if the two prompts agree up to the words. ``after``: this
        turn's tool calls and their answers, for the round after a tool; ``tools=False``: the
        persona and facts alone, for a model that answered neither in words nor with a call.
        """
        system = self.system_prompt if tools else self.plain_prompt
        return [Message("system", system), *history, Message("user", self.asked(words)),
                *after]

    def asked(self, words: str) -> str:
        """The caller's words as the prompt carries them, and so as the history keeps them.

        With every fact in the system prompt, the words alone. A knowledge file too large for
        it puts the facts that match the words after them; the history keeps them as sent, so
        the next turn finds this one cached.
        """
        if self.knowledge is None or self.facts_in_prefix or not words:
            return words
        return f"{words}\n\n[{self.knowledge.notes(words)}]"

    def said_last(self, history: list[Message]) -> str:
        """The caller's words of the last turn in ``history`` ("" for none), as they said them."""
        return self.last_exchange(history)[0]

    def last_exchange(self, history: list[Message]) -> tuple[str, str]:
        """The caller's words of the last turn in ``history`` and the reply they got.

        What a follow-up is about. The words as said (without the notes :meth:`asked` adds),
        not a tool's answer; the reply is the turn's last message ("" for none).
        """
        for i in range(len(history) - 1, -1, -1):
            m = history[i]
            if m.role == "user" and not m.content.startswith(TOOL_RESPONSE):
                words = m.content
                if self.knowledge is not None and not self.facts_in_prefix:
                    words = words.split("\n\n[", 1)[0]
                reply = history[-1].content if history[-1].role == "assistant" and \
                    i < len(history) - 1 else ""
                return words, str(reply)
        return "", ""

    def transcribe(self, utterance: Utterance | SpeechPaused) -> Transcript:
        """ASR of the caller's speech.

        Its job stamps it where it ran (:func:`~agent.turn.reply_state.timed`): only the call's
        loop writes the turn's timeline.
        """
        return self.stages.asr.transcribe(utterance.audio)


PREFIX_SHARE = 0.5
"""At most this share of ``llm.n_ctx`` may hold the facts: the rest is the call's history and
the reply."""


def fits_in_prefix(llm: LLM, facts: str, options) -> bool:
    """Whether a knowledge file's facts, all of them, go into the cached system prompt.

    All facts in view, the model needs no retrieval to find the one a question is about (in
    other words, or a follow-up's), and the prefix is primed once: a turn prefills only the
    caller's new words.
    """
    return llm.count_tokens(facts) <= PREFIX_SHARE * options.n_ctx


def fixed_phrases(profile: Profile) -> list[str]:
    """Everything a call of ``profile`` says word for word, synthesised before any call.

    The greeting, the limits' goodbye, the idle prompt and the hold's acknowledgement, what its
    actions announce (per directory entry; an attended one's question, summary template and
    what the caller hears when it fails), and the keypad's ``say:`` texts.
    """
    names = [spoken_name(n) for n in profile.directory]
    texts = [profile.greeting, profile.goodbye, profile.filler, profile.apology, profile.repeat]
    texts += [profile.still_there] if profile.limits.idle_prompt_s else []
    texts += [profile.hold_ack] if profile.limits.hold_s else []
    if profile.tools or profile.keypad:
        texts += [profile.message_prompt, profile.message_taken, profile.digits_prompt,
                  profile.tool_error]
        texts += [t.format(name=n) for n in names
                  for t in (profile.transferring, profile.transfer_failed)]
        warm = [spoken_name(n) for n, e in profile.directory.items() if e.attended]
        texts += [profile.consult_ask] if warm else []
        texts += [t.format(name=n) for n in warm for t in (
            profile.consult_summary, profile.consult_declined, profile.consult_busy,
            profile.consult_no_answer)]
    texts += [a.removeprefix("say:") for a in profile.keypad.values() if a.startswith("say:")]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def turn_record(
    call_id: str,
    index: int,
    timeline: TurnTimeline,
    result: TurnResult,
    call_t0: float,
    barge_in: bool = False,
    unanswered: str = "",
) -> TurnRecord:
    """Flatten a turn's timeline and metrics into a call-log record (durations in s)."""
    from datetime import UTC, datetime

    tts_total = sum(m.duration_s for m in result.tts) if result.tts else None
    tts_audio = sum(m.audio_s for m in result.tts)

    def rel(t: float | None) -> float | None:
        return None if t is None else t - call_t0

    return TurnRecord(
        call_id=call_id,
        index=index,
        speech_start_s=rel(timeline.speech_start_at),
        speech_end_s=rel(timeline.speech_end_at),
        transcript=result.transcript,
        reply_text=result.reply_text,
        **timeline.record_fields(),
        llm_total_s=None if result.llm is None else result.llm.duration_s,
        llm_tokens=None if result.llm is None else result.llm.tokens,
        tts_total_s=tts_total,
        audio_in_s=result.audio_in_s,
        audio_out_s=result.audio_out_s,
        asr_rtf=None if result.asr is None else result.asr.rtf,
        tts_rtf=(tts_total / tts_audio) if tts_total and tts_audio else None,
        asr_backend=result.asr.backend if result.asr else "",
        asr_model=result.asr.model if result.asr else "",
        barge_in=barge_in or result.cancelled,
        unanswered=unanswered,
        at=datetime.now(UTC),
    )
