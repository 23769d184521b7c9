"""Structured logging: one line per event, ``key=value`` pairs, always with the call id.

The agent's own (its lowest layer: every part of it may log). The call log in :mod:`db` is
given :func:`event` by whoever makes its writer; it does not import this module.

Secrets never reach a log line: keys that look like credentials are masked here, once.
Durations are seconds in records; a log line, read by people, shows them with :func:`ms`.
"""

from __future__ import annotations

import logging
import sys

_SECRET_KEYS = ("password", "secret", "token", "auth")
logger = logging.getLogger("callagent")


def setup(level: str = "INFO", stream=sys.stderr) -> None:
    """Configure the root ``callagent`` logger for one-line events."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


def ms(seconds: float | None) -> float | None:
    """Seconds as ms rounded to 0.1 for a log line (None, a missing stage, stays None)."""
    return None if seconds is None else round(seconds * 1000.0, 1)


def _fmt(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def event(name: str, call_id: str = "-", level: int = logging.INFO, **fields: object) -> None:
    """Log ``event=<name> call=<id> k=v ...`` as a single line."""
    if not logger.isEnabledFor(level):
        return
    parts = [f"event={name}", f"call={call_id}"]
    for key, value in fields.items():
        if any(s in key.lower() for s in _SECRET_KEYS):
            value = "***"
        parts.append(f"{key}={_fmt(value)}")
    logger.log(level, " ".join(parts))
