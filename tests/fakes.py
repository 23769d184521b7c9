"""Fakes for fault injection: one per stage plus the simulated phone line (``FakeCall``).

Each fake subclasses the real stage base, so the base's timing and metrics code runs. Knobs:
``fail_with`` (raise this), ``delay_s`` (work this long), ``hang`` (block until released) and a
scripted output. They test the session, playout and call log under errors, barge-in and slow
stages; they never stand in for a claim that a model works (tests with real models do that).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np

from agent.simulate import SimulatedLine
from agent.turn.runner import Stages
from models.asr.base import ASR
from models.eot.base import EndOfTurn
from models.llm.base import LLM, Message, Piece
from models.priority import current_cancel
from models.scheduler import Scheduler
from models.tts.base import TTS
from models.vad.base import VAD, VADStream


class _Knobs:
    def __init__(self, fail_with: Exception | None = None, delay_s: float = 0.0,
                 hang: bool = False):
        self.fail_with = fail_with
        self.delay_s = delay_s
        self.hang = hang
        self.release = threading.Event()  # set it to let a hanging fake return
        self.calls = 0
        self.threads: set[str] = set()
        """Names of the threads the fake's work ran on."""

    def _work(self) -> None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.fail_with is not None:
            raise self.fail_with
        if self.hang:
            self.release.wait()
        if self.delay_s:
            time.sleep(self.delay_s)


class _EnergyStream(VADStream):
    def __init__(self, threshold: float):
        self.threshold = threshold

    def probability(self, chunk: np.ndarray) -> float:
        return 1.0 if float(np.sqrt(np.mean(chunk * chunk))) > self.threshold else 0.0


class FakeVAD(VAD, _Knobs):
    """Speech = a chunk whose RMS exceeds ``threshold`` (tones count as speech)."""

    model_name = "fake-vad"

    def __init__(self, threshold: float = 0.01, **knobs):
        _Knobs.__init__(self, **knobs)
        self.threshold = threshold

    def new_stream(self) -> VADStream:
        return _EnergyStream(self.threshold)


class FakeASR(ASR, _Knobs):
    """Returns scripted transcripts in order (the last one repeats); records audio lengths."""

    backend = "fake"
    model_name = "fake-asr"

    def __init__(self, texts: list[str] | None = None, **knobs):
        _Knobs.__init__(self, **knobs)
        self.texts = list(texts or ["hello there"])
        self.heard_s: list[float] = []

    def _transcribe_impl(self, audio: np.ndarray) -> str:
        self._work()
        self.heard_s.append(len(audio) / 16000)
        return self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]


class FakeLLM(LLM, _Knobs):
    """Streams a scripted reply word by word, ``token_s`` apart.

    ``pushes``: as llama-batch does, a thread of its own (``fake-engine``) hands each word
    over as it is made (:meth:`~models.llm.base.LLMStream.push`); else each is a step.
    """

    model_name = "fake-llm"

    def __init__(self, reply: str = "The library opens at ten.", token_s: float = 0.01,
                 pushes: bool = False, **knobs):
        _Knobs.__init__(self, **knobs)
        self.reply = reply
        self.token_s = token_s
        self.pushes = pushes
        self.prompts: list[list[Message]] = []

    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        self.prompts.append(list(messages))
        if self.pushes:
            return _PushedWords(self, current_cancel())
        return self._words()

    def _words(self) -> Iterator[Piece]:
        self._work()
        for i, word in enumerate(self.reply.split(" ")):
            time.sleep(self.token_s)
            yield Piece(("" if i == 0 else " ") + word)


class _PushedWords:
    """A fake engine's pushed reply: its words from a thread of its own, then the end."""

    def __init__(self, llm: FakeLLM, cancel):
        self._llm, self._cancel = llm, cancel
        self._closed = threading.Event()
        self._read: Iterator[Piece] | None = None

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:  # read, not pushed (a warm-up, a one-off)
        if self._read is None:
            self._read = self._llm._words()
        return next(self._read)

    def push(self, put, end) -> None:
        def run() -> None:
            try:
                for piece in self._llm._words():
                    if self._closed.is_set() or (self._cancel and self._cancel.is_set()):
                        break
                    put(piece)
            except Exception as e:  # noqa: BLE001 - the reply's end, as the engine's
                end(e)
                return
            end(None)
        threading.Thread(target=run, name="fake-engine", daemon=True).start()

    def close(self) -> None:
        self._closed.set()


