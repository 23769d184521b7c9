"""The agent and its models know no business: a persona is data (dialplan/personas/).

Every shipped persona names the words that are its own; none may stand in agent/ or models/
(code, comments or docstrings). The checks a reply passes, the prompt's wording and the
warm-up text are general, so a business set up from the README gets what the library gets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PERSONAS = ROOT / "dialplan" / "personas"
SCANNED = ("agent", "models")
EXEMPT: tuple[str, ...] = ()
"""Nothing under agent/ or models/ is exempt: the benchmarks' own callers (bench wer's and
bench tools' spoken questions, the sample persona bench call serves) live in bench/, beside the
agent, not in it."""

WORDS: dict[str, tuple[str, ...]] = {
    # "book" alone is every business's verb ("book an appointment"); the noun's plural is not.
    "library": ("library", "libraries", "librarian", "books", "borrow", "renewal", "renew",
                "story time", "study room", "book club", "late fee", "elm street", "dvd",
                "bookmobile", "library card"),
    "dental": ("dental", "dentist", "tooth", "teeth", "hygienist", "filling", "implant",
               "whitening", "crown", "x-ray", "referral", "check-up"),
    "bikes": ("bicycle", "bike", "bikes", "cycling", "puncture", "tyre", "tire", "inner tube",
              "helmet", "saddle"),
}


def _sources() -> list[Path]:
    out = []
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*")):
            rel = p.relative_to(ROOT).as_posix()
            if p.is_file() and p.suffix in (".py", ".toml", ".md", ".txt", ".xml", ".json") \
                    and not rel.startswith(EXEMPT) and "__pycache__" not in rel:
                out.append(p)
    return out


def test_every_shipped_persona_names_its_words():
    shipped = {p.stem for p in PERSONAS.glob("*.md")}
    assert shipped and shipped <= set(WORDS), f"add the words of {shipped - set(WORDS)} here"


@pytest.mark.parametrize("persona", sorted(WORDS))
def test_no_persona_words_in_the_agent_or_its_models(persona):
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in WORDS[persona]) + r")\b",
                         re.IGNORECASE)
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in _sources()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, "persona words in the runtime:\n" + "\n".join(found)
