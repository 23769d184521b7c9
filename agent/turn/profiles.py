"""A process's profiles made ready for calls: models loaded, phrases synthesised, all warm.

``serve`` and ``simulate`` (and ``bench pipeline``) prepare a call the same way, here: a
profile's models and its under-load profile's are loaded and warmed (the LLM's prompt primed
in every context it has), its fixed phrases are synthesised once, and a call is handed the
same stages, phrase cache and under-load runner either way. A caller who speaks as the call
is answered then meets the same agent in a simulation as on a served call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from agent import log
from agent.turn.runner import StageCache, Stages, TurnRunner
from dialplan import Dialplan
from dialplan.profile import Profile


class ReadyProfiles:
    """Every profile a process answers with, each prepared once and shared by its calls.

    Args:
        dialplan: the profiles and what answers each under load.
        cache: loads each distinct model once.
        out_rate: the lines' sample rate (the phrases are kept at it).
    """

    def __init__(self, dialplan: Dialplan, cache: StageCache, out_rate: int = 8000):
        self.dialplan = dialplan
        self.cache = cache
        self.out_rate = out_rate
        self._runners: dict[str, TurnRunner] = {}
        self._warm: set[str] = set()
        self._warm_models: set[int] = set()
        """The models (by id) whose first pass is paid: a later profile sharing one primes only
        its prompt on it."""

    def runner(self, profile: Profile) -> TurnRunner:
        """The profile's shared runner (models and phrase cache), created on first use."""
        runner = self._runners.get(profile.name)
        if runner is None:
            runner = self._runners[profile.name] = TurnRunner(
                self.cache.stages(profile), profile, out_rate=self.out_rate)
        return runner

    def prepare(self, profile: Profile) -> None:
        """Load, warm and synthesise the phrases of ``profile`` and of its under-load one."""
        for p in filter(None, (profile, self.dialplan.fallback(profile))):
            if p.name in self._warm:
                continue
            t0 = time.monotonic()
            runner = self.runner(p)
            runner.prepare_phrases()
            runner.warm_up(self._warm_models)
            self._warm.add(p.name)
            log.event("profile-loaded", profile=p.name, asr=p.asr.model, llm=p.llm.model,
                      tts=p.tts.voice, load_s=round(time.monotonic() - t0, 2))

    def for_call(self, profile: Profile) -> tuple[Stages, Callable[[str], np.ndarray],
                                                   tuple[Profile, Stages] | None]:
        """What a call of ``profile`` is handed: its stages, phrases and under-load models.

        A profile not prepared yet (a test's) loads now, once, without the warm-up.
        """
        runner = self.runner(profile)
        cheap = self.dialplan.fallback(profile)
        return (runner.stages, runner.speak,
                None if cheap is None else (cheap, self.runner(cheap).stages))
