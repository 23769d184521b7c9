"""The spoken phone questions ``bench wer`` asks, and how their transcripts are scored.

Thirty short questions a caller might put to the library of the default profile (hours,
bookings, staff names, numbers, addresses), so the profile's own domain description and
greeting are fair context for the ASR. :data:`NAMES` holds the proper nouns a business would
know in advance (its staff and streets): the ``hotwords`` a deployment would configure.

Scoring reuses :func:`bench.scoring.normalize` and adds the spelling choices Whisper makes
that are not mishearings: "Dr." for "Doctor", "12th" for "twelfth", "472918" for a number read
digit by digit, "café" for "cafe".
"""

from __future__ import annotations

import re
import unicodedata

import jiwer

from bench.scoring import normalize as _base_normalize

QUESTIONS = (
    "What time does the library open on Saturday?",
    "Are you open on Easter Monday?",
    "How late is the Riverside branch open on Thursdays?",
    "What time do you close on Christmas Eve?",
    "Is the cafe open during the school holidays?",
    "Can I book a study room for four people tomorrow afternoon?",
    "I would like to reserve a computer for two hours on Friday morning.",
    "Can I move my booking from Tuesday to Wednesday at ten thirty?",
    "I want to cancel my reservation for the meeting room on the fifteenth.",
    "Can someone help me print a form at half past two?",
    "Could I speak to Mrs. Okafor in the children's section, please?",
    "Is Doctor Lindqvist giving the local history talk next week?",
    "My name is Priya Raman and I am calling about an overdue book.",
    "Can you put a hold on The Secret Garden for me?",
    "Do you have the new novel by Hilary Mantel?",
    "My library card number is 4 7 2 9 1 8.",
    "My phone number is 0 7 7 0 0, 9 0 0, 4 6 1.",
    "I have three books that were due on the twelfth of March.",
    "How much is the fine for a book that is nine days late?",
    "How many books can I borrow at once?",
    "Where is the branch on Elm Street?",
    "Is there parking near 42 Station Road?",
    "Is the library still at the corner of King Street and Mill Lane?",
    "Could you send the letter to 17 Birch Avenue, flat 3?",
    "Can I return books at the Westgate branch if I borrowed them here?",
    "How do I renew my books online?",
    "I lost my card, how do I get a new one?",
    "Does the reading group still meet on the first Wednesday of the month?",
    "Can my son join the chess club, he is eight years old?",
    "Can I pay my fine by card over the phone?",
)
"""The questions, as espeak-ng and Kokoro read them (digits apart are read one by one)."""

NAMES = (
    "Riverside", "Okafor", "Lindqvist", "Priya Raman", "Hilary Mantel", "Elm Street",
    "Station Road", "King Street", "Mill Lane", "Birch Avenue", "Westgate",
)
"""The business's own names (staff, branches, streets): the hotwords a deployment would set."""

BABBLE_TEXT = (
    "The weather has been unusually warm for the time of year, and the garden is full of "
    "bees. We drove to the coast on Sunday, had lunch by the harbour and walked back along "
    "the cliffs before the rain came in from the west."
)
"""What the babble talkers say: nothing from :data:`QUESTIONS`, so no word leaks in."""

# Whisper's own English normaliser standardises these spellings; scoring.normalize does not.
_SPELLINGS = {"dr": "doctor", "mr": "mister", "mrs": "missus", "rd": "road", "ave": "avenue"}
_ORDINALS = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()


def _ordinal(m: re.Match) -> str:
    n = int(m.group(1))
    if n < 20:
        return f" {_ORDINALS[n]} "
    if n < 40 and n % 10:
        return f" {'twenty' if n < 30 else 'thirty'} {_ORDINALS[n % 10]} "
    return f" {m.group(1)} "


def normalize(text: str) -> str:
    """Words to compare: :func:`bench.scoring.normalize` plus Whisper's spelling choices.

    Digits read one by one ("4 7 2 9") and written as one number ("4729") become the same
    digit words; ordinals ("12th") become words; accents go ("café" = "cafe").
    """
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"\b(\d+)(?:st|nd|rd|th)\b", _ordinal, text)
    # Runs of 3+ digits are codes (card, phone numbers), said digit by digit.
    text = re.sub(r"\d{3,}", lambda m: " " + " ".join(m.group()) + " ", text)
    words = _base_normalize(text).split()
    return " ".join(_SPELLINGS.get(w, w) for w in words)


def errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """Word errors (substitutions + deletions + insertions) and reference words of one pair."""
    ref = normalize(reference)
    hyp = normalize(hypothesis)
    n = len(ref.split())
    if not hyp:
        return n, n
    out = jiwer.process_words(ref, hyp)
    return out.substitutions + out.deletions + out.insertions, n
