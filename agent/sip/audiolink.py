"""The seam between one call's audio on the line and the rest of the program.

A plain dataclass of two callables, so the session and the test fakes can speak to a phone line
without importing pjsua2 (only :mod:`agent.sip.useragent` does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class AudioLink:
    """How one call's audio meets the rest of the program, frame by frame.

    Both callables run on pjmedia's clock thread every 20 ms and must return at once.
    """

    sink: Callable[[bytes], None]
    """Receives each inbound frame: 16-bit little-endian mono PCM at the port's clock rate."""
    source: Callable[[], bytes]
    """Returns the next outbound frame (same format, exactly one frame long)."""
