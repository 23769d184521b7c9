"""One turn of conversation: utterance -> ASR -> streamed LLM -> clause TTS -> line-rate audio.

The runner wires stages; it implements none. The LLM streams in a worker thread while this
thread synthesises: the first clause is spoken while the rest of the reply is still being
generated (measured: first clause 0.65 s of TTS vs 1.3 s for a whole first sentence). Every
model call runs as a job of the process scheduler (:mod:`models.scheduler`) at a priority the
runner sets from what the caller is waiting for (:class:`~agent.turn.urgency.Urgency`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent.turn.doubt import doubtful
from agent.turn.textsplit import ClauseSplitter, speakable
from agent.turn.urgency import Urgency
from db.records import TurnRecord
from db.timeline import TurnTimeline
from dialplan.options import Profile
from models.asr.base import ASR, Transcript
from models.audio import ASR_RATE, StreamResampler, float_to_pcm16
from models.eot.base import EndOfTurn
from models.llm.base import LLM, Message
from models.metrics import ASRMetrics, LLMMetrics, TTSMetrics
from models.priority import Priority, cancel_on, priority
from models.registry import ModelCache
from models.tts.base import TTS
from models.vad.base import VAD
from models.vad.segmenter import SpeechPaused, Utterance

_DONE = object()


@dataclass
class Stages:
    """The loaded models one profile uses (shared objects, see :class:`StageCache`)."""

    vad: VAD
    asr: ASR
    llm: LLM
    tts: TTS
    eot: EndOfTurn | None = None
    """End-of-turn model, if the profile uses one."""


WARM_UP_SPEECH = (
    "Thank you for calling the library; the main branch is open from nine in the morning "
    "until six in the evening on weekdays, and from ten until four on Saturdays, and you can "
    "renew your books, book a study room or ask about our events on the phone or online.")
"""As long as a reply's longest sentence: the TTS warm-up (see :meth:`TurnRunner.warm_up`)."""


class StageCache:
    """Loads each distinct model once per process and hands out per-profile :class:`Stages`."""

    def __init__(self, cache: ModelCache | None = None):
        self.models = cache or ModelCache()

    def stages(self, profile: Profile) -> Stages:
        m = self.models
        eot = profile.audio.end_of_turn
        return Stages(
            vad=m.vad(), asr=m.asr(profile.asr), llm=m.llm(profile.llm), tts=m.tts(profile.tts),
            eot=None if eot in ("", "off") else m.eot(eot),
        )


