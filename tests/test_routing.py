"""Look-ups chosen by the caller's words, their arguments written by a real model under a grammar.

The router runs on the bundled WordLlama vectors; the arguments on the under-load Qwen 0.5B
(llama-batch, the backend that continues a given opening). The questions are a visitor line's,
not any shipped persona's, and none of them was used to pick :data:`routing.FLOOR`'s value
besides the museum's first two (its docstring's).
"""

from __future__ import annotations

import json

import pytest

from agent.turn import routing
from agent.turn.reply_tools import fill_arguments
from agent.turn.routing import LookupRouter, arguments_shape, opening, parse_arguments
from dialplan.options import LLMOptions
from models.embed.wordllama import embedder
from models.llm.base import Message
from models.priority import Cancel
from models.registry import ModelCache

HOURS = {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
TABLE = {"type": "object", "properties": {"time": {"type": "string"},
                                          "people": {"type": "integer"}},
         "required": ["time"]}
TOOLS = {"museum_hours": "When the city museum opens and closes on a day of the week.",
         "tide_times": "High and low tide times at the harbour for a date."}


@pytest.mark.unit
def test_a_flat_schema_is_a_shape_of_string_fields_nullable_where_not_required():
    shape = arguments_shape(TABLE)
    assert shape.names == ("time", "people")
    assert [f.nullable for f in shape.fields] == [False, True]
    assert arguments_shape({"type": "object", "properties": {}}) is None
    nested = {"type": "object", "properties": {"when": {"type": "object"}}}
    assert arguments_shape(nested) is None
    assert arguments_shape({"properties": {"Day": {"type": "string"}}}) is None


@pytest.mark.unit
def test_arguments_are_cast_to_the_schema_and_nulls_left_to_the_tool():
    assert parse_arguments('{"time": "19:30", "people": "4"}', TABLE) == {
        "time": "19:30", "people": 4}
    assert parse_arguments('{"time": "19:30", "people": null}', TABLE) == {"time": "19:30"}
    assert parse_arguments('```json\n{"time": "8 pm"}\n```', TABLE) == {"time": "8 pm"}
    assert parse_arguments('{"time": null}', TABLE) is None  # required, missing
    assert parse_arguments('{"time": "8", "people": "four"}', TABLE) is None
    assert parse_arguments("not json", TABLE) is None
    written = opening("museum_hours").removeprefix("<tool_call>\n") + '{"day": "Sunday"}}'
    assert json.loads(written) == {"name": "museum_hours", "arguments": {"day": "Sunday"}}


@pytest.fixture(scope="module")
def router():
    return LookupRouter(TOOLS, embedder().embed)


@pytest.mark.model
@pytest.mark.parametrize("words,tool", [
    ("When does the museum close on Monday?", "museum_hours"),
    ("Is the museum open on Saturday morning?", "museum_hours"),
    ("What time is high tide at the harbour tomorrow?", "tide_times"),
    ("Tide times for Saturday please", "tide_times"),
    ("Can you recommend a restaurant?", None),
    ("Where can I park near the station?", None),
    ("Thanks, goodbye.", None),
    ("", None),
])
def test_the_words_choose_a_look_up_only_when_one_description_is_clearly_nearest(
        router, words, tool):
    assert router.route(words) == tool


@pytest.mark.model
def test_two_tools_that_fit_alike_leave_the_choice_to_the_model():
    twins = LookupRouter({"museum_hours": TOOLS["museum_hours"],
                          "museum_times": "The city museum's opening and closing times on a "
                                          "day of the week."}, embedder().embed)
    assert twins.route("When does the museum open on Sunday?") is None
    assert routing.LEAD > 0


@pytest.fixture(scope="module")
def llm():
    return ModelCache().llm(LLMOptions(backend="llama-batch", contexts=1, threads=2,
                                       model="qwen2.5-coder-0.5b-instruct-iq4_nl"))


def prompt(words: str) -> list[Message]:
    tools = "\n".join(json.dumps({"type": "function", "function": {
        "name": n, "description": d, "parameters": p}})
        for n, d, p in (("museum_hours", TOOLS["museum_hours"], HOURS),
                        ("table_free", "Whether a table is free at a time today.", TABLE)))
    return [Message("system", "You answer a city's visitor line.\n\n# Tools\n\n<tools>\n"
                              f"{tools}\n</tools>"),
            Message("user", words)]


@pytest.mark.model
def test_the_model_writes_the_arguments_after_the_given_opening_held_to_the_schema(llm):
    assert llm.continues
    args = fill_arguments(llm, prompt("What time does the museum open on Sunday?"),
                          "museum_hours", HOURS, _never())
    assert args is not None and args["day"].lower().startswith("sun"), args
    table = fill_arguments(llm, prompt("Is there a table for four people at 8 pm tonight?"),
                           "table_free", TABLE, _never())
    assert table is not None and set(table) <= {"time", "people"} and "8" in table["time"]
    assert table.get("people", 4) == 4 and isinstance(table.get("people", 4), int), table


def _never() -> Cancel:
    return Cancel()
