"""Look-ups the caller's words ask for: the tool chosen by meaning, its arguments by the model.

The small models rarely start a tool call on their own: asked "What time does the museum open
on Sunday?" with an MCP tool that says it knows the museum's hours, the 1.5B answered a time of
its own in words in every wording tried (tests/test_sip_mcp.py; a raw llama.cpp probe of the
first token put ``<tool_call>`` at 0 and a bare ``{"`` at 4-15 %, no higher for the museum's
questions than for a restaurant's). So the choice is made beside the model: the caller's words
and each look-up tool's name and description are sentence vectors (WordLlama, as the
knowledge file's facts are), and a tool whose description is clearly nearest the words is
called. The model still writes the call's arguments, in the Hermes format it was trained on,
from the call's own prompt with the call's opening given (``<tool_call>`` and the name) and the
arguments held to the tool's schema by llama.cpp's grammar (:class:`models.llm.shape.JsonObject`).

Only tools that change nothing are chosen this way (an MCP tool's ``readOnlyHint``, an HTTP
tool's ``read_only``): a wrong choice costs a look-up whose answer the model then does not use,
never an action the caller did not ask for. Everything else stays the model's choice.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from models.llm.shape import Field, JsonObject

FLOOR = 0.6
"""The least cosine between the words and a tool's description to call it (WordLlama L2-256).
Questions about a museum's opening times met its tool's description ("When the city museum
opens and closes on a day of the week.") at 0.64-0.80; a ferry timetable, a restaurant, parking or
the weather under 0.25. A museum's ticket price met it at 0.63: a look-up whose answer the
model then leaves out, the price unknown as before. A miss is left to the model, as without a
router: "When is low tide on Friday?" met a tide tool's "High and low tide times at the harbour
for a date." at 0.54 (tests/test_routing.py)."""
LEAD = 0.1
"""How far the best tool must be above the second (two tools that both fit: the model chooses)."""
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
        tools: name -> description, of the tools that may be chosen this way.
        embed: texts -> unit vectors (:meth:`models.embed.wordllama.Embedder.embed`).
    """

    def __init__(self, tools: dict[str, str], embed: Callable[[list[str]], np.ndarray]):
        self.names = tuple(tools)
        self._embed = embed
        self._vectors = embed([f"{n.replace('_', ' ')}: {d}" for n, d in tools.items()])

    def route(self, words: str) -> str | None:
        """The tool to call for ``words`` (None: the model decides, as without a router)."""
        if not self.names or not words.strip():
            return None
        cos = self._vectors @ self._embed([words])[0]
        order = np.argsort(-cos)
        best = float(cos[order[0]])
        second = float(cos[order[1]]) if len(order) > 1 else -1.0
        if best < FLOOR or best - second < LEAD:
            return None
        return self.names[int(order[0])]
