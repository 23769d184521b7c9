"""The post-call job's request to real models: held to the JSON object by llama.cpp's grammar.

SmolLM2-135M (bundled) on both llama.cpp backends: whatever the small model makes of the
call, the reply is the object asked for, every field there and bounded, and the job's outcome
is ``done``. The default model's accuracy on known facts is ``bench summary``'s. The OpenAI
backend's request is checked against an HTTP fake: it sends the shape as ``response_format``.
"""

from __future__ import annotations

import json
import time

import pytest

from agent.summary.job import make_notes
from agent.summary.notes import FIELD_CHARS, SUMMARY_CHARS, request, shape
from dialplan.options import LLMOptions
from dialplan.profile import Profile
from models.llm.base import Message
from models.priority import Priority, priority
from models.registry import ModelCache
from tests.llm_server import FakeServer

EXTRACT = {"caller_name": "the caller's name", "reason": "why the caller called",
           "callback_number": "the phone number the caller asked to be called back on"}
PROFILE = Profile(name="p", summary=True, extract=EXTRACT, greeting="Hello, how can I help?")
TURNS = (("Hi, my name is Maria Lopez. My card was charged twice for one order.",
          "Sorry to hear that. I can ask the accounts team to call you back."),
         ("Yes please, call me back on 555-0142.", "Thank you, they will call you on "
                                                  "555-0142."))


@pytest.fixture(scope="module", params=["llama-batch", "llama-cpp"])
def llm(request):
    return ModelCache().llm(LLMOptions(backend=request.param, model="smollm2-135m",
                                       contexts=2, threads=2))


@pytest.mark.model
def test_the_reply_is_the_object_asked_for_and_the_job_is_done(llm):
    started = time.monotonic()
    with priority(Priority.BACKGROUND):
        outcome = make_notes(llm, PROFILE, TURNS, alone=lambda: True)
    took = time.monotonic() - started
    assert outcome.state == "done", (outcome.detail, outcome.text)
    text = outcome.text.strip()
    start, end = text.index("{"), text.rindex("}") + 1
    assert text[:start] in ("", "```\n", "```json\n") and text[end:] in ("", "\n```")
    data = json.loads(text[start:end])  # the object, at most in a code fence
    assert list(data) == ["summary", *EXTRACT]
    assert isinstance(data["summary"], str) and 0 < len(data["summary"]) <= SUMMARY_CHARS
    for name in EXTRACT:
        assert data[name] is None or 0 < len(data[name]) <= FIELD_CHARS
    assert outcome.notes.summary == " ".join(data["summary"].split())
    assert list(outcome.notes.fields) == list(EXTRACT)
    assert 0 < outcome.tokens and outcome.seconds <= took
    print(f"{llm.model_name} {type(llm).__name__}: {outcome.tokens} tokens in "
          f"{outcome.seconds:.1f} s: {outcome.text}")


@pytest.mark.model
def test_a_one_off_reply_keeps_no_call_from_its_context(llm):
    # The same request twice (the second from the cache) is the object both times.
    obj = shape(Profile(name="q", extract={"reason": "why the caller called"}))
    messages = request(Profile(name="q", extract={"reason": "why the caller called"}), TURNS)
    for _ in range(2):
        reply = "".join(llm.complete(messages, 48, obj))
        assert json.loads(reply.strip("`\njson")).keys() == {"reason"}, reply
    # And a turn's reply after it is a turn's (the options' sampling and length).
    reply = llm.stream([Message("system", "Answer briefly."), Message("user", "Hello")])
    assert "".join(reply).strip() and reply.metrics.tokens <= llm.options.max_tokens


@pytest.mark.server  # an HTTP fake on a loopback port
def test_the_openai_backend_sends_the_shape_as_response_format():
    fake = FakeServer("ok", words=('{"reason": "a double charge"}',))
    try:
        llm = ModelCache().llm(LLMOptions(backend="openai", model="m", base_url=fake.url,
                                          temperature=0.7, max_tokens=20))
        profile = Profile(name="q", extract={"reason": "why the caller called"})
        outcome = make_notes(llm, profile, TURNS)
    finally:
        fake.close()
    assert outcome.state == "done" and outcome.notes.fields == {"reason": "a double charge"}
    ((_, body),) = fake.requests
    assert body["temperature"] == 0.0 and body["max_tokens"] > 20  # the object's, not a turn's
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == shape(
        profile).schema()