@dataclass
class TurnResult:
    """What happened in one turn."""

    transcript: str = ""
    reply_text: str = ""
    """Reply as generated (all of it, or up to the barge-in)."""
    asr: ASRMetrics | None = None
    llm: LLMMetrics | None = None
    tts: list[TTSMetrics] = field(default_factory=list)
    audio_in_s: float = 0.0
    audio_out_s: float = 0.0
    cancelled: bool = False
    asked_to_repeat: str = ""
    """Why the agent asked the caller to repeat instead of answering ("" = it answered)."""

    @property
    def no_words(self) -> bool:
        """ASR ran and heard nothing (a cancelled turn's ASR may never have run)."""
        return not self.transcript and not self.cancelled


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

    def prime(self) -> None:
        """Put this profile's system prompt in the LLM's KV cache before the first turn."""
        with priority(Priority.BACKGROUND):
            self.stages.llm.prime(self.profile.system_prompt)

    def warm_up(self) -> None:
        """Run every stage once, so the first calls do not pay their first pass.

        Measured: the first ASR pass in a fresh process took 1.5 s against 0.8 s for the next.
        The LLM primes this profile's prompt in every context it has (see the backend's
        ``prime``): four first callers all start warm.
        """
        with priority(Priority.BACKGROUND):
            # On a thread of its own: run on the main thread, the warm-up's decoding left
            # every later call's decoding slower (Qwen 1.5B, one call, 8 calls each way: 108-180
            # against 86-101 ms a token, voice-to-voice 2.6-2.9 s against 2.0 s). Not
            # explained; the main thread keeps its OpenMP team, a warm-up thread does not.
            # (self.prime sets its priority there: a new thread does not inherit this one's.)
            primer = threading.Thread(target=self.prime, name="warm-up-llm")
            primer.start()
            primer.join()
            self.stages.asr.warm_up()
            if self.stages.eot is not None:
                self.stages.eot.score(np.zeros(ASR_RATE, np.float32))
            # A long chunk: the TTS runtime's memory arena grows to the largest chunk it has
            # seen and keeps it, so it grows here, once, not over the first calls (Piper: +164
            # MB over its first 50 replies without this).
            self.stages.tts.warm_up(WARM_UP_SPEECH)

    def prepare_phrases(self) -> Callable[[str], np.ndarray]:
        """Synthesise the profile's fixed phrases now; returns :meth:`speak` for a session.

        A session says them from its own thread (the filler while a turn is late): rendered
        there, the phrase waited for the CPU slot that the late answer held, and the answer's
        first audio could win that race: the caller heard no filler (a CI run, 1 of ~6).
        """
        profile = self.profile
        for text in (profile.greeting, profile.goodbye, profile.filler, profile.apology,
                     profile.repeat):
            if text.strip():
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

    def prompt(self, history: list[Message], words: str) -> list[Message]:
        """What the LLM is asked: the persona, the call so far, then the caller's words.

        One construction for the turn and for the prefill of the words so far, whose cached
        tokens the turn reuses only if the two prompts agree up to the words.
        """
        return [Message("system", self.profile.system_prompt), *history, Message("user", words)]

    def transcribe(self, utterance: Utterance | SpeechPaused, timeline: TurnTimeline) -> Transcript:
        """ASR of the caller's speech; stamps ``asr_done_at``."""
        tr = self.stages.asr.transcribe(utterance.audio)
        timeline.asr_done_at = self.now()
        return tr

    def run(
        self,
        utterance: Utterance | SpeechPaused,
        timeline: TurnTimeline,
        history: list[Message],
        emit: Callable[[np.ndarray], None],
        cancel: threading.Event,
        gate: threading.Event | None = None,
        transcript: Transcript | None = None,
        alone: Callable[[], bool] = lambda: True,
    ) -> TurnResult:
        """Answer one utterance.

        Args:
            utterance: the caller's endpointed speech (16 kHz).
            timeline: stamps; the caller has set speech_end_at and endpoint_at and sets
                first_frame_out_at when the first emitted frame leaves.
            history: prior user/assistant messages of this call; this turn's are appended.
            emit: receives int16 audio at ``out_rate``, chunk by chunk, from this thread.
            cancel: set by the caller on barge-in or hangup; the turn stops promptly.
            gate: for a speculative turn (started before the endpoint): audio is held until
                the caller sets it, having set ``timeline.endpoint_at``. A turn cancelled
                before its gate opened leaves ``history`` untouched.
            transcript: the utterance's transcript when the caller already ran
                :meth:`transcribe` (the session does, to judge the end of the turn).
            alone: whether no other call is up now (for ``tts.first_chunk_opener =
                "alone"``, and a first chunk cut on the token that shows where).

        Returns:
            Transcript, reply and per-stage metrics.
        """
        result = TurnResult(audio_in_s=utterance.duration_s)
        tr = transcript if transcript is not None else self.transcribe(utterance, timeline)
        result.transcript, result.asr = tr.text, tr.metrics
        if not tr.text or cancel.is_set():
            result.cancelled = cancel.is_set()
            return result
        doubt = doubtful(tr, self.profile.asr.min_avg_logprob)
        if doubt:
            return self._ask_again(doubt, result, timeline, emit, cancel, gate)

        messages = self.prompt(history, tr.text)
        chunks: queue.Queue = queue.Queue()
        urgency = Urgency(timeline, result, gate, self.now)
        # A backend that batches (llama-batch) drops a cancelled reply between its steps: a
        # speculation the caller talked past no longer holds a sequence, or gets its prefill.
        with cancel_on(cancel):
            stream = self.stages.llm.stream(messages)
        producer = threading.Thread(
            target=self._produce,
            args=(stream, chunks, timeline, cancel, urgency, alone),
            daemon=True,
            name="llm-stream",
        )
        producer.start()
        resampler = StreamResampler(self.stages.tts.sample_rate, self.out_rate)
        opened = gate is None

        def through_gate() -> bool:
            nonlocal opened
            while not opened and not cancel.is_set():
                opened = gate.wait(0.01)
            if opened:
                timeline.settle()
            return opened and not cancel.is_set()

        try:
            while True:
                item = chunks.get()
                if isinstance(item, Exception):
                    raise item
                if item is _DONE or cancel.is_set():
                    break
                with priority(urgency.tts):
                    speech = self.stages.tts.synthesize(item)
                if timeline.tts_first_audio_at is None and len(speech.audio):
                    timeline.tts_first_audio_at = self.now()
                result.tts.append(speech.metrics)
                if cancel.is_set():
                    break
                pcm = float_to_pcm16(resampler.process(speech.audio))
                if not through_gate():
                    break
                if len(pcm):
                    result.audio_out_s += len(pcm) / self.out_rate
                    emit(pcm)
            tail = float_to_pcm16(resampler.process(np.zeros(0, np.float32), last=True))
            if len(tail) and through_gate():
                result.audio_out_s += len(tail) / self.out_rate
                emit(tail)
        finally:
            producer.join(timeout=30)
        # A speculative turn with nothing to say still waits for its verdict: the caller's
        # words join the history only if the endpoint confirms the turn.
        through_gate()
        timeline.settle()
        timeline.tts_done_at = self.now()
        result.llm = stream.metrics
        result.reply_text = stream.text.strip()
        result.cancelled = cancel.is_set()
        if not opened:  # speculation dropped: the caller kept talking; nothing was said
            return result
        history.append(Message("user", tr.text))
        if result.reply_text:
            history.append(Message("assistant", result.reply_text))
        return result

    def _ask_again(self, why: str, result: TurnResult, timeline: TurnTimeline,
                   emit: Callable[[np.ndarray], None], cancel: threading.Event,
                   gate: threading.Event | None) -> TurnResult:
        """Say the profile's ``repeat`` phrase instead of answering a guess; history untouched."""
        timeline.llm_first_token_at = timeline.first_chunk_text_at = self.now()
        with priority((Priority.FIRST_AUDIO, timeline.speech_end_at or 0.0)):
            pcm = self.speak(self.profile.repeat)
        timeline.tts_first_audio_at = self.now()
        while gate is not None and not gate.is_set() and not cancel.is_set():
            gate.wait(0.01)
        timeline.settle()
        result.asked_to_repeat, result.reply_text = why, self.profile.repeat
        result.cancelled = cancel.is_set()
        if not cancel.is_set() and (gate is None or gate.is_set()):
            result.audio_out_s = len(pcm) / self.out_rate
            emit(pcm)
        return result

    def _produce(
        self,
        stream,
        chunks: queue.Queue,
        timeline: TurnTimeline,
        cancel: threading.Event,
        urgency: Urgency,
        alone: Callable[[], bool],
    ) -> None:
        # A reply about to fall silent is cut into phrases, as its first chunk is: under load
        # a whole sentence's tokens take too long to decode (4 callers at once, 40 calls:
        # 17-22 s of dead air inside replies, holes up to 4 s; cut into phrases: 4-10 s).
        tts = self.profile.tts
        opener = tts.first_chunk_opener
        splitter = ClauseSplitter(first_words=tts.first_chunk_words, hurry=urgency.hurry,
                                  openers=alone if opener == "alone" else opener, eager=alone)
        try:
            # Each decode step is a scheduler job at this priority: once the first clause is
            # out, TTS of it goes first and the rest of the reply only keeps ahead of playout.
            with priority(urgency.llm):
                for piece in stream:
                    if timeline.llm_first_token_at is None:
                        timeline.llm_first_token_at = self.now()
                    if cancel.is_set():
                        break
                    for chunk in splitter.push(piece):
                        self._put(chunks, chunk, timeline, self.now)
            if not cancel.is_set():
                for chunk in splitter.flush():
                    self._put(chunks, chunk, timeline, self.now)
        except Exception as e:  # handed to run(), which raises it on the turn's own thread
            chunks.put(e)
        finally:
            # Closed here, on the thread iterating it: this releases the LLM's lock now,
            # not when the stream object is garbage-collected.
            stream.close()
            timeline.llm_done_at = self.now()
            chunks.put(_DONE)

    @staticmethod
    def _put(chunks: queue.Queue, text: str, timeline: TurnTimeline, now) -> None:
        text = speakable(text)
        if not text:
            return
        if timeline.first_chunk_text_at is None:
            timeline.first_chunk_text_at = now()
        chunks.put(text)


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
