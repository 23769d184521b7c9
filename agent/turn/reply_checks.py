"""What a reply does with a sentence its checks refuse (:func:`~agent.turn.guard.objection`).

The half of :class:`~agent.turn.reply.Reply` that reads the checks' verdicts, split off to
keep each module one concern, as :mod:`agent.turn.reply_tools` is for tool calls. It uses the
reply's own state (its runner, result, what it said) and its steps (``_put``, ``_ask``,
``_close_stream``, ``_llm_end``, ``_use``).
"""

from __future__ import annotations

import re

from agent.turn.guard import REFUSES, Objection, objection
from agent.turn.knowledge import LOOK, Knowledge
from agent.turn.textsplit import ends_sentence
from agent.turn.wording import (
    another_day,
    asks_amount,
    declines,
    misses_the_question,
    own_doubt,
    unsure,
)


class Checked:
    """A reply's sentences checked before they are said (mixed into ``Reply``)."""

    _looked = False
    """The turn was asked again with the facts its words match (:meth:`_look_again`)."""
    _opening = ""
    """The text of the reply's first sentence so far, while nothing of it was said."""

    def _unsure_opening(self, speech: str) -> bool:
        """Act on a first sentence that says the agent does not know as soon as it says so.

        "I don't know if you can come in on Friday morning." is known to be a refusal
        four tokens in; the rest of it only repeats the caller's words, misheard ones too, at a
        decode step a token while the caller waits (bench call: the longest first clauses).
        The turn is asked again with the facts (:meth:`_look_again`) at once, or the
        profile's ``dont_know`` is said, which offers what the model's own refusal may not (a
        person who does know). True when the reply ends or starts again here.
        """
        if self._said or self._rounds:
            return False
        self._opening += speech
        if re.search(r"[.!?]\s", self._opening) or not own_doubt(self._opening):
            return False  # a whole first sentence goes through the gate's checks
        sentence = self._opening.strip()
        if self._look_again(sentence):
            return True
        self.result.unfounded = f"{sentence} (unsure: said dont_know)"
        self._close_stream()
        self._put(self.runner.profile.dont_know)
        self._llm_end()
        return True

    def _may_lead(self, clause: str) -> bool:
        """Whether the reply's first clause may be said before its sentence is whole.

        The first clause is the caller's wait (a decode step a token: waiting for the whole
        sentence cost about a second on 2 cores, bench call). It goes early only where what
        follows can hardly fail: every word the caller named is one of a fact's own (not only
        the business's name), so no claim about it can follow
        (:meth:`~agent.turn.knowledge.Knowledge.unfounded`), and it asks for no amount, whose
        number the checks may refuse (:func:`~agent.turn.wording.asks_amount`). Never from the
        under-load model (a turn that may be escalated): its sentences are refused far more
        often than the profile's own model's, and a clause said forecloses what a refused
        first sentence gets instead, the second pass (bench answers' spliced replies).
        """
        k, words = self.runner.knowledge, self.result.transcript
        return k is not None and self._escalate is None and k.all_in_facts(words) and not (
            asks_amount(words) or unsure(clause) or self._repeats(clause))

    def _check(self, sentence: str) -> str:
        # A tool's answer this turn is known as a fact is: its numbers, names and things may
        # be said.
        told = " ".join(str(m.content) for m in self._rounds[1::2])
        # The call's previous exchange, caller's words and reply: what a follow-up is about.
        said_last, replied = self.runner.last_exchange(self.history)
        before = " ".join(w for w in (said_last, replied) if w)
        why = objection(self.runner.knowledge, self.runner.tools.names, sentence,
                        self.result.transcript, self.runner.profile.llm.strict_numbers,
                        self.runner.instructions, before, told)
        if why or self._said or self._rounds or self.runner.knowledge is None or not \
                ends_sentence(sentence):
            return why
        # The reply's first whole sentence, none of it said yet, is its answer: of the kind
        # the words ask for, or none, and of the day they ask about. A first clause said early
        # (the caller's wait) is not held back for it: what it begins is rarely of another kind.
        words, k = self.result.transcript, self.runner.knowledge
        why = misses_the_question(words, sentence) or another_day(words, sentence, said_last)
        if why or declines(sentence) or not k.strays(sentence, words, before):
            return why
        return "of another thing"

    def _said_or_objected(self, clauses: list[str], objected: Objection | None) -> bool:
        """Say the clauses that passed; True when a sentence did not (the reply ends there).

        With nothing said yet, ``dont_know`` is said instead; what the under-load model turns
        away is asked of the profile's own model. After a first clause said early, the rest of
        whose sentence fails, ``dont_know`` follows it (a speaker correcting themselves; the
        call log and bench answers count it). After whole sentences, nothing more is said.
        A first sentence that says it does not know may be asked again (:meth:`_look_again`).
        """
        if clauses and not self._said and self._look_again(" ".join(clauses)):
            return True
        for clause in clauses:
            self._put(clause)
        if objected is None:
            return False
        if objected.why == REFUSES and self._escalate is not None and not self._said:
            self._ask_escalated(objected.sentence)
            return True
        lead = ", after its first clause" if objected.after_lead else ""
        self.result.unfounded = f"{objected.sentence} ({objected.why}{lead})"
        theirs = _names_theirs(objected.why, self.result.transcript, self.runner.knowledge)
        if not (objected.after_lead or self._said or theirs) and self._look_again(
                objected.sentence, objected=True):
            return True
        self._close_stream()
        if not self._said or objected.after_lead:
            self._put(self.runner.profile.dont_know)
        self._llm_end()
        return True

    def _ask_escalated(self, refusal: str) -> None:
        """Ask the profile's own model what the under-load one turned away.

        The under-load 0.5B, a coder model, answers plain questions its facts answer "We're
        sorry, but I can't assist with that." (bench answers: a third of the facts it missed);
        the profile's 1.5B answers them. Nothing was said yet, so the caller hears one answer,
        later. Only once: a refusal from that model too is answered with ``dont_know``.
        """
        runner, self._escalate = self._escalate, None
        self.result.unfounded = f"{refusal} (refuses: asked {runner.profile.llm.model})"
        self._close_stream()
        self._first_llm = None  # the turn's LLM is the one that answered
        self._use(runner)
        self._ask(self.result.transcript)

    def _look_again(self, sentence: str, objected: bool = False) -> bool:
        """Ask once more, the facts the words match set before them: a reply that opens unsure.

        With every fact in its prompt, the 1.5B still says "I don't know" to some questions a
        fact answers, put in other words than the fact's (bench answers). Set before the
        question, the same facts are read. Only
        before anything was said, once, and where the caller named nothing the facts do not
        know (:meth:`~agent.turn.knowledge.Knowledge.unknown_words`): a question about
        something else is rightly not known, and its neighbours' facts would only mislead.
        So is a reply that opens with the last one's words, to a new question: the small
        models copy their previous answer to a follow-up. And a first sentence the checks
        refused (``objected``), whatever the caller named: a "there is no fee" where a fact
        states the price in its own words. What the second answer says is checked as the
        first was. It costs
        the caller the second prefill (the facts' tokens), on these turns alone.
        """
        k, words = self.runner.knowledge, self.result.transcript
        if self._looked or self._rounds or k is None or not self.runner.facts_in_prefix:
            return False
        why = ("refused" if objected else "repeats" if self._repeats(sentence) else "unsure"
               if unsure(sentence) or sentence.strip() == self.runner.profile.dont_know else "")
        if not why or (not objected and k.unknown_words(words)):
            return False
        found = k.relevant(words, before=self.runner.said_last(self.history))
        if not found:
            return False
        self._looked = True
        self.result.unfounded = f"{sentence} ({why}: asked again with {len(found)} facts)"
        self._close_stream()
        self._first_llm = None  # the turn's LLM metrics are the answer's
        self._ask(LOOK.format(words=words, facts="\n".join(f.text for f in found)))
        return True

    def _repeats(self, sentence: str) -> bool:
        """Whether ``sentence`` opens the call's last reply again, word for word."""
        last = next((m.content for m in reversed(self.history) if m.role == "assistant"), "")
        said = re.findall(r"[a-z0-9']+", sentence.lower())
        return len(said) >= 4 and re.findall(r"[a-z0-9']+", str(last).lower())[:len(said)] == said


def _names_theirs(why: str, words: str, knowledge: Knowledge | None) -> bool:
    """Whether an objection names a word of the caller's that no fact knows.

    Then the sentence is not asked again with the facts its words match: they are about
    something else, and the second answer says one of them instead ("We do not fit braces"
    to a question about implants: bench answers' unknowns). A refused number, "free" or
    answer of the wrong kind is asked again.
    """
    return knowledge is not None and bool(
        set(why.lower().split(", ")) & knowledge.unknown_words(words))
