"""When is the caller's turn over? The pause-tolerance rule on top of the VAD hangover.

The segmenter ends an utterance after ``endpoint_silence_s`` of silence. People pause inside a
sentence ("I want to move... uh... my visit"), so the session transcribes the utterance at once
and, when the words sound unfinished, waits up to ``pause_tolerance_s`` (never past
``max_endpoint_wait_s`` after speech ended) for more speech, then merges the two utterances
into one turn. Pure functions: no threads, no models, no SIP.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from dialplan.options import AudioOptions
from models.vad.segmenter import Utterance

# Words a finished English sentence rarely ends on: fillers, conjunctions, prepositions,
# articles, auxiliaries. Whisper writes a trailing "..." or "," for a pause, which counts too.
_CONTINUATIONS = frozenset("""
uh um er erm hmm mm ah like and or but so because if then than that which who whose whom
when while where to of for with in on at by from into about as the a an my your our their his
her its this these those some any is are was were be been am do does did have has had can
could would should will shall may might must want wanted need i i'm we you they he she it
""".split())
_TRAILING_PAUSE = re.compile(r"(\.\.\.|…|,|-|—)\s*$")
_WORD = re.compile(r"[a-z']+")


def sounds_unfinished(text: str) -> bool:
    """True when a transcript ends mid-sentence (a filler, conjunction, "..." or a comma).

    Args:
        text: the quick transcript of an utterance.

    Returns:
        Whether the session should wait for more speech before answering.
    """
    text = text.strip().lower()
    if not text:
        return False
    if _TRAILING_PAUSE.search(text):
        return True
    words = _WORD.findall(text)
    return bool(words) and words[-1] in _CONTINUATIONS and not text.endswith(("?", "!"))


def sounds_finished(text: str) -> bool:
    """True when a transcript reads as a whole sentence.

    Whisper closed it with ``?``, ``!`` or ``.`` and its last word is not one a sentence
    rarely ends on. Whisper punctuates from the words and the intonation it heard; a cut-off
    clause gets "..." or a comma (unfinished), or a full stop after a dangling "for" or "if"
    (also unfinished, by the word list).
    """
    text = text.strip()
    return bool(_WORD.search(text.lower())) and text.endswith(("?", "!", ".")) and \
        not sounds_unfinished(text)


def hold_s(options: AudioOptions) -> float:
    """Extra wait after speech ends for an unfinished utterance, capped by the max wait."""
    return min(options.pause_tolerance_s, options.max_endpoint_wait_s)


def merge(first: Utterance, second: Utterance) -> Utterance:
    """One utterance from two separated by a pause (audio concatenated, offsets spanning both).

    The pause itself is not re-inserted: ``second`` already starts with the segmenter's
    pre-roll, which is enough for ASR to hear a word boundary.
    """
    audio = np.concatenate([first.audio, second.audio]).astype(np.float32, copy=False)
    return replace(second, audio=audio, start_s=first.start_s)
