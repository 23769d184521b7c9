"""Route a called extension to its merged :class:`~dialplan.options.Profile`.

Pure data: no SIP, no models. ``resolve`` returning ``None`` means the extension is unknown
(the SIP layer answers 404).
"""

from __future__ import annotations

from dataclasses import dataclass

from dialplan.config import Config
from dialplan.options import Profile


@dataclass(frozen=True)
class Dialplan:
    """Extension -> profile table built from a :class:`~dialplan.config.Config`."""

    routes: dict[str, Profile]

    @classmethod
    def from_config(cls, config: Config) -> Dialplan:
        """Resolve every dialplan entry to its profile object once."""
        return cls({ext: config.profiles[name] for ext, name in config.dialplan.items()})

    def resolve(self, extension: str) -> Profile | None:
        """Return the profile for ``extension``, or ``None`` if it is not routed."""
        return self.routes.get(extension.strip())

    def profiles(self) -> list[Profile]:
        """Distinct profiles reachable from the dialplan (to preload their models)."""
        seen: dict[str, Profile] = {}
        for p in self.routes.values():
            seen.setdefault(p.name, p)
        return list(seen.values())
