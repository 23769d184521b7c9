"""What a reply does with a sentence its checks refuse (:func:`~agent.turn.guard.objection`).

The half of :class:`~agent.turn.reply.Reply` that reads the checks' verdicts, split off to
keep each module one concern, as :mod:`agent.turn.reply_tools` is for tool calls. It uses the
reply's own state (its runner, result, what it said) and its steps (``_put``, ``_ask``,
``_close_stream``, ``_llm_end``, ``_use``).
"""

from __future__ import annotations

from agent.turn.guard import REFUSES, Objection, objection


class Checked:
    """A reply's sentences checked before they are said (mixed into ``Reply``)."""

    def _may_lead(self, clause: str) -> bool:
        """Whether the reply's first clause may be said before its sentence is whole.

        The first clause is the caller's wait (a decode step a token: waiting for the whole
        sentence cost about a second on 2 cores, bench call). It goes early only where what
        follows can hardly fail: the caller named nothing the facts do not know, so no claim
        about it can follow (:meth:`~agent.turn.knowledge.Knowledge.unfounded`).
        """
        k = self.runner.knowledge
        return k is not None and not k.unknown_words(self.result.transcript)

    def _check(self, sentence: str) -> str:
        return objection(self.runner.knowledge, self.runner.tools.names, sentence,
                         self.result.transcript, self.runner.profile.llm.strict_numbers,
                         self.runner.instructions)

    def _said_or_objected(self, clauses: list[str], objected: Objection | None) -> bool:
        """Say the clauses that passed; True when a sentence did not (the reply ends there).

        With nothing said yet, ``dont_know`` is said instead; what the under-load model turns
        away is asked of the profile's own model. After a first clause said early, the rest of
        whose sentence fails, ``dont_know`` follows it (a speaker correcting themselves; the
        call log and bench answers count it). After whole sentences, nothing more is said.
        """
        for clause in clauses:
            self._put(clause)
        if objected is None:
            return False
        if objected.why == REFUSES and self._escalate is not None and not self._said:
            self._ask_escalated(objected.sentence)
            return True
        lead = ", after its first clause" if objected.after_lead else ""
        self.result.unfounded = f"{objected.sentence} ({objected.why}{lead})"
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

