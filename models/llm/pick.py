"""Which of a model's files answers a turn sooner on this CPU: measured once, then kept.

The 1.5B Qwen ships as Q4_K_M, and ``models install`` re-quantizes it to IQ4_NL. Which one is
faster depends on the CPU's kernels in llama.cpp:
- With AVX2 only, the IQ4_NL file reads prompts faster, its decode steps alike (bench llm,
  issue 9).
- With AVX-512, the Q4_K_M file is faster at both (bench llm), and a call answers sooner with
  shorter silences inside its replies (bench call, 1 call).

So a pick name (:data:`PICKS`) stands for the file that reads a question's prompt and decodes a
first clause sooner here. The first candidate is the file as published; a re-quantized one is a
second rounding of the same weights, so it is taken only when it is clearly faster
(:data:`MARGIN`), never on a difference within the timing's noise: two files timed within a few
per cent of each other must not load one or the other by the minute's load. Each candidate is
timed in turn, three times; the medians decide. The choice is kept in the model cache per CPU
and llama.cpp version. ``models install`` makes it, else the first load does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROMPT_TOKENS = 24
"""About a question and its chat template after a cached persona."""
STEPS = 8
"""About a first clause."""
ROUNDS = 3
MARGIN = 0.10
"""How much sooner than the first candidate another must be to be chosen (a fraction)."""


@dataclass(frozen=True)
class Pick:
    """A name standing for the fastest here of several bundled files of one model."""

    name: str
    candidates: tuple[str, ...]
    """Bundled model names; the first is preferred unless another is :data:`MARGIN` faster."""
    description: str = ""


def cpu_key() -> str:
    """What the timing depends on: the CPU's model and flags, and llama.cpp's version."""
    try:
        import llama_cpp
        version = llama_cpp.__version__
    except ImportError:
        version = "-"
    info = ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        info = "\n".join(sorted({ln for ln in lines if ln.startswith(("model name", "flags"))}))
    except OSError:
        import platform
        info = platform.processor()
    return f"{hashlib.sha256(info.encode()).hexdigest()[:16]}-llama-cpp-{version}"


def turn_ms(path: Path, threads: int = 2) -> float:
    """One question's prompt and a first clause's decode steps on ``path``, in ms."""
    import llama_cpp as lc
    from llama_cpp._logger import set_verbose

    set_verbose(False)
    llm = lc.Llama(str(path), n_ctx=256, n_threads=threads, n_threads_batch=threads,
                   verbose=False)
    try:
        tokens = llm.tokenize(b"Hello, what time do you open on Saturday morning? I would "
                              b"like to ask about a booking for next week, please.")
        tokens = (tokens * 2)[:PROMPT_TOKENS]
        llm.eval(tokens[:4])  # warm: the first evaluation maps and repacks the weights
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        for t in tokens[:STEPS]:
            llm.eval([t])
        return (time.perf_counter() - start) * 1000
    finally:
        llm.close()


def choose(pick: Pick, path_of: Callable[[str], Path], store: Path,
           measure: Callable[[Path], float] = turn_ms, key: Callable[[], str] = cpu_key) -> str:
    """The candidate of ``pick`` to load here: kept in ``store``, or measured now and kept.

    Args:
        pick: the name and its candidates.
        path_of: a candidate's file, asked only when the candidates are timed (a kept
            choice needs no other file, nor one made for it).
        store: a JSON file of earlier choices (one per pick name).
        measure: a file's time for one turn, in ms (:func:`turn_ms`).
        key: what the kept choice must have been made on (:func:`cpu_key`).
    """
    here = key()
    try:
        kept = json.loads(store.read_text())
    except (OSError, ValueError):
        kept = {}
    earlier = kept.get(pick.name, {})
    if earlier.get("cpu") == here and earlier.get("choice") in pick.candidates:
        logging.getLogger("callagent").info("event=model-pick name=%s choice=%s kept=%s",
                                            pick.name, earlier["choice"], store)
        return earlier["choice"]
    paths = {c: path_of(c) for c in pick.candidates}
    times: dict[str, list[float]] = {c: [] for c in pick.candidates}
    for _ in range(ROUNDS):
        for c in pick.candidates:  # in turn: a slow minute costs every candidate alike
            times[c].append(measure(paths[c]))
    medians = {c: statistics.median(ts) for c, ts in times.items()}
    fastest = min(pick.candidates, key=lambda c: (medians[c], pick.candidates.index(c)))
    first = pick.candidates[0]
    choice = fastest if medians[fastest] < medians[first] * (1 - MARGIN) else first
    kept[pick.name] = {"cpu": here, "choice": choice,
                       "turn_ms": {c: round(m, 1) for c, m in medians.items()}}
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.with_suffix(f".{os.getpid()}.tmp")  # two first loads at once: a file each
    tmp.write_text(json.dumps(kept, indent=1, sort_keys=True))
    tmp.replace(store)
    logging.getLogger("callagent").info(
        "event=model-pick name=%s choice=%s %s", pick.name, choice,
        " ".join(f"{c}_ms={m:.0f}" for c, m in medians.items()))
    return choice
