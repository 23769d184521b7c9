"""What the CLI sets up for the process before any model loads: the one place that does it.

``models/`` reads no environment variable and changes no process setting when imported
(issue 44); the CLI does it here, from the environment and the config, and passes the results
down:

* OpenMP's spin (``GOMP_SPINCOUNT``) and, for the xllamacpp engine, ``OMP_WAIT_POLICY``: set
  before a backend loads the OpenMP runtime, which reads them once;
* ``HF_HUB_OFFLINE=1`` unless set: weights come from installed packages, never the hub;
* the models directory, ``$CALLAGENT_MODELS`` (:data:`models.catalog.CACHE_DIR`);
* the process's :class:`~models.scheduler.Scheduler`, made from ``[scheduler]``, which the
  command hands to its :class:`~models.registry.ModelCache` (every model's jobs run on it).

A user's own values of these variables win.
"""

from __future__ import annotations

import logging
import os

from agent import log
from dialplan import Config
from models import catalog
from models.priority import Priority
from models.scheduler import JobTrace, Scheduler


def prepare() -> None:
    """Set what must be set before any command module imports a backend."""
    # llama.cpp and CTranslate2 run on OpenMP. Long busy-waits steal the 2 cores from whichever
    # stage overlaps them (ASR, LLM and TTS overlap in a turn): OMP_WAIT_POLICY=ACTIVE made
    # voice-to-voice far slower than PASSIVE (bench pipeline). But never spinning slows decoding
    # alone, and a short spin keeps nearly all of ACTIVE's decoding speed (bench llm).
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "20000")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    catalog.use_cache_dir(os.environ.get("CALLAGENT_MODELS"))


def for_config(config: Config) -> None:
    """Set what depends on the loaded config, before its models load."""
    if any(p.llm.backend == "xllamacpp" for p in config.profiles.values()):
        # The engine's OpenMP threads otherwise spin between its steps, and on 2 cores that
        # spinning took the CPU from ASR and TTS: a first token came many times later (bench
        # pipeline).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def scheduler(config: Config) -> Scheduler:
    """The process's scheduler, as ``[scheduler]`` says; at DEBUG every job is logged."""
    sched = Scheduler(pairs=config.scheduler.pairs)
    if log.logger.isEnabledFor(logging.DEBUG):
        sched.observe(_trace_job)
    return sched


def _trace_job(job: JobTrace) -> None:
    # The thread names the call (turn-<call id>-<turn>, prefill-<call id>); llm-batch's steps
    # serve every call at once.
    log.event("job", level=logging.DEBUG, stage=job.stage,
              priority=Priority(job.level).name.lower(), waited_ms=log.ms(job.waited_s),
              ran_ms=log.ms(job.ran_s), thread=job.thread, note=job.note)
