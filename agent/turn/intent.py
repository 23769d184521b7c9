"""What the caller's words (and the reply's) decide without the model.

The LLM decides most of a turn, but a few things are plain in the words and too costly to
leave to a 1.5B model's judgement (bench tools): a caller who asks to be put through to a
directory entry by name is transferred at once (:func:`requested_transfer`), a goodbye ends the
call (:func:`farewell`), a caller who asks the agent to wait is told to take their time
(:func:`asks_to_wait`), and the model's own calls are checked against what the caller said
(:func:`took_leave`, :func:`asks_for_message`) so it never hangs up on a question.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent.turn.terms import terms

_FAREWELL = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|great|perfect|thanks?(?: you)?(?: (?:so much|very much))?(?: for "
    r"(?:calling|your help|the help|everything|that))?|that'?s (?:all|it|everything)|"
    r"you'?re (?:very )?welcome|my pleasure|have a (?:great|nice|good|lovely) "
    r"(?:day|evening|afternoon|weekend)|take care|bye(?:[- ]bye)?|good ?bye|goodbye for now|"
    r"see you)[\s,.!]*)+$", re.IGNORECASE)


_LAST_WORD_BYE = re.compile(r"\b(?:good ?bye|bye(?:[- ]bye)?)(?: for now)?[\s.!]*$", re.IGNORECASE)


_LEAVE = re.compile(r"\b(?:bye|goodbye|good bye|that'?s (?:all|it|everything)|nothing (?:else|"
                    r"more)|no,? thanks?|thanks?|thank you|hang up|end (?:the|this) call)\b",
                    re.IGNORECASE)


def took_leave(words: str) -> bool:
    """The caller's words could end a call (a goodbye, thanks, "that's all").

    ``end_call`` is refused without them, so the agent never hangs up on a question (nor
    on one that opens with thanks: "Thanks, and when do you close?").
    """
    return bool(_LEAVE.search(words)) and "?" not in words


_MESSAGE = re.compile(r"\bmessage|\bleave (a|my|him|her|them)\b|\btell (him|her|them|the)\b|"
                      r"\blet (him|her|them|the \w+) know\b|\bpass (it|this|that) on\b|"
                      r"\bcall (me|us) back\b|\bvoicemail", re.IGNORECASE)


def asks_for_message(words: str) -> bool:
    """Whether the caller's words ask to leave a message ("tell her I called").

    ``take_message`` is refused without them: the under-load model took messages in answer to
    plain questions (bench answers).
    """
    return bool(_MESSAGE.search(words))


def farewell(reply: str, words: str = "") -> bool:
    """The agent takes leave, so the call ends once the reply is heard.

    Its reply ends on a goodbye and asks nothing, or the caller's ``words`` took leave
    ("Thanks, bye!", "No, that's everything. Goodbye.") and the reply asks nothing back.
    """
    text = reply.strip()
    if not text or "?" in text:
        return False
    if _LAST_WORD_BYE.search(text):
        return True
    said = words.strip()
    if not said or not re.search(r"\bbye\b|goodbye|good bye", said, re.IGNORECASE):
        return False
    return bool(_FAREWELL.match(said)) or ("?" not in said and bool(_LAST_WORD_BYE.search(said)))


def names_a_tool(text: str, names: list[str] | tuple[str, ...]) -> bool:
    """Whether spoken ``text`` talks about the tools instead of using them.

    The small models sometimes describe a call in words ("you can call the take_message
    function with the target accounts"): a caller must not hear that (bench answers).
    """
    low = text.lower()
    return bool(re.search(r"\bfunctions?\b", low)) or any(
        (("_" in n and n in low) or f'"{n}"' in low) for n in names)


_ASKS_FOR = re.compile(
    r"\b(?:transfer(?:red)?\s+(?:me|us|my call|this call)|transfer\s+to|"
    r"connect(?:ed)?\s+(?:me|us)|put\s+(?:me|us)\s+through|pass\s+me\s+(?:on|over|to)|"
    r"(?:speak|talk)\s+(?:to|with)(?!\s+you\b))", re.IGNORECASE)
_NOT = re.compile(r"\b(?:don'?t|do not|not|never|no need)\b", re.IGNORECASE)
_QUESTION = re.compile(r"\b(?:what|when|where|how|why|which)\b", re.IGNORECASE)


def requested_transfer(words: str, directory: Mapping, operator: str | None = None
                       ) -> str | None:
    """The directory entry the caller asks to be put through to, when the words leave no doubt.

    A request verb ("transfer me", "connect me", "put me through", "talk to") followed by the
    words of exactly one entry's name or description ("the children's section", "someone
    about my late fees"), or by a person and no entry ("a real person", "someone") when there
    is an ``operator`` (keypad 0's entry, by the phone convention). A question besides the
    request, a negation, or two entries that fit as well leave it to the model.
    ``directory``: the profile's entries by name, each with a ``description``.
    """
    asked = _ASKS_FOR.search(words)
    if asked is None or _NOT.search(words[:asked.start()]) or _QUESTION.search(words):
        return None
    wanted = set(terms(words[asked.end():]))
    scores = {}
    for name, entry in directory.items():
        named = set(terms(name.replace("-", " ").replace("_", " ")))
        about = set(terms(getattr(entry, "description", "") or "")) - named
        scores[name] = 2 * len(named & wanted) + len(about & wanted)
    best = max(scores.values(), default=0)
    winners = [n for n, s in scores.items() if s == best]
    if best > 0:
        return winners[0] if len(winners) == 1 else None
    if operator in directory and _PERSON.search(words[asked.end():]):
        return operator
    return None


_PERSON = re.compile(r"\b(?:person|human|someone|somebody|anyone|operator|staff|receptionist|"
                     r"people)\b", re.IGNORECASE)


def operator_of(keypad: Mapping) -> str | None:
    """The entry keypad 0 transfers to: the operator, by the phone convention."""
    zero = keypad.get("0", "")
    return zero.split(":", 1)[1] if zero.startswith("transfer:") else None


_PROMISE = re.compile(r"\b(?:i'?ll|i will|let me|i am going to|i'?m going to) (?:now )?"
                      r"(?:transfer you|connect you|put you through)\b|\btransferring you\b|"
                      r"\bputting you through\b|\bconnecting you\b", re.IGNORECASE)


def promised_transfer(reply: str, directory: Mapping, keypad: Mapping | None = None) -> str | None:
    """The directory entry a reply promised to transfer the caller to, if it promised one.

    "I'll transfer you to the staff who can help." said without a call is a promise the
    caller waits on: it is kept. An offer ("I can put you through") is not a promise. The
    entry is the one the reply names, else keypad 0's transfer, else the directory's first.
    """
    said = _PROMISE.search(reply)
    if said is None or not directory:
        return None
    named = requested_transfer("transfer me " + reply[said.end():], directory)
    if named is not None:
        return named
    zero = operator_of(keypad or {})
    return zero if zero in directory else next(iter(directory))


_LEAVES = re.compile(r"\b(?:leave|take|pass on|give (?:him|her|them)) "
                     r"(?:a |my |him a |her a |them a )?(?:message|voicemail)\b|"
                     r"\btell (?:him|her|them) (?:i|that)\b|\bcall me back\b", re.IGNORECASE)


def leaves_message(words: str) -> bool:
    """Whether the caller plainly asks to leave a message ("Can I leave a message for her?").

    Stricter than :func:`asks_for_message`: these words take the message without the model.
    """
    return bool(_LEAVES.search(words)) and not _NOT.search(words)


_WAIT = re.compile(
    r"(?:(?:hold|hang) on\b(?! to\b)|bear with me|(?:wait|give me|gimme|just|one|half) (?:a |one )?"
    r"(?:sec(?:ond)?|moment|minute|min|mo)s?\b|let me (?:just )?(?:find|get|grab|fetch|look "
    r"for|check|see if i can find|go and (?:get|find|check)))", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:oh|ok(?:ay)?|sure|yes|yeah|yep|um+|uh+|er|right|alright|sorry|well|"
                   r"please|(?:can|could|would|will) you(?: please)?|no)\b[\s,]*)*",
                   re.IGNORECASE)


def asks_to_wait(words: str) -> bool:
    """Whether the caller asks the agent to wait, and asks nothing else.

    "Hold on", "one second", "give me a minute", "let me find it".

    The request opens one of the caller's sentences or clauses (after "oh", "sorry", "could
    you"...): "I'll be one minute late" asks no wait. Said with a question ("Hang on, when do
    you close?") it is left to the model, which answers the question.
    """
    if _QUESTION.search(words):
        return False
    return any(_WAIT.match(_LEAD.sub("", part.strip()))
               for part in re.split(r"[.,!?;:]+", words))
