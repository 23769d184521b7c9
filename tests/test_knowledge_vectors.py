"""Facts found by meaning as well as by words: WordLlama's sentence vectors beside BM25.

The questions are put in other words than bench answers' and the facts (held out from both):
BM25 alone leaves the answering fact out of a turn's three for some of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.turn.knowledge import NO_NOTES, Knowledge, knowledge_of
from dialplan.knowledge import load_facts
from models.embed.wordllama import embedder

pytestmark = pytest.mark.model

LIBRARY = Path(__file__).resolve().parent.parent / "dialplan" / "personas" / "library.md"
FACTS = load_facts(LIBRARY)

PARAPHRASES = [
    ("Where are you located?", "12 Elm Street"),
    ("What's the maximum number of items I can check out?", "up to 20 items"),
    ("How much is the fine for an overdue book?", "late fee for a book"),
    ("Can I scan documents?", "Scanning is free"),
    ("Do you have any activities for toddlers?", "Story time"),
    ("Is there a reading group?", "book club"),
    ("Can I donate some old books?", "donations"),
    ("Can I extend my loan?", "renewed"),
    ("Until what time are you open on a Tuesday?", "Monday to Friday"),
    ("My card got stolen, what does a replacement costs?", "2 dollars"),
]


def test_sentence_vectors_are_unit_length_and_put_paraphrases_together():
    e = embedder()
    v = e.embed(["Where are you located?", "The library is at 12 Elm Street.",
                 "Late fees stop at 10 dollars per item."])
    assert v.shape == (3, e.dim) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.05


@pytest.mark.parametrize("question,needle", PARAPHRASES)
def test_a_question_in_other_words_still_finds_its_fact(question, needle):
    found = knowledge_of(FACTS, "").relevant(question)
    assert any(needle in f.text for f in found), [f.text for f in found]


def test_vectors_find_facts_bm25_alone_misses():
    words_only = Knowledge(FACTS)
    missed = [q for q, needle in PARAPHRASES
              if not any(needle in f.text for f in words_only.relevant(q))]
    assert len(missed) >= 4, missed  # what the vectors add (the test above: all found)


@pytest.mark.parametrize("words", ["Hello?", "Do you sell coffee?", "thank you, goodbye"])
def test_words_about_no_fact_get_no_facts(words):
    k = knowledge_of(FACTS, "")
    assert k.relevant(words) == [] and k.notes(words) == NO_NOTES


def test_one_knowledge_per_profile_and_process():
    assert knowledge_of(FACTS, "persona") is knowledge_of(FACTS, "persona")


def _runner(n_ctx: int = 2048):
    from dataclasses import replace

    from agent.turn.runner import TurnRunner
    from dialplan import load_config
    from tests.fakes import FakeLLM, fake_stages

    profile = load_config(LIBRARY.parent.parent.parent / "config.toml").profiles["default"]
    profile = replace(profile, llm=replace(profile.llm, n_ctx=n_ctx))
    return TurnRunner(fake_stages(llm=FakeLLM(reply="")), profile), profile


def test_every_fact_is_in_the_system_prompt_and_a_turn_adds_only_the_words():
    """One prefix (persona, facts, tools) for every turn: primed once, never changed."""
    from models.llm.base import Message

    runner, profile = _runner()
    assert runner.facts_in_prefix
    for fact in profile.facts:
        assert f"\n- {fact.text}\n" in runner.system_prompt
    assert runner.system_prompt.index(profile.facts[-1].text) < runner.system_prompt.index(
        "# Tools")
    history = [Message("user", "hi"), Message("assistant", "Hello!")]
    prompt = runner.prompt(history, "Are you open on Sunday?")
    assert prompt == [Message("system", runner.system_prompt), *history,
                      Message("user", "Are you open on Sunday?")]
    assert runner.asked("Are you open on Sunday?") == "Are you open on Sunday?"


def test_a_file_too_large_for_the_prefix_puts_matching_facts_after_the_words():
    """And the history keeps the words as sent, so the next turn finds them cached."""
    runner, _ = _runner(n_ctx=256)
    assert not runner.facts_in_prefix and "closed on Sunday" not in runner.system_prompt
    asked = runner.asked("Are you open on Sunday?")
    assert asked.startswith("Are you open on Sunday?\n\n[Facts you know:\n")
    assert "\nThe library is closed on Sunday.\n" in asked  # one fact a line
    assert runner.prompt([], "Are you open on Sunday?")[-1].content == asked


def test_a_callers_word_in_another_form_of_a_facts_is_known_to_the_checks():
    """"lose" for the facts' "lost", "weekdays" for their "week": no claim about the unknown.

    A word far from every fact's word stays unknown: "bookmobile" is not "book".
    """
    k = knowledge_of(FACTS, "You are the phone assistant of a public library.")
    assert k.unfounded("If you lose a book, you pay its replacement price plus 5 dollars.",
                       "What happens if I lose a book?", strict=True) == set()
    assert k.unknown_words("Does the bookmobile stop on Oak Street?") == {"bookmobile", "oak"}