class FakeTTS(TTS, _Knobs):
    """A 300 Hz tone, ``s_per_char`` seconds per character, at half scale."""

    model_name = "fake-tts"
    voice = "tone"
    sample_rate = 24000

    def __init__(self, s_per_char: float = 0.05, **knobs):
        _Knobs.__init__(self, **knobs)
        self.s_per_char = s_per_char
        self.texts: list[str] = []

    def _synthesize_impl(self, text: str) -> np.ndarray:
        self._work()
        self.texts.append(text)
        n = int(len(text) * self.s_per_char * self.sample_rate)
        return (0.5 * np.sin(2 * np.pi * 300 * np.arange(n) / self.sample_rate)).astype(
            np.float32)


class FakeEOT(EndOfTurn, _Knobs):
    """Scripted end-of-turn probabilities in order (the last one repeats)."""

    model_name = "fake-eot"

    def __init__(self, probabilities: list[float] | None = None, **knobs):
        _Knobs.__init__(self, **knobs)
        self.probabilities = list(probabilities or [0.9])

    def _probability(self, audio: np.ndarray) -> float:
        self._work()
        ps = self.probabilities
        return ps.pop(0) if len(ps) > 1 else ps[0]


def fake_stages(scheduler: Scheduler | None = None, **kw) -> Stages:
    """Stages built from fakes; pass ``asr=FakeASR(...)``, ``eot=FakeEOT(...)`` to script them.

    They share one scheduler, as a process's models do (``scheduler``, or a new one).
    """
    stages = Stages(vad=kw.get("vad") or FakeVAD(), asr=kw.get("asr") or FakeASR(),
                    llm=kw.get("llm") or FakeLLM(), tts=kw.get("tts") or FakeTTS(),
                    eot=kw.get("eot"))
    scheduler = scheduler or stages.llm.scheduler
    for model in (stages.asr, stages.llm, stages.tts, stages.eot):
        if model is not None:
            model.scheduler = scheduler
    return stages


def tone(seconds: float, level: float = 0.3, rate: int = 8000, hz: float = 220.0) -> np.ndarray:
    """int16 tone: what the fakes take for caller speech."""
    t = np.arange(int(seconds * rate)) / rate
    return (level * 32767 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def silence(seconds: float, rate: int = 8000) -> np.ndarray:
    return np.zeros(int(seconds * rate), np.int16)


class FourCalls:
    """Four simulated calls at once on fake stages (the actor tests).

    Real sessions, real scheduler, real lines paced in real time. The profile speculates at
    the caller's pause; the caller says two utterances with a pause between, the second after
    the first reply. ``reply``: the fake LLM's words; ``pushes``: pushed by its own thread.
    """

    def __init__(self, reply: str, pushes: bool = False):
        from agent.turn.load import LoadPolicy
        from agent.turn.runner import TurnRunner
        from dialplan import parse_config

        self.profile = parse_config({
            "profiles": {"p": {"greeting": "", "audio": {
                "endpoint_silence_s": 0.3, "speculate_s": 0.15, "min_speech_s": 0.1,
                "prefill_every_s": 0.5}}},
            "dialplan": {"1": "p"}}).profiles["p"]
        self.stages = fake_stages(asr=FakeASR(["what time do you open?"], delay_s=0.05),
                                  llm=FakeLLM(reply, token_s=0.02, pushes=pushes),
                                  tts=FakeTTS(s_per_char=0.02, delay_s=0.02),
                                  eot=FakeEOT([0.2]))
        self.caller = np.concatenate([tone(0.8), silence(0.9), tone(0.6), silence(1.0)]).astype(
            np.float32) / 32768
        # Before the calls, as serve does; the load policy is the process's, shared by its calls.
        self.phrase = TurnRunner(self.stages, self.profile).prepare_phrases()
        self.load = LoadPolicy(self.stages.llm.scheduler)

    def run(self) -> list:
        """The four calls' results, once each ended (or 60 s passed)."""
        from agent.simulate import simulate

        results = []

        def call():
            results.append(simulate(self.caller, 8000, self.profile, self.stages,
                                    greeting=False, phrase=self.phrase, load=self.load))

        calls = [threading.Thread(target=call, name=f"caller-{i}") for i in range(4)]
        for c in calls:
            c.start()
        for c in calls:
            c.join(60)
        return results


FakeCall = SimulatedLine
"""The session tests' phone line: the runtime's simulated line (real time, or fast)."""


class ListLog:
    """A call log that keeps records in a list (the session's ``CallLog``)."""

    def __init__(self):
        self.records: list = []

    def put(self, record) -> None:
        self.records.append(record)

    def of(self, cls) -> list:
        return [r for r in self.records if isinstance(r, cls)]
