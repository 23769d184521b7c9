"""What a reply's clause may not say: the checks every clause passes before it is spoken.

The facts' checks are :class:`~agent.turn.knowledge.Knowledge`'s (a number or a claim no fact
holds, an "open" on a day a fact says is closed, a "you need" where a fact says it is not
needed); the others need no facts: a template's slot left unfilled, a reply that turns the
caller away, one that talks about the tools instead of using them.
:class:`~agent.turn.reply.Reply` says ``dont_know`` (or the contradicted fact) instead of what
fails, or asks the profile's own model what its under-load one refused.
"""

from __future__ import annotations

from agent.turn.intent import names_a_tool
from agent.turn.knowledge import Knowledge, placeholder, refuses
from dialplan.knowledge import Fact

REFUSES = "refuses"
"""The objection to a reply that turns the caller away."""


def objection(knowledge: Knowledge | None, tools: tuple[str, ...] | list[str], chunk: str,
              sentence: str, heard: str, strict: bool) -> tuple[str, Fact | None]:
    """Why ``chunk`` must not be said ("" if it may be), and the fact it contradicts, if any.

    Args:
        knowledge: the profile's facts (None: only the checks that need none).
        tools: the names of the tools the profile offers.
        chunk: the clause about to be spoken.
        sentence: the sentence so far, ``chunk`` included: a short first clause ("Yes, you can
            rent the meeting hall") may leave what it is about ("for a wedding.") to the next.
        heard: the caller's words.
        strict: ``llm.strict_numbers``.
    """
    made_up = knowledge.unfounded(sentence, heard, strict) if knowledge is not None else set()
    wrong = knowledge.contradicted(sentence) if knowledge is not None else None
    if made_up or wrong is not None:
        return ", ".join(sorted(made_up)) or "contradicts a fact", wrong
    if placeholder(chunk):
        return "a placeholder", None
    if refuses(sentence):
        return REFUSES, None
    if tools and names_a_tool(chunk, tools):
        return "names a tool", None
    return "", None
