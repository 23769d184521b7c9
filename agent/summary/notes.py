"""What the post-call job asks the LLM, and how its answer becomes a summary and fields.

Pure functions, no model and no database: :func:`shape` is the JSON object the profile asks
for (``summary`` and the ``extract`` fields, each a string or null), :func:`request` the chat
messages (the call's words as a transcript, then what each key means), and :func:`parse` the
reply checked against the shape. A reply that is not that object (a backend without a
grammar, a reply cut at its token limit) raises :class:`NotesError` with the reason, which
the job records as the summary's failure: never a crash, never a half-read field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dialplan.profile import Profile
from models.llm.base import Message
from models.llm.shape import Field, JsonObject

SUMMARY_CHARS = 360
"""The longest summary: two sentences, each of a few clauses."""
FIELD_CHARS = 100
"""The longest field value (a name, a reason, a number)."""
CONTEXT_MARGIN = 48
"""Prompt tokens kept free for the chat template's own."""
NONE_WORDS = frozenset({"", "null", "none", "n/a", "na", "unknown", "not given", "not said",
                        "not provided", "not mentioned", "-"})
"""Values a model writes for "the call did not say": all read as null."""

SYSTEM = ("You take notes on finished phone calls for the staff who follow them up. You read "
          "the transcript of one call between a caller and an automated phone agent (the "
          "Agent lines are the agent, the Caller lines the caller) and reply with one JSON "
          "object. Write only what the transcript says; write null where it does not say "
          "something at all.")
SUMMARY_MEANING = ("two short sentences: who called and what they wanted, then what the "
                   "agent did or promised")


class NotesError(ValueError):
    """The LLM's reply is not the object asked for; the message says why."""


@dataclass(frozen=True)
class Notes:
    """A call's summary and fields, as the job stores them."""

    summary: str | None
    """None where the profile asks only for fields."""
    fields: dict[str, str | None]

    def extracted_json(self) -> str | None:
        """The fields as the call log's JSON text (None: the profile asks for none)."""
        return json.dumps(self.fields, ensure_ascii=False) if self.fields else None


def wants_notes(profile: Profile) -> bool:
    """The profile asks for a summary or fields after its calls."""
    return profile.summary or bool(profile.extract)


def shape(profile: Profile) -> JsonObject:
    """The object asked for: ``summary`` (if the profile wants one) first, then the fields.

    The summary comes first: writing it, the model reads the call once more before the
    fields.
    """
    fields = [Field("summary", SUMMARY_CHARS, nullable=False)] if profile.summary else []
    fields += [Field(name, FIELD_CHARS) for name in profile.extract]
    return JsonObject(tuple(fields))


def max_tokens(obj: JsonObject) -> int:
    """Enough tokens for the longest object the shape allows (one character a token)."""
    return sum(f.max_chars + 8 + len(f.name) for f in obj.fields) + 8


def transcript(greeting: str, turns: Sequence[tuple[str, str]]) -> list[str]:
    """The call's lines, ``Agent:`` and ``Caller:``; turns without words left out."""
    lines = [f"Agent: {greeting.strip()}"] if greeting.strip() else []
    for said, reply in turns:
        if said.strip():
            lines.append(f"Caller: {' '.join(said.split())}")
        if reply.strip():
            lines.append(f"Agent: {' '.join(reply.split())}")
    return lines


def request(profile: Profile, turns: Sequence[tuple[str, str]],
            count_tokens: Callable[[str], int] | None = None,
            budget: int | None = None) -> list[Message]:
    """The chat messages that ask for ``profile``'s notes on a call of ``turns``.

    Args:
        profile: says what to write (``summary``, ``extract``) and the greeting said.
        turns: (the caller's words, the agent's reply) per turn, in order.
        count_tokens: the LLM's token count, to fit ``budget``.
        budget: prompt tokens allowed (n_ctx less the reply's); lines from the middle of the
            call are left out until it fits, the opening (names, reasons) and the end kept.
    """
    meanings = ([("summary", SUMMARY_MEANING)] if profile.summary else []) + [
        (name, meaning.strip()) for name, meaning in profile.extract.items()]
    keys = "\n".join(f"- {name}: {meaning}" + ("" if name == "summary" else
                                               " (null if the call does not say)")
                     for name, meaning in meanings)
    lines = transcript(profile.greeting, turns) or ["(nobody said anything)"]

    def build(kept: list[str]) -> list[Message]:
        return [Message("system", SYSTEM), Message("user", (
            "The transcript:\n" + "\n".join(kept) + "\n\nReply with a JSON object with "
            f"these keys, in this order:\n{keys}"))]

    messages = build(lines)
    if count_tokens is None or budget is None:
        return messages
    head, tail = lines[:2], lines[2:]
    while tail and sum(count_tokens(m.content) + 8 for m in messages) > budget - CONTEXT_MARGIN:
        del tail[len(tail) // 2]  # the middle goes first
        messages = build(head + ["(part of the call left out)"] + tail)
    return messages


def parse(text: str, obj: JsonObject) -> Notes:
    """The notes in a reply, checked against ``obj``.

    Lenient where a model without a grammar strays (prose or code fences around the object,
    a number where a string was asked, "unknown" for null); strict on what matters: one JSON
    object, the summary present and not empty.

    Raises:
        NotesError: no JSON object, a cut one, or no summary where one was asked.
    """
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0:
        raise NotesError(f"no JSON object in the reply: {_clip(body)!r}")
    if end < start:
        raise NotesError(f"the JSON object is cut off (the reply ran out of tokens): "
                         f"{_clip(body[start:])!r}")
    try:
        data = json.loads(body[start:end + 1])
    except ValueError as e:
        raise NotesError(f"not valid JSON ({e.msg} at {e.pos}): {_clip(body)!r}") from None
    if not isinstance(data, dict):
        raise NotesError(f"not a JSON object: {_clip(body)!r}")
    values = {f.name: _value(data.get(f.name), f.max_chars) for f in obj.fields}
    summary = None
    if "summary" in obj.names:
        summary = values.pop("summary")
        if summary is None:
            raise NotesError(f"no summary in the reply: {_clip(body)!r}")
    return Notes(summary, values)


def _value(raw: object, max_chars: int) -> str | None:
    if raw is None or isinstance(raw, (dict, list)):
        return None
    text = " ".join(str(raw).split())
    if text.lower().strip(".") in NONE_WORDS:
        return None
    return text[:max_chars]


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n] + "…"
