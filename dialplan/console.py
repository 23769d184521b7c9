"""Options of the web console (``[console]``): where it listens, and the token it asks for.

Pure data, like :mod:`dialplan.webhooks`: parsed once from ``config.toml``. The console itself
is :mod:`agent.console`, run by ``serve`` and ``cluster`` in the process that supervises the
agent. Its bearer token never goes in the config: ``token`` names where it is
(:mod:`dialplan.secrets`), read when the console starts. A console on any address but loopback
must have one: the pages show what callers said and play their recordings.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from dialplan.secrets import REF_FORM, is_secret_ref


@dataclass(frozen=True)
class ConsoleOptions:
    """The web console (``[console]``)."""

    enabled: bool = False
    """Serve the console from ``serve`` and ``cluster`` (off when the section is absent, so
    several agents on one machine never fight over the port; the shipped config turns it on)."""
    host: str = "127.0.0.1"
    """The address it listens on; any but a loopback address needs ``token``."""
    port: int = 8080
    """Its TCP port."""
    token: str = ""
    """Where the bearer token is: ``"env:VARIABLE"`` or ``"file:/path"`` (its first line), read
    once at start, never logged. Empty: no token asked (loopback only). A browser signs in once
    at ``/login``; an API client sends ``Authorization: Bearer <token>``."""

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port = {self.port}: not a port (1-65535)")
        if self.token and not is_secret_ref(self.token):
            # The value is not repeated: it may be the token itself, put there by mistake.
            raise ValueError(f"token: expected {REF_FORM} (the token itself never goes in "
                             "the config)")
        if self.enabled and not self.token and not is_loopback(self.host):
            raise ValueError(f"token: required when the console listens on {self.host!r}, not "
                             f"a loopback address (set token = {REF_FORM})")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False
