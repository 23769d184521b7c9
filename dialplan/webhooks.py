"""Options of the webhooks (``[[webhooks]]``): where the call log's events are POSTed, and how.

Pure data, like :mod:`dialplan.options`: parsed once from ``config.toml``. The call-log writer
(:mod:`db.outbox`) queues an event for each entry whose ``events`` name it, and the delivery
worker (:mod:`agent.webhooks`) sends it, signed with the entry's secret, retrying on the
entry's schedule. The secret itself never goes in the config: ``secret`` names where it is
(:mod:`dialplan.secrets`), read when the delivery worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dialplan.secrets import REF_FORM, is_secret_ref

EventType = Literal["call.started", "call.ended", "turn", "tool", "message", "transfer"]
EVENT_TYPES: tuple[EventType, ...] = ("call.started", "call.ended", "turn", "tool", "message",
                                      "transfer")
"""Every event a webhook can get; ``transfer`` is the ``transfer`` tool's outcome, ``tool``
every other action (an HTTP tool, a hang-up, a keypad mapping...)."""


@dataclass(frozen=True)
class WebhookOptions:
    """One receiver of the call log's events (a ``[[webhooks]]`` entry)."""

    url: str = ""
    """Where each event is POSTed as JSON (``http://`` or ``https://``); one entry per URL."""
    secret: str = ""
    """Where the signing key is: ``"env:VARIABLE"`` or ``"file:/path"`` (its first line), read
    once at start, never logged. Each POST carries ``X-Callagent-Signature: sha256=<hex>``, the
    HMAC-SHA256 of ``"<X-Callagent-Timestamp>.<body>"`` with it (:mod:`agent.webhooks`)."""
    events: tuple[EventType, ...] = EVENT_TYPES
    """The events this receiver gets (default: all)."""
    timeout_s: float = 5.0
    """Seconds a POST may take before it counts as failed (and is retried)."""
    backoff_s: float = 2.0
    """Wait before the first retry; each further retry waits twice as long as the one before."""
    backoff_max_s: float = 600.0
    """The longest wait between two tries."""
    max_age_s: float = 21600.0
    """An event still undelivered this long after it was queued is given up (``failed``)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url = {self.url!r}: must start with http:// or https://")
        if not is_secret_ref(self.secret):
            # The value is not repeated: it may be the secret itself, put there by mistake.
            raise ValueError(f"secret: expected {REF_FORM} (the secret itself never goes in "
                             "the config)")
        if not self.events:
            raise ValueError("events: name at least one event (leave the key out for all)")
        if len(set(self.events)) != len(self.events):
            raise ValueError(f"events = {list(self.events)}: an event is named twice")
        for name in ("timeout_s", "backoff_s", "max_age_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} = {getattr(self, name)}: must be more than 0")
        if self.backoff_max_s < self.backoff_s:
            raise ValueError(f"backoff_max_s = {self.backoff_max_s}: must be at least "
                             f"backoff_s ({self.backoff_s})")
