"""Look-ups chosen by the model's odds, their arguments written by a real model under a grammar.

The odds come from the default 1.5B (llama-batch, the backend that weighs options and
continues a given opening), the arguments from the under-load Qwen 0.5B. The questions are a
visitor line's, none of them among ``bench lookups``' (on which :data:`routing.CHOOSE` was set).
"""

from __future__ import annotations

import json

import pytest

from agent.turn import routing
from agent.turn.reply_tools import fill_arguments
from agent.turn.routing import (
    LookupRouter,
    arguments_shape,
    labels,
    opening,
    parse_arguments,
    route,
)
from dialplan.options import LLMOptions
from models.llm.base import Message
from models.llm.grammar import odds, spellings
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


@pytest.mark.unit
def test_a_tool_is_chosen_only_with_most_of_the_odds_and_alone_with_them():
    router = LookupRouter("You answer a city's visitor line.", TOOLS)
    assert router.choose({"museum_hours": 0.7, "tide_times": 0.1}) == "museum_hours"
    assert router.choose({"museum_hours": routing.CHOOSE - 0.01, "tide_times": 0.0}) is None
    assert router.choose(None) is None and router.choose({}) is None
    (system, user) = router.messages("When is high tide?")
    assert "- tide_times: High and low tide" in system.content and user.content.endswith("tide?")
    # A follow-up is weighed with the caller's words before it, as if said in one breath.
    (_, user) = router.messages("And on Monday?", "When does the museum open on Sunday?")
    assert user.content == "When does the museum open on Sunday? And on Monday?"


@pytest.mark.unit
def test_names_are_listed_without_the_words_they_all_begin_with():
    assert labels(("get_outage_status", "get_bill_balance")) == {
        "get_outage_status": "outage_status", "get_bill_balance": "bill_balance"}
    assert labels(("get_a_b", "get_a_c")) == {"get_a_b": "b", "get_a_c": "c"}
    assert labels(("get_hours",)) == {"get_hours": "get_hours"}
    assert labels(("showtimes", "seats_left")) == {"showtimes": "showtimes",
                                                   "seats_left": "seats_left"}
    router = LookupRouter("", {"get_outage_status": "cuts", "get_bill_balance": "bills"})
    assert router.options == ["outage_status", "bill_balance"]
    assert router.choose({"outage_status": 0.8, "bill_balance": 0.1}) == "get_outage_status"


@pytest.mark.unit
def test_an_option_s_odds_sum_its_spellings_and_a_shared_token_counts_for_neither():
    assert spellings("bin_day") == ("bin_day", "Bin_day", " bin_day")
    firsts = {"museum_hours": {1, 2}, "membership": {2, 3}, "tide": {4}}
    p = {1: 0.5, 2: 0.2, 3: 0.1, 4: 0.05}
    assert odds(firsts, p) == {"museum_hours": 0.5, "membership": 0.1, "tide": 0.05}


@pytest.fixture(scope="module")
def default_llm():
    return ModelCache().llm(LLMOptions(backend="llama-batch", contexts=1, threads=2,
                                       model="qwen2.5-1.5b-instruct"))


@pytest.mark.model
@pytest.mark.parametrize("words,tool", [
    ("Could you tell me the museum's opening hours on Friday?", "museum_hours"),
    ("Is it high tide at the harbour around noon today?", "tide_times"),
    ("Is there a good pizza place nearby?", None),
    ("Okay, thank you very much, bye.", None),
])
def test_the_default_model_s_odds_choose_the_look_up_the_words_need(default_llm, words, tool):
    router = LookupRouter("You answer a city's visitor line.", TOOLS)
    assert default_llm.weighs
    chances = default_llm.weigh(router.messages(words), router.options)
    assert set(chances) == set(TOOLS) and all(0.0 <= p <= 1.0 for p in chances.values())
    assert router.choose(chances) == tool, chances
    assert route(default_llm, router, words, Cancel()) == tool


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
    assert table is not None and set(table) == {"time", "people"} and "8" in table["time"]
    assert table["people"] == 4 and isinstance(table["people"], int), table  # cast from "4"


def _never() -> Cancel:
    return Cancel()
