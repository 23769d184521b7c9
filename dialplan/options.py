"""Typed options for every stage, the call's limits and the call log, as frozen dataclasses.

These are pure data: parsed once from ``config.toml`` (see :mod:`dialplan.config`) and handed to
the backends in :mod:`models`. Nothing here imports model code. Each field's docstring is the
config reference. The persona that holds them is :mod:`dialplan.profile`'s; the SIP endpoint's
own options are in :mod:`dialplan.sip`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SPEECH_TAIL_S = 0.09
"""Audio a turn keeps after its last speech chunk (:mod:`models.vad.segmenter`): word tails
fall under the VAD's threshold. Short enough for the speculation to start at 96 ms of silence
with the same audio the endpoint will have (``speculate_s`` is at least this). A longer tail
buys Whisper no accuracy on VAD-cut line questions: the difference is within the noise
(bench wer)."""


BACKCHANNELS = ("uh", "um", "umm", "er", "erm", "ah", "ahh", "oh", "eh", "huh", "hm", "hmm", "mm",
                "mhm", "mm-hmm", "mm-mm", "uh-huh", "uh-uh", "uhum", "aha", "yeah", "yep", "yup",
                "yes", "okay", "ok", "right", "alright", "sure", "i see")
"""English sounds and words a listener makes while the other speaks, not to take the floor
(the ASR's spellings of them: "Uh-huh.", "Mm-hmm", "Hmm..."): a barge-in that says only these
resumes the reply (``audio.barge_in_fillers``; a profile in another language sets its own)."""


@dataclass(frozen=True)
class AudioOptions:
    """Voice activity detection and turn-taking (``[audio]``)."""

    vad_threshold: float = 0.5
    """Silero speech probability at which speech starts."""
    vad_release: float = 0.35
    """Probability under which a frame counts as silence again (hysteresis below the threshold)."""
    min_speech_s: float = 0.2
    """Speech shorter than this is ignored (clicks, coughs, the agent's own echo)."""
    endpoint_silence_s: float = 0.5
    """Hangover: silence after speech that ends a turn."""
    speculate_s: float = 0.09
    """After this much silence the turn starts speculatively (end-of-turn model, ASR, LLM,
    TTS); its audio is held until the endpoint and dropped if the caller resumes. 0 = off.
    Must be < the hangover and at least the segmenter's 90 ms audio tail (so the speculated
    audio equals the final utterance); the VAD counts 32 ms chunks, so 0.09 fires at 96 ms.
    Against 0.15 it brings the endpoint sooner with no false end of turn on the paused
    questions (bench pipeline, 1 call); a pause that short inside a question is more often not
    the end, so more speculations are dropped."""
    prefill_every_s: float = 1.2
    """While the caller speaks, every this many seconds of their speech the words so far are
    transcribed and evaluated into the LLM's cache (both as background work: only when no
    caller is waiting on the CPU), so their turn's prompt is mostly read before they stop.
    0 = off. Backends without a per-call cache (llama-cpp, xllamacpp, openai) skip it."""
    pause_tolerance_s: float = 1.2
    """Longer hangover used when the last words sound unfinished ("uh", "and", "to" ...).
    A shorter one ran out before a caller who went on after a pause was confirmed (the pause,
    then ``min_speech_s`` and the VAD's and resampler's lag on a SIP line), and the reply began
    over the rest of their turn."""
    max_endpoint_wait_s: float = 1.5
    """Never wait longer than this after speech ends, whatever the words."""
    max_utterance_s: float = 20.0
    """An utterance this long is cut and transcribed even if the caller keeps talking."""
    barge_in_min_s: float = 0.3
    """While the agent speaks, caller speech must last this long to interrupt it."""
    barge_in_echo_ratio: float = 0.5
    """While the agent speaks, caller RMS must exceed this fraction of the agent's outbound RMS."""
    barge_in_resume: bool = True
    """A barge-in stops the reply at once but keeps it until the caller's sound is transcribed:
    no words (a cough, a noise, nothing the ASR is sure of) or only ``barge_in_fillers``
    ("uh-huh") and the reply goes on from the start of the sentence it cut, said again; words
    and it is dropped, the caller's turn answered. False: every barge-in drops the reply."""
    barge_in_fillers: tuple[str, ...] = BACKCHANNELS
    """Words (or phrases) that do not take the floor from the agent: see ``barge_in_resume``."""
    end_of_turn: str = "smart-turn-v3.2"
    """End-of-turn model scored at ``speculate_s`` of silence (bundled name or an ONNX path;
    "off" = VAD hangover only). When it says the caller has finished, the turn ends there
    instead of after ``endpoint_silence_s``. Not consulted for a turn that starts while other
    calls' turns still wait for their first audio (it waits behind them anyway)."""
    end_of_turn_threshold: float = 0.5
    """Probability at or above which the end-of-turn model ends the turn early."""
    end_of_turn_words: bool = True
    """Also end the turn at the pause when the quick transcript of the speculative turn is a
    finished sentence (ends in "?", "!" or ".", and not on a word a sentence rarely ends on),
    even though the end-of-turn model said "not finished"."""

    def __post_init__(self) -> None:
        if self.prefill_every_s < 0:
            raise ValueError(f"prefill_every_s = {self.prefill_every_s}: must be 0 (off) or more")
        if self.speculate_s and not SPEECH_TAIL_S <= self.speculate_s < self.endpoint_silence_s:
            raise ValueError(
                f"speculate_s = {self.speculate_s}: must be 0 (off) or at least "
                f"{SPEECH_TAIL_S} (the audio tail a turn keeps after its speech) and under "
                f"endpoint_silence_s ({self.endpoint_silence_s})")


@dataclass(frozen=True)
class VoxtralOptions:
    """Voxtral-specific switches (``[asr.voxtral]``); each is verified not to change tokens."""

    attention: Literal["auto", "eager", "sdpa", "flash_attention_2"] = "auto"
    """Attention kernel; auto = flash-attention-2 on CUDA when installed, else SDPA (on CPU
    faster than eager, with the same tokens: bench asr)."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Weights dtype; auto = bfloat16 on CUDA, float32 on CPU."""
    compile: Literal["auto", "on", "off"] = "auto"
    """torch.compile the decoding step (reduce-overhead on CUDA); auto = on for CUDA, off on CPU
    (inductor's warm-up is long on a CPU, and decoding was no faster there: bench asr). A
    failing compile falls back to eager decoding, logged once."""
    static_cache: Literal["auto", "on", "off"] = "auto"
    """Static KV cache (needed by compiled decoding); auto follows ``compile``."""
    batch_window_s: float = 0.03
    """Utterances from concurrent calls arriving within this window share one generate();
    0 = no cross-call batching (each call decodes alone, no added wait)."""
    max_batch: int = 4
    """Largest batch of utterances in one generate()."""
    tokens_per_second: float = 6.0
    """Max new tokens = audio seconds x this + 8 (speech rarely exceeds 4 words/s)."""
    warmup: bool = True
    """Run one dummy transcription at load so the first call is not slow."""


@dataclass(frozen=True)
class ASROptions:
    """Speech recognition (``[asr]``)."""

    backend: Literal["faster-whisper", "voxtral"] = "faster-whisper"
    """Which ASR backend transcribes utterances."""
    model: str = "base"
    """Bundled name (base, tiny.en), a local model directory, or a hub id when online.

    base is the default by ``bench wer`` through the 8 kHz μ-law line: it makes fewer word
    errors than tiny.en, by more than the paired confidence interval; tiny.en is faster
    (bench asr)."""
    language: str = "en"
    """Spoken language (ISO code)."""
    beam_size: int = 1
    """Beam width; 1 = greedy (beam 5 gained no WER on phone audio and was slower: bench wer)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the model runs; auto = CUDA when present."""
    compute_type: str = "int8"
    """CTranslate2 compute type for faster-whisper."""
    threads: int = 2
    """CPU threads for inference."""
    initial_prompt: str = ""
    """Text that primes the decoder (vocabulary, domain)."""
    min_avg_logprob: float = -1.0
    """A transcript whose mean token log-probability is below this is a guess: the agent asks
    the caller to repeat (``repeat``) instead of answering it. On the line with base, spoken
    questions score above it and reversed speech below. -inf = always answer."""
    window_margin_s: float = 5.0
    """faster-whisper encodes the utterance plus this much padding instead of Whisper's fixed
    30 s window (CTranslate2 takes a shorter encoder input; negative = the full 30 s). A 5 s
    margin loses no words against the full window for a fraction of its time (bench wer);
    smaller margins lose words."""
    hotwords: tuple[str, ...] = ()
    """Names and words callers will say that the model may not know (a street, a product, the
    business's name); faster-whisper's ``hotwords`` bias the decoder towards them."""
    denoise: Literal["off", "rnnoise"] = "off"
    """``rnnoise``: RNNoise takes background noise out of each utterance before the ASR
    (bundled). Off by default: on the phone line it cost Whisper more words than it saved
    (bench wer --profile)."""
    max_batch: int = 4
    """faster-whisper: utterances of different calls that wait for the CPU at the same time
    are transcribed in one batch of up to this many (1 = one at a time). Nothing waits for
    company (:mod:`models.coalesce`)."""
    voxtral: VoxtralOptions = field(default_factory=VoxtralOptions)
    """Voxtral-only switches."""


@dataclass(frozen=True)
class LLMOptions:
    """Language model (``[llm]``), run by llama.cpp here or by an OpenAI-compatible server."""

    backend: Literal["llama-cpp", "llama-batch", "xllamacpp", "openai"] = "llama-batch"
    """llama-cpp runs the GGUF in this process, one context per call, decoding one call's
    token per step; llama-batch runs it in this process with one context and a KV sequence per
    call, every call's reply decoded in one batch per step, each step a job of the process
    scheduler; xllamacpp runs it in llama.cpp's server engine, in this process, batched the
    same way but outside the scheduler; openai streams from an OpenAI-compatible server
    at ``base_url`` (llama.cpp's server, vLLM, a GPU box shared by
    many agents)."""
    model: str = "qwen2.5-1.5b-instruct-fastest"
    """Bundled name (qwen2.5-1.5b-instruct-fastest, qwen2.5-1.5b-instruct-iq4_nl,
    qwen2.5-1.5b-instruct, smollm2-135m) or a path to a .gguf file; with backend openai, the
    model name sent to the server. The default is whichever of the bundled Q4_K_M Qwen and its
    re-quantization to IQ4_NL (``models/llm/quantize.py``, close to the original by KL
    divergence: bench llm) answers a turn sooner on this CPU, timed once
    (``models/llm/pick.py``): llama.cpp's matrix kernels favour IQ4_NL's prompts on AVX2 and
    the original's decode steps with AVX-512 (bench llm)."""
    n_ctx: int = 2048
    """Context window in tokens; old turns are dropped to fit."""
    threads: int = 2
    """CPU threads for generation."""
    max_tokens: int = 80
    """Upper bound on reply length in tokens."""
    temperature: float = 0.3
    """Sampling temperature (0 = greedy)."""
    seed: int = 0
    """Sampling seed, so replies are reproducible."""
    strict_numbers: bool = True
    """With a knowledge file: a number is not said, even one a fact holds, of something the
    caller named and no fact mentions (a fact's opening time said of a shop next door). The
    models lend the facts' numbers to what they do not know (bench answers); false lets a
    model that echoes the caller's own words for a fact's ("on weekdays") say them."""
    contexts: int = 4
    """KV caches over the one loaded model, one per concurrent call (the pjsua2 cap is 4): a
    call's next turn finds its history still cached instead of re-reading it after another
    call's turn. llama-batch: sequences of one context, decoded together; llama-cpp: contexts,
    decoded one step of one call at a time; xllamacpp: the engine's slots."""
    base_url: str = ""
    """Backend openai: the server's API root, e.g. http://127.0.0.1:8080/v1 (required)."""
    api_key: str = field(default="", repr=False)
    """Backend openai: bearer token; empty = the CALLAGENT_LLM_API_KEY or OPENAI_API_KEY
    environment variable, or none (a local server)."""
    timeout_s: float = 10.0
    """Backend openai: seconds to connect, then to wait for the first token and each next one;
    a slower server fails the turn, logged with the error."""


TTS_DEFAULTS = {"piper": "en_US-joe-medium", "kokoro": "kokoro-82m-int8", "hibari": "hibari"}
"""Each TTS backend's bundled model (kokoro-torch has none bundled: it needs a path)."""
KOKORO_VOICE = "af_heart"
"""Kokoro's default voice: a native US English speaker, the one hibari imitates."""
HIBARI_VOICE = "heart"
_BUNDLED_VOICES = (KOKORO_VOICE, HIBARI_VOICE, "en_US-joe-medium", "jf_gongitsune")
"""Voices that stand for "this backend's own" when a profile switches the backend."""


@dataclass(frozen=True)
class TTSOptions:
    """Speech synthesis (``[tts]``)."""

    backend: Literal["kokoro-onnx", "kokoro-torch", "piper", "hibari"] = "kokoro-onnx"
    """kokoro-onnx (the default) runs the bundled Kokoro-82M int8 model with Kokoro's own
    voices (28 native English ones, from the npm package kokoro-js); hibari runs the small
    model trained on Kokoro's af_heart (a fraction of Kokoro's CPU: bench tts); piper runs a
    Piper voice (bundled: en_US-joe-medium); kokoro-torch needs user-supplied weights.
    ``voices``, ``g2p`` and ``lang`` are Kokoro's only."""
    model: str = ""
    """Bundled name, or a path to an .onnx (kokoro-onnx) / .pth (kokoro-torch) file; for piper
    a bundled voice or a voice .onnx with its .onnx.json beside it. Empty = the backend's
    bundled one (kokoro-82m-int8, hibari, en_US-joe-medium); another backend's bundled default
    counts as empty, so a profile that only switches ``backend`` gets that backend's own voice."""
    voices: str = ""
    """Path to a voices .npz (kokoro-onnx) or a voices folder (kokoro-torch); empty = Kokoro's
    voices from kokoro-js (``callagent models install`` fetches them)."""
    voice: str = ""
    """Voice name: for Kokoro a voice of the voices file (empty = af_heart; e.g. af_bella,
    am_michael, bf_emma, bm_george: ``callagent models list`` names all 28 English ones); for
    hibari ``heart``; for piper the voice's name or a speaker of a multi-speaker voice (empty =
    the model's name)."""
    speed: float = 1.0
    """Speaking rate multiplier."""
    lang: str = ""
    """Kokoro's G2P language, en-us or en-gb; empty = en-gb for the British voices (b*),
    en-us otherwise."""
    g2p: Literal["misaki", "espeak"] = "misaki"
    """Kokoro's grapheme-to-phoneme step: misaki, the one Kokoro was trained with (hibari-tts
    carries it), or espeak-ng (kokoro-onnx's own, needed for lang other than English)."""
    lead: Literal["", "hibari"] = ""
    """A voice that speaks each reply's first clause, so the caller hears it sooner: hibari,
    trained on af_heart, speaks a clause in a fraction of Kokoro's time (bench tts). Only for
    Kokoro's af_heart (ignored by the other backends); empty = every clause in ``voice``."""
    threads: int = 2
    """onnxruntime intra-op threads."""
    first_chunk_words: int = 4
    """Speak the first clause as soon as it has this many words (shorter first audio)."""
    first_chunk_opener: Literal[True, False, "alone"] = "alone"
    """A reply's opening word before a comma ("Yes," "Sorry,") is spoken on its own, first:
    true always, "alone" only while no other call is up (its rest then decodes alone, faster
    than it is spoken).
    With other callers up, true brings first audio sooner, but the rest of the reply then
    waits for decode steps shared with them: far more dead air inside replies, long holes after
    the "Yes," (bench call, 4 at once). Alone, such replies start sooner with only short holes
    after the opener (bench call, 1 call)."""

    def __post_init__(self) -> None:
        # Resolved here, so the call log names the model and voice actually speaking. A top-level
        # [tts] may name one backend's bundled voice and a profile switch the backend: that
        # other backend's default then means "this backend's own".
        kind = {"piper": "piper", "hibari": "hibari"}.get(self.backend, "kokoro")
        model = self.model if self.model not in TTS_DEFAULTS.values() else ""
        model = model or TTS_DEFAULTS[kind]
        voice = self.voice if self.voice not in _BUNDLED_VOICES else ""
        if not voice:
            voice = {"piper": model.rsplit("/", 1)[-1].removesuffix(".onnx"),
                     "hibari": HIBARI_VOICE}.get(kind, KOKORO_VOICE)
        if self.voice == "jf_gongitsune" and kind == "kokoro":
            voice = self.voice  # an explicit choice of the old default stays
        lang = self.lang or ("en-gb" if kind == "kokoro" and voice.startswith("b") else "en-us")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "voice", voice)
        object.__setattr__(self, "lang", lang)
        if self.lead and kind != "kokoro":
            object.__setattr__(self, "lead", "")  # a [tts] lead, inherited by another backend
        elif self.lead and voice != KOKORO_VOICE:
            raise ValueError(f"lead = {self.lead!r}: only for Kokoro's {KOKORO_VOICE} (hibari "
                             f"imitates that voice), not {voice}")


@dataclass(frozen=True)
class LimitOptions:
    """Per-call limits (``[limits]``)."""

    max_call_s: float = 600.0
    """The agent says goodbye and hangs up after this long."""
    max_silence_s: float = 30.0
    """Caller silence after which the agent says goodbye and hangs up (counted from the caller's
    last words or the end of the agent's last reply; not while on hold)."""
    idle_prompt_s: float = 0.0
    """Caller silence after which the agent says the profile's ``still_there`` once ("Are you
    still there?"), counted as ``max_silence_s`` is; the prompt does not restart that count.
    0, or not less than ``max_silence_s``, = never."""
    hold_s: float = 60.0
    """A caller who asks the agent to wait ("hold on", "give me a minute") hears ``hold_ack``
    at once, without the LLM, then up to this long of quiet: no ``still_there``, no silence
    goodbye. Speaking again ends the wait; at its end the agent says ``still_there`` at once.
    0 = such words go to the LLM like any others."""
    filler_after_s: float = 0.0
    """Play ``filler`` when a turn's answer has not started this long after the caller
    finished (0 = never). Voice-to-voice stays measured to the real answer."""
    rtp_timeout_s: float = 10.0
    """No inbound RTP packet for this long (comfort noise and silent packets count) means the
    line is dead without a BYE: the agent hangs up at once, says no goodbye, and records end
    reason ``rtp-timeout``. Suspended while the caller holds the call (a=sendonly or
    a=inactive). 0 = never."""
    under_load_after_s: float = 1.0
    """With an ``under_load`` profile: a turn starting while first-audio work has waited this
    long for the CPU (p90 over the last 30 s, the scheduler's measure) uses that profile's
    models instead."""
    under_load_ahead: int = 1
    """With an ``under_load`` profile: a turn that starts while this many turns of other calls
    are still waiting for their first reply audio uses that profile's models (it would wait
    for all of theirs first). 0 = only the measured wait decides."""

    def __post_init__(self) -> None:
        for name in ("idle_prompt_s", "hold_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} = {getattr(self, name)}: must be 0 (never) or more")


@dataclass(frozen=True)
class DBOptions:
    """Call log (``[db]``)."""

    url: str = "sqlite:///callagent.db"
    """Any SQLAlchemy URL; CALLAGENT_DB_URL and --db override it."""
    spool_dir: str = "spool"
    """Where records wait while the database is unreachable."""
    queue_size: int = 1000
    """Bound of the background writer's queue."""
    media_dir: str = "recordings"
    """Where call recordings and callers' messages (WAV) are written."""
