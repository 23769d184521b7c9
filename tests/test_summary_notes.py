"""Post-call notes without a model: the profile's keys, the JSON shape, the reply's parsing.

A reply that is not the object asked for (prose, a cut object, no summary) is a
:class:`NotesError` whose message says why: the job records it as the summary's failure.
"""

from __future__ import annotations

import json

import pytest

from agent.summary.notes import (
    FIELD_CHARS,
    SUMMARY_CHARS,
    NotesError,
    max_tokens,
    parse,
    request,
    shape,
    transcript,
    wants_notes,
)
from dialplan import ConfigError
from dialplan.config import parse_config
from dialplan.profile import Profile

pytestmark = pytest.mark.unit

EXTRACT = {"caller_name": "the caller's name", "reason": "why they called",
           "callback_number": "the number to call back on"}
PROFILE = Profile(name="p", summary=True, extract=EXTRACT, greeting="Hello, how can I help?")


def profile_of(table: dict) -> Profile:
    return parse_config({"profiles": {"p": table}}).profiles["p"]


def test_summary_and_extract_parse_from_a_profile_table():
    p = profile_of({"summary": True, "extract": EXTRACT, "summary_wait_s": 60})
    assert (p.summary, p.extract, p.summary_wait_s) == (True, EXTRACT, 60.0)
    assert wants_notes(p)
    assert not wants_notes(profile_of({}))
    assert wants_notes(profile_of({"extract": {"reason": "why"}}))  # fields alone


@pytest.mark.parametrize(("table", "message"), [
    ({"summary": "yes"}, "profiles.p.summary: expected bool, got 'yes'"),
    ({"extract": "name"}, "profiles.p.extract: expected a table, got 'name'"),
    ({"extract": {"reason": 3}}, "profiles.p.extract.reason: expected str, got 3"),
    ({"extract": {"Caller Name": "x"}}, "profiles.p.extract.Caller Name: a field name is"),
    ({"extract": {"2nd": "x"}}, "profiles.p.extract.2nd: a field name is"),
    ({"extract": {"reason": "  "}}, "profiles.p.extract.reason: say what the field means"),
    ({"extract": {"summary": "x"}}, "profiles.p.extract.summary: the summary's own name"),
    ({"extract": {"reason": "x" * 201}}, "profiles.p.extract.reason: 201 characters"),
    ({"extract": {f"f{i}": "x" for i in range(13)}}, "profiles.p.extract: 13 fields"),
    ({"summary_wait_s": -1}, "profiles.p.summary_wait_s = -1.0: must be 0 to 86400"),
    ({"summary_wait_s": "soon"}, "profiles.p.summary_wait_s: expected float"),
])
def test_bad_summary_keys_are_config_errors_naming_the_key(table, message):
    with pytest.raises(ConfigError) as e:
        profile_of(table)
    assert str(e.value).startswith(message), str(e.value)


def test_the_shape_is_the_summary_then_the_fields_each_bounded():
    obj = shape(PROFILE)
    assert obj.names == ("summary", "caller_name", "reason", "callback_number")
    schema = obj.schema()
    assert schema["required"] == list(obj.names) and schema["additionalProperties"] is False
    assert schema["properties"]["summary"] == {"type": "string", "minLength": 1,
                                               "maxLength": SUMMARY_CHARS}
    assert schema["properties"]["reason"]["anyOf"][1] == {"type": "null"}
    grammar = obj.gbnf()
    assert grammar.startswith('root ::= fence? "{" ws "\\"summary\\"" ws ":" ws value-summary')
    assert f'value-summary ::= "\\"" char{{1,{SUMMARY_CHARS}}} "\\""\n' in grammar
    assert f'value-callback-number ::= "\\"" char{{1,{FIELD_CHARS}}} "\\"" | "null"' in grammar
    # Room for the longest object the grammar allows: it always closes within max_tokens.
    assert max_tokens(obj) > SUMMARY_CHARS + 3 * FIELD_CHARS
    assert shape(Profile(name="q", extract={"reason": "why"})).names == ("reason",)


def test_the_request_has_the_transcript_and_what_each_key_means():
    turns = [("Hi, this is Ana Ruiz.", "Hello Ana, how can I help?"), ("", ""),
             ("My order never  came.", "")]
    assert transcript(PROFILE.greeting, turns) == [
        "Agent: Hello, how can I help?", "Caller: Hi, this is Ana Ruiz.",
        "Agent: Hello Ana, how can I help?", "Caller: My order never came."]
    system, user = request(PROFILE, turns)
    assert system.role == "system" and "JSON object" in system.content
    assert "Caller: My order never came." in user.content
    assert "- caller_name: the caller's name (null if the call does not say)" in user.content
    assert user.content.index("- summary:") < user.content.index("- callback_number:")


def test_a_long_call_loses_its_middle_to_fit_the_budget():
    turns = [(f"question {i} " + "word " * 40, f"answer {i}") for i in range(30)]
    count = lambda text: len(text.split())  # noqa: E731 - a word a token
    full = request(PROFILE, turns)
    fitted = request(PROFILE, turns, count, budget=600)
    assert sum(count(m.content) + 8 for m in fitted) <= 600
    text = fitted[1].content
    assert "question 0 " in text and "question 29 " in text  # the opening and the end
    assert "(part of the call left out)" in text and "question 15 " not in text
    assert len(text) < len(full[1].content)


def test_a_valid_reply_gives_the_summary_and_the_fields():
    reply = json.dumps({"summary": "Ana Ruiz called about a late order. The agent took a "
                        "message.", "caller_name": "Ana Ruiz", "reason": "a late order",
                        "callback_number": None})
    notes = parse(reply, shape(PROFILE))
    assert notes.summary.startswith("Ana Ruiz called")
    assert notes.fields == {"caller_name": "Ana Ruiz", "reason": "a late order",
                            "callback_number": None}
    assert json.loads(notes.extracted_json()) == notes.fields


def test_a_free_text_reply_is_read_leniently():
    reply = ('Sure! Here are the notes:\n```json\n{"summary": "A caller asked  for hours.",'
             ' "caller_name": "unknown", "reason": "opening hours", "callback_number": '
             '5550142, "extra": "ignored"}\n```')
    notes = parse(reply, shape(PROFILE))
    assert notes.summary == "A caller asked for hours."
    assert notes.fields == {"caller_name": None, "reason": "opening hours",
                            "callback_number": "5550142"}


@pytest.mark.parametrize(("reply", "why"), [
    ("I could not find any details in this call.", "no JSON object in the reply"),
    ('{"summary": "A caller asked about their ord', "the JSON object is cut off"),
    ('{"summary": "A caller", "reason": }', "not valid JSON (Expecting value"),
    ('["summary", "reason"]', "no JSON object in the reply"),
    ('{"summary": null, "reason": "hours"}', "no summary in the reply"),
    ('{"summary": "  ", "reason": "hours"}', "no summary in the reply"),
])
def test_a_malformed_reply_is_an_error_saying_why(reply, why):
    with pytest.raises(NotesError) as e:
        parse(reply, shape(PROFILE))
    assert str(e.value).startswith(why), str(e.value)


def test_fields_without_a_summary_need_no_summary():
    obj = shape(Profile(name="q", extract={"reason": "why"}))
    notes = parse('{"reason": "a refund"}', obj)
    assert notes.summary is None and notes.fields == {"reason": "a refund"}
