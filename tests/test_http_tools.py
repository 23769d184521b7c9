"""HTTP tools end to end: a real HTTP server on loopback, a reply that calls it (fake models).

The server is ``http.server`` in a thread; the turn is a real :class:`~agent.turn.reply.Reply`
on a real scheduler, its LLM scripted (:class:`test_tools.ScriptedLLM`): the first reply calls
``book_status``, the second speaks from its answer. Timeouts are a fraction of a second so the
failures are quick.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fakes import FakeTTS, fake_stages
from replies import answer
from test_tools import ScriptedLLM

from agent.turn.runner import TurnRunner
from agent.turn.tools import tool_response
from dialplan.config import parse_config
from models.llm.base import Message
from models.priority import Cancel

pytestmark = pytest.mark.server

SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
ARGS = {"title": "The Very Hungry Caterpillar"}
CALL = ('<tool_call>\n{"name": "book_status", "arguments": {"title": '
        '"The Very Hungry Caterpillar"}}\n</tool_call>')
ANSWER = {"title": "The Very Hungry Caterpillar", "available": False, "due": "Friday"}
SPOKEN = "That book is out on loan until Friday."
TIMEOUT_S = 0.3


class BookServer:
    """A tool endpoint on 127.0.0.1 that records each request and answers as ``mode`` says.

    Modes: ``ok`` (:data:`ANSWER` as JSON), ``slow`` (the same, after three timeouts), ``500``
    and ``text`` (a body that is not JSON).
    """

    def __init__(self):
        self.mode = "ok"
        self.requests: list[dict] = []
        self.release = threading.Event()  # ends a slow answer's wait (at teardown)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append({"at": time.monotonic(), "path": self.path,
                                        "type": self.headers.get("Content-Type"),
                                        "body": body})
                if server.mode == "slow":
                    server.release.wait(3 * TIMEOUT_S)
                if server.mode == "500":
                    self.send_error(500, "the catalogue is down")
                    return
                out = b"<html>not json</html>" if server.mode == "text" else json.dumps(
                    ANSWER).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                try:
                    self.wfile.write(out)
                except OSError:  # the agent gave up on a slow answer
                    pass

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/book-status"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)  # a quick shutdown
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = BookServer()
    yield s
    s.close()


def runner_for(server: BookServer, replies: list[str]) -> tuple[TurnRunner, ScriptedLLM,
                                                                 FakeTTS]:
    config = parse_config({
        "tools": {"book_status": {"description": "Whether a book is on the shelf or when it is "
                                                 "due back.", "url": server.url,
                                  "parameters": SCHEMA, "timeout_s": TIMEOUT_S}},
        "profiles": {"default": {"tools": ["book_status"]}},
    })
    llm, tts = ScriptedLLM(replies), FakeTTS(s_per_char=0.001)
    return TurnRunner(fake_stages(llm=llm, tts=tts), config.profiles["default"]), llm, tts


def test_the_tool_is_posted_the_arguments_and_its_answer_is_the_second_round(server):
    runner, llm, tts = runner_for(server, [CALL, SPOKEN])
    history: list[Message] = []
    result, _ = answer(runner, history)
    [req] = server.requests
    assert req["path"] == "/book-status" and req["type"] == "application/json"
    assert json.loads(req["body"]) == ARGS
    assert req["body"] == json.dumps(ARGS).encode()
    # The model's second prompt: the call as the model made it, then the answer as the user.
    second = llm.prompts[1]
    assert second[-2] == Message("assistant", "<tool_call>\n" + json.dumps(
        {"name": "book_status", "arguments": ARGS}) + "\n</tool_call>")
    assert second[-1].role == "user"
    assert second[-1].content == tool_response(json.dumps(ANSWER))
    assert "<tool_response>" in second[-1].content
    assert json.loads(second[-1].content.split("\n")[1]) == ANSWER
    assert " ".join(tts.texts) == SPOKEN and result.reply_text == SPOKEN
    [use] = result.tools
    assert (use.name, use.outcome) == ("book_status", "ok") and use.latency_s > 0
    assert json.loads(use.arguments) == ARGS
    assert result.action is None and not result.tool_error
    assert history[0] == Message("user", result.transcript)
    assert history[-1] == Message("assistant", SPOKEN)


@pytest.mark.parametrize(("mode", "outcome"), [
    ("slow", "timeout"), ("500", "http-500"), ("text", "bad-json"),
])
def test_a_failed_tool_says_the_tool_error_phrase_and_asks_the_model_nothing_more(
        server, mode, outcome):
    server.mode = mode
    runner, llm, tts = runner_for(server, [CALL, SPOKEN])
    started = time.monotonic()
    result, _ = answer(runner, [])
    took = time.monotonic() - started
    assert len(server.requests) == 1
    assert tts.texts == [runner.profile.tool_error]
    assert result.reply_text == runner.profile.tool_error
    [use] = result.tools
    assert (use.name, use.outcome) == ("book_status", outcome)
    assert result.tool_error == f"book_status: {outcome}"
    assert len(llm.prompts) == 1  # no second round
    if mode == "slow":
        assert TIMEOUT_S * 0.9 < use.latency_s < 2 * TIMEOUT_S
        assert took < 2.5 * TIMEOUT_S + 1.0  # the caller was not kept for the slow server


def test_a_speculative_turn_calls_the_tool_only_once_its_gate_opens(server):
    runner, llm, _ = runner_for(server, [CALL, SPOKEN])
    gate = threading.Event()
    opened: dict = {}

    def open_gate():
        opened.update(at=time.monotonic(), requests=len(server.requests),
                      asked=len(llm.prompts))
        gate.set()

    timer = threading.Timer(0.4, open_gate)  # the tool call is read in a few tens of ms
    timer.start()
    try:
        result, _ = answer(runner, [], gate=gate)
    finally:
        timer.cancel()
    assert opened["asked"] == 1  # the model had made its call long before
    assert opened["requests"] == 0
    [req] = server.requests
    assert req["at"] >= opened["at"]
    assert result.reply_text == SPOKEN and result.tools[0].outcome == "ok"


def test_a_turn_cancelled_before_its_gate_opens_never_calls_the_tool(server):
    runner, llm, tts = runner_for(server, [CALL, SPOKEN])
    gate, cancel = threading.Event(), Cancel()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    history: list[Message] = []
    try:
        result, _ = answer(runner, history, gate=gate, cancel=cancel)
    finally:
        timer.cancel()
    time.sleep(0.2)  # nothing left to reach the server late
    assert result.cancelled
    assert server.requests == [] and result.tools == []
    assert len(llm.prompts) == 1 and tts.texts == []
    assert history == []


def test_a_tools_answer_may_be_said_beside_a_profiles_facts(server, tmp_path):
    """The checks take the tool's answer as given: its numbers are no invention."""
    facts = tmp_path / "facts.md"
    facts.write_text("# Shop\n## Hours\n- We open at 9 am.\n")
    server.mode = "ok"
    ANSWER["copies"] = 17
    try:
        config = parse_config({
            "tools": {"book_status": {"description": "Whether a book is on the shelf.",
                                      "url": server.url, "parameters": SCHEMA,
                                      "timeout_s": TIMEOUT_S}},
            "profiles": {"default": {"tools": ["book_status"], "knowledge": str(facts)}},
        })
        spoken = "We have 17 copies, all out until Friday."
        llm, tts = ScriptedLLM([CALL, spoken]), FakeTTS(s_per_char=0.001)
        runner = TurnRunner(fake_stages(llm=llm, tts=tts), config.profiles["default"])
        result, _ = answer(runner, [])
    finally:
        del ANSWER["copies"]
    assert result.reply_text == spoken and not result.unfounded
