"""Kokoro v1.0's voice packs, from the npm package ``kokoro-js`` (no PyPI package carries them).

The tarball holds ``package/voices/NAME.bin`` for all 54 voices: raw float32 that reshapes to
(510, 1, 256), one style row per phoneme count: the array kokoro-onnx reads per name from a
voices ``.npz``. :func:`install` fetches the pinned tarball once from the npm registry (or takes
a copy the user fetched, ``npm pack kokoro-js@1.2.1``), checks its sha256 and writes that
``.npz`` into the model cache; loading then only opens the file (:func:`voices_file`).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np

from models import catalog
from models.errors import ModelMissingError

PACKAGE = "kokoro-js"
VERSION = "1.2.1"
SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
SIZE = 26_887_218
REGISTRY = "https://registry.npmjs.org"
OUTPUT = "voices-v1.0.npz"
STYLE_SHAPE = (510, 1, 256)

ENGLISH = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole",
    "af_nova", "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir",
    "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa", "bf_alice", "bf_emma",
    "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george", "bm_lewis",
)
"""The 28 native English voices (a = American, b = British; f/m)."""
ACCENTED = ("ef_dora", "em_alex", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi",
            "if_sara", "im_nicola", "pf_dora", "pm_alex")
"""Spanish, French, Hindi, Italian and Portuguese speakers: accented English callers."""


def url(registry: str = REGISTRY) -> str:
    return f"{registry.rstrip('/')}/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"


def voices_file() -> Path:
    """The installed voices ``.npz``.

    Raises:
        ModelMissingError: not installed yet, with the command that installs it.
    """
    path = catalog.cache_dir() / "kokoro-voices" / OUTPUT
    if not path.exists():
        raise ModelMissingError(
            f"Kokoro's English voices are not installed: run `callagent models install` "
            f"(it fetches the npm package {PACKAGE}@{VERSION} from {REGISTRY})")
    return path


def installed() -> bool:
    return (catalog.cache_dir() / "kokoro-voices" / OUTPUT).exists()


def english_lang(voice: str) -> str:
    """The espeak/misaki language of a Kokoro voice name: ``b*`` voices are British."""
    return "en-gb" if voice.startswith("b") else "en-us"


def install(source: Path | None = None, registry: str = REGISTRY,
            progress: Callable[[int], None] | None = None) -> Path:
    """Fetch (or read ``source``), verify and unpack the voices into the cache; idempotent.

    Raises:
        ModelMissingError: the registry cannot be reached or the tarball's sha256 differs,
            naming the package and how to bring it by hand.
    """
    out = catalog.cache_dir() / "kokoro-voices" / OUTPUT
    if out.exists():
        return out
    data = source.read_bytes() if source is not None else _download(url(registry), progress)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise ModelMissingError(
            f"{PACKAGE}-{VERSION}.tgz has sha256 {digest[:16]}…, expected {SHA256[:16]}…; "
            f"fetch it again (npm pack {PACKAGE}@{VERSION})")
    voices = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            if name.parent.as_posix() != "package/voices" or name.suffix != ".bin":
                continue
            raw = tar.extractfile(member).read()
            voices[name.stem] = np.frombuffer(raw, np.float32).reshape(STYLE_SHAPE)
    missing = sorted(set(ENGLISH) - set(voices))
    if missing:
        raise ModelMissingError(f"{PACKAGE}-{VERSION}.tgz lacks the voices {', '.join(missing)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.npz")
    np.savez(tmp, **voices)
    tmp.replace(out)
    return out


def _download(address: str, progress: Callable[[int], None] | None) -> bytes:
    try:
        with urllib.request.urlopen(address, timeout=60) as r:
            buf = bytearray()
            while block := r.read(1 << 20):
                buf += block
                if progress:
                    progress(len(block))
            return bytes(buf)
    except OSError as e:
        raise ModelMissingError(
            f"could not fetch Kokoro's voices, npm package {PACKAGE}@{VERSION}, from {address} "
            f"({e}); on a machine that reaches the npm registry run `npm pack "
            f"{PACKAGE}@{VERSION}` and then `callagent models install kokoro-voices --from "
            f"{PACKAGE}-{VERSION}.tgz`") from e
