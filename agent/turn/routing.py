"""Look-ups the caller's words ask for: chosen by the model's odds, arguments by its grammar.

The small models rarely start a tool call on their own: asked "What time does the museum open
on Sunday?" with an MCP tool that says it knows the museum's hours, the 1.5B answered a time of
its own in words in every wording tried (tests/test_sip_mcp.py; in its own reply's first token
``<tool_call>`` had no chance and a bare ``{"`` 4-15 %, no more for the museum's questions than
for a restaurant's). Asked the question plainly, beside the look-ups listed by name and
description ("Does answering the caller's words need one of them? Answer with the function's
name, or none."), the same model puts most of its first token on the right tool's name
when one is needed and little on any when none is (``bench lookups``). So the choice is made
that way, in one prompt step that generates nothing (:meth:`models.llm.base.LLM.weigh`): a tool
whose name has at least :data:`CHOOSE` of the odds is called. The model then writes the call's
arguments in the Hermes format it was trained on, from the call's own prompt with the call's
opening given (``<tool_call>`` and the name), held to the tool's schema by llama.cpp's grammar
(:class:`models.llm.shape.JsonObject`).

Only tools that change nothing are chosen this way (an MCP tool's ``readOnlyHint``, an HTTP
tool's ``read_only``): a wrong choice costs a look-up whose answer the model then does not use,
never an action the caller did not ask for. Everything else stays the model's choice. The
routing prompt holds the persona and the list, the same for every turn of a profile: a
backend with a KV cache reads only the caller's words of it after the first turn.
"""

from __future__ import annotations

import json

from models.llm.base import LLM, Message
from models.llm.shape import Field, JsonObject
from models.priority import Cancellable, cancel_on

CHOOSE = 0.5
"""The least chance of a tool's name (the routing answer's first token, however spelt) to call
it. On ``bench lookups``' tuned split (27 questions to 4 businesses) the 1.5B gave the tool
needed 0.59-0.92 and, where none was, up to 0.60 ("Do you deliver on Sundays?" to a depot's
hours): no value parts them. The costs are not alike, so the floor sits below the needed
ones: a look-up missed is an answer the caller does not get (the model alone guessed, or did
not know), one too many is a second round of the model with an answer it then leaves out (3 of
the 12 on that split)."""
MAX_ARGUMENT_CHARS = 60
"""The longest string an argument may be (a day, a name, a time; not a paragraph)."""
_SCALARS = {"string", "integer", "number", "boolean"}


def opening(name: str) -> str:
    """The start of a Hermes tool call to ``name``, up to its arguments' object."""
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": '


def arguments_shape(parameters: dict) -> JsonObject | None:
    """The grammar's shape of a tool's arguments; None if the schema is not a flat object.

    Every value is written as a string (the shape's grammar has strings only) and cast back
    by :func:`parse_arguments`; one the schema does not require may be ``null``.
    """
    props = parameters.get("properties") or {}
    if not props:
        return None
    required = set(parameters.get("required") or ())
    fields = []
    for name, spec in props.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind not in _SCALARS:
            return None
        try:
            fields.append(Field(name, MAX_ARGUMENT_CHARS, nullable=name not in required))
        except ValueError:  # a name the grammar cannot hold ("Day", "day-of-week")
            return None
    try:
        return JsonObject(tuple(fields))
    except ValueError:
        return None


def parse_arguments(text: str, parameters: dict) -> dict | None:
    """The arguments the model wrote, cast to the schema's types; None if they do not parse.

    ``null`` values are left out (the tool's defaults apply).
    """
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        raw = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
        return None
    props = parameters.get("properties") or {}
    out: dict = {}
    for name, value in raw.items():
        if value is None or name not in props:
            continue
        kind = props[name].get("type")
        try:
            if kind == "integer":
                out[name] = int(float(value))
            elif kind == "number":
                out[name] = float(value)
            elif kind == "boolean":
                out[name] = str(value).strip().lower() in ("true", "yes", "1")
            else:
                out[name] = str(value)
        except ValueError:
            return None
    missing = set(parameters.get("required") or ()) - set(out)
    return None if missing else out


class LookupRouter:
    """Which look-up tool, if any, the caller's words clearly ask for.

    Args:
        persona: the profile's system prompt (what business the words are said to).
        tools: name -> description, of the tools that may be chosen this way.
    """

    def __init__(self, persona: str, tools: dict[str, str]):
        self.names = tuple(tools)
        self.labels = labels(self.names)
        """Name -> how the routing prompt lists it."""
        listed = "\n".join(f"- {self.labels[n]}: {d}" for n, d in tools.items())
        self.prompt = (f"{persona}\n\nThese functions look things up:\n{listed}\n\nDoes "
                       "answering the caller's words need one of them? Answer with the "
                       "function's name, or none.")

    def messages(self, words: str, before: str = "") -> list[Message]:
        """What the model is asked: the persona and the list, then the caller's words.

        ``before``: their words of the turn before, said first, as if in one breath: a
        follow-up ("And on Monday?") names no subject of its own.
        """
        said = f"{before} {words}" if before else words
        return [Message("system", self.prompt), Message("user", said)]

    @property
    def options(self) -> list[str]:
        return [self.labels[n] for n in self.names]

    def choose(self, odds: dict[str, float] | None) -> str | None:
        """The tool to call, from the odds of each listed name (None: the model decides)."""
        if not odds:
            return None
        best = max(self.names, key=lambda n: odds.get(self.labels[n], 0.0))
        return best if odds.get(self.labels[best], 0.0) >= CHOOSE else None


def labels(names: tuple[str, ...]) -> dict[str, str]:
    """Each name as the routing prompt lists it: without the words every name begins with.

    MCP servers name tools ``get_outage_status``, ``get_bill_balance``: the model's first
    token ("get") would tell them apart no more than from each other, so they are listed as
    ``outage_status`` and ``bill_balance``. One name alone, or names with nothing in common
    at the start, are listed as they are.
    """
    if len(names) < 2:
        return {n: n for n in names}
    words = [n.split("_") for n in names]
    common = 0
    while all(len(w) > common + 1 and w[common] == words[0][common] for w in words):
        common += 1
    return {n: "_".join(w[common:]) for n, w in zip(names, words, strict=True)}


def route(llm: LLM, router: LookupRouter, words: str, cancel: Cancellable,
          before: str = "") -> str | None:
    """A job: the look-up ``words`` need, by the model's odds (None: none clearly).

    ``before``: the caller's words of the turn before (:meth:`LookupRouter.messages`).
    """
    if not words.strip():
        return None
    with cancel_on(cancel):
        return router.choose(llm.weigh(router.messages(words, before), router.options))
