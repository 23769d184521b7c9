"""Route a called extension to its merged :class:`~dialplan.profile.Profile`.

Pure data: no SIP, no models. ``resolve`` returning ``None`` means the extension is unknown
(the SIP layer answers 404).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dialplan.config import Config
from dialplan.options import KOKORO_VOICE, TTSOptions
from dialplan.profile import Profile


@dataclass(frozen=True)
class Dialplan:
    """Extension -> profile table built from a :class:`~dialplan.config.Config`."""

    routes: dict[str, Profile]
    under_load: dict[str, Profile] = field(default_factory=dict)
    """Profile name -> what its turns use while the agent is overloaded (:func:`under_load`),
    for every profile that names one (``simulate`` may run one no extension routes to)."""

    @classmethod
    def from_config(cls, config: Config) -> Dialplan:
        """Resolve every dialplan entry, and every under-load profile, to its profile once."""
        routes = {ext: config.profiles[name] for ext, name in config.dialplan.items()}
        under = {p.name: under_load(p, config.profiles[p.under_load])
                 for p in config.profiles.values() if p.under_load}
        return cls(routes, under)

    def fallback(self, profile: Profile) -> Profile | None:
        """The profile answering ``profile``'s turns under load, if it names one."""
        return self.under_load.get(profile.name)

    def resolve(self, extension: str) -> Profile | None:
        """Return the profile for ``extension``, or ``None`` if it is not routed."""
        return self.routes.get(extension.strip())

    def profiles(self) -> list[Profile]:
        """Distinct profiles reachable from the dialplan (to preload their models)."""
        seen: dict[str, Profile] = {}
        for p in self.routes.values():
            for q in filter(None, (p, self.fallback(p))):
                seen.setdefault(q.name, q)
        return list(seen.values())


def under_load(profile: Profile, cheap: Profile) -> Profile:
    """``profile`` with ``cheap``'s ASR and LLM: what answers its turns under load.

    Only the models that cost change. The caller keeps talking to the same agent: the prompts,
    phrases and voice are ``profile``'s (a voice that changed mid-call would be heard), except
    that ``cheap``'s hibari stands in for Kokoro's af_heart, the voice it was trained on, at a
    fraction of its CPU (bench tts). Named ``profile/cheap`` in the call log, so a cheap profile
    that also answers an extension of its own, with its own persona, is a different runner.
    """
    tts = cheap.tts if same_voice(profile.tts, cheap.tts) else profile.tts
    return replace(profile, name=f"{profile.name}/{cheap.name}", asr=cheap.asr, llm=cheap.llm,
                   tts=tts, under_load="")


def same_voice(voice: TTSOptions, cheap: TTSOptions) -> bool:
    """Whether ``cheap`` is heard as ``voice``: hibari, trained on Kokoro's af_heart, is."""
    return (cheap.backend == "hibari" and voice.backend == "kokoro-onnx"
            and voice.voice == KOKORO_VOICE)
