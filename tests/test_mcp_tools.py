"""MCP tools: a real MCP server (``tests/mcp_server.py``) as a process, over stdio and HTTP.

The hub's session is the agent's own (:class:`~agent.turn.mcp_tool.McpHub`); the server is the
``mcp`` SDK's, run by ``python tests/mcp_server.py``. The reply-level test drives a real
:class:`~agent.turn.reply.Reply` on a real scheduler with a scripted LLM, as
``test_http_tools`` does for HTTP tools: the first reply calls the MCP tool, the second speaks
from its answer. A spoken request on a real call is ``test_sip_mcp``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fakes import FakeTTS, fake_stages
from replies import answer
from test_tools import ScriptedLLM

from agent.turn.http_tool import ToolFailed
from agent.turn.mcp_tool import McpHub, McpTool, lean_schema
from agent.turn.runner import TurnRunner
from agent.turn.tools import ANSWER_OR_LOOK_UP, tool_response
from dialplan.config import ConfigError, parse_config
from dialplan.profile import McpServer
from models.llm.base import Message
from testkit.agentproc import free_port
from tests.mcp_server import CLOSES, OPENS
from tests.waiting import wait_until

SERVER = str(Path(__file__).with_name("mcp_server.py"))
STDIO = McpServer(mcp=(sys.executable, SERVER), timeout_s=8.0)
"""The test server over stdio; 8 s: a reconnection starts a Python process (1-2 s here)."""
HOURS = json.dumps({"day": "Saturday", "opens": OPENS, "closes": CLOSES})
CALL = ('<tool_call>\n{"name": "museum_hours", "arguments": {"day": "Saturday"}}\n'
        "</tool_call>")
SATURDAY = {"day": "Saturday"}
SPOKEN = f"On Saturday the museum opens at {OPENS}."


@pytest.fixture
def hub():
    h = McpHub()
    yield h
    h.close()


def tools_of(hub: McpHub, server: McpServer = STDIO, name: str = "city") -> dict[str, McpTool]:
    return {t.name: t for t in hub.tools(name, server)}


def outcome(hub: McpHub, tool: McpTool, arguments: dict) -> tuple[str, str, float]:
    """(outcome, text, seconds): ``ok`` and the answer, or the failure's outcome and detail."""
    t0 = time.monotonic()
    try:
        text, out = hub.call(tool, arguments), "ok"
    except ToolFailed as e:
        text, out = e.detail, e.outcome
    return out, text, time.monotonic() - t0


# ---- config and schemas: nothing started ------------------------------------------------------


@pytest.mark.unit
def test_a_tools_table_with_mcp_is_a_server_as_a_command_or_a_url():
    config = parse_config({
        "tools": {"city": {"mcp": ["python", "city.py"], "timeout_s": 2},
                  "remote": {"mcp": "http://127.0.0.1:8000/mcp", "include": ["museum_hours"]},
                  "hours": {"description": "Opening hours.", "url": "http://127.0.0.1:9/h"}},
        "profiles": {"default": {"tools": ["end_call", "city", "remote", "hours"]}}})
    p = config.profiles["default"]
    assert p.mcp_servers == {"city": McpServer(("python", "city.py"), timeout_s=2.0),
                             "remote": McpServer(("http://127.0.0.1:8000/mcp",),
                                                 include=("museum_hours",))}
    assert list(p.http_tools) == ["hours"]
    assert p.mcp_servers["city"].url == "" and p.mcp_servers["remote"].url.endswith("/mcp")


@pytest.mark.unit
@pytest.mark.parametrize(("table", "message"), [
    ({"mcp": 3}, "tools.city.mcp: expected a command list"),
    ({"mcp": []}, "tools.city.mcp = []: expected a command list"),
    ({"mcp": ["http://a/mcp", "x"]}, "a URL is given alone"),
    ({"mcp": ["python"], "timeout_s": 0}, "tools.city.timeout_s = 0.0: must be more than 0"),
    ({"mcp": ["python"], "url": "http://a"}, "unknown key 'tools.city.url'"),
])
def test_a_bad_mcp_table_fails_at_load_naming_its_key(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_config({"tools": {"city": table}})


@pytest.mark.unit
def test_the_schema_loses_its_titles_but_keeps_a_property_named_title():
    schema = {"type": "object", "title": "lookupArguments", "properties": {
        "title": {"title": "Title", "type": "string"},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "When"}},
        "required": ["title"]}
    assert lean_schema(schema) == {"type": "object", "properties": {
        "title": {"type": "string"},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["title"]}
    assert lean_schema({}) == {"type": "object", "properties": {}}


# ---- a server over stdio ----------------------------------------------------------------------


@pytest.mark.server
def test_the_servers_tools_are_listed_once_with_their_schemas(hub):
    tools = tools_of(hub)
    assert set(tools) == {"museum_hours", "table_free", "slow", "broken", "crash",
                          "process_id"}
    table = tools["table_free"]
    assert table.server == "city" and table.timeout_s == STDIO.timeout_s
    assert table.description == "Whether a table is free at a time today, for a number of people."
    assert table.parameters == {"type": "object", "properties": {
        "time": {"type": "string"}, "people": {"default": 2, "type": "integer"}},
        "required": ["time"]}
    assert hub.tools("city", STDIO) is hub.tools("city", STDIO)  # listed once


@pytest.mark.server
def test_include_offers_only_the_tools_it_names(hub):
    only = McpServer(mcp=STDIO.mcp, include=("museum_hours", "no_such_tool"))
    assert list(tools_of(hub, only)) == ["museum_hours"]


@pytest.mark.server
def test_calls_answer_with_the_tools_text_and_fail_with_the_call_logs_outcomes(hub):
    tools = tools_of(hub)
    assert outcome(hub, tools["museum_hours"], SATURDAY)[:2] == ("ok", HOURS)
    assert outcome(hub, tools["table_free"], {"time": "8 pm", "people": 4})[:2] == (
        "ok", "A table for 4 is free at 8 pm.")
    out, text, _ = outcome(hub, tools["broken"], {})
    assert out == "tool-error" and "the booking system is down" in text
    out, text, _ = outcome(hub, tools["table_free"], {"people": "many"})  # no time, not a number
    assert out == "tool-error" and "time" in text
    gone = McpTool("city", "no_such_tool", "", timeout_s=2.0)
    assert outcome(hub, gone, {})[0] == "tool-error"
    # The session is still good after each of those.
    assert outcome(hub, tools["museum_hours"], SATURDAY)[0] == "ok"


@pytest.mark.server
def test_a_slow_tool_times_out_at_its_timeout_and_the_session_goes_on(hub):
    server = McpServer(mcp=STDIO.mcp, timeout_s=0.5)
    tools = tools_of(hub, server)
    out, text, took = outcome(hub, tools["slow"], {"seconds": 5})
    assert (out, text) == ("timeout", "no answer in 0.5 s")
    assert 0.45 < took < 1.0
    assert outcome(hub, tools["museum_hours"], SATURDAY)[:2] == ("ok", HOURS)


@pytest.mark.server
def test_a_server_that_dies_in_a_call_is_unreachable_then_reconnected(hub):
    tools = tools_of(hub)
    first = outcome(hub, tools["process_id"], {})
    out, _, took = outcome(hub, tools["crash"], {})
    assert out == "unreachable" and took < 2.0  # the pipe closed: no waiting out the timeout
    out, pid, _ = outcome(hub, tools["process_id"], {})  # a new process, the same tool list
    assert out == "ok" and pid != first[1]
    assert set(tools_of(hub)) == set(tools)


@pytest.mark.server
def test_a_server_killed_while_idle_is_reopened_before_the_next_call(hub):
    tools = tools_of(hub)
    _, pid, _ = outcome(hub, tools["process_id"], {})
    os.kill(int(pid), signal.SIGKILL)
    time.sleep(0.5)  # the session sees its pipe close
    out, text, _ = outcome(hub, tools["museum_hours"], SATURDAY)
    assert (out, text) == ("ok", HOURS)  # not failed: nothing had been sent
    assert outcome(hub, tools["process_id"], {})[1] != pid


@pytest.mark.server
def test_a_command_that_is_no_mcp_server_offers_no_tools_and_does_not_hang(hub):
    server = McpServer(mcp=(sys.executable, "-c", "import sys; sys.stdin.read()"),
                       connect_timeout_s=1.0)
    t0 = time.monotonic()
    assert hub.tools("mute", server) == ()
    assert time.monotonic() - t0 < 3.0
    assert hub.tools("mute", server) == ()  # no second wait


# ---- a server over streamable HTTP ------------------------------------------------------------


def http_server(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.server
def test_an_http_server_that_starts_late_is_listed_in_the_background_and_called(hub):
    port = free_port()
    server = McpServer(mcp=(f"http://127.0.0.1:{port}/mcp",), timeout_s=3.0,
                       connect_timeout_s=0.5)
    assert hub.tools("remote", server) == ()  # not up yet: no tools, the start goes on
    proc = http_server(port)
    try:
        assert wait_until(lambda: hub.tools("remote", server), timeout=30)
        tools = tools_of(hub, server, "remote")
        assert outcome(hub, tools["museum_hours"], SATURDAY)[:2] == ("ok", HOURS)
        out, _, took = outcome(hub, tools["slow"], {"seconds": 10})
        assert out == "timeout" and took < 4.5
        proc.kill()
        proc.wait()
        out, _, took = outcome(hub, tools["museum_hours"], SATURDAY)
        assert out == "unreachable" and took < 4.5
        proc = http_server(port)
        assert wait_until(lambda: outcome(hub, tools["museum_hours"], SATURDAY)[0] == "ok",
                          timeout=30)
    finally:
        proc.kill()
        proc.wait()


# ---- a reply that calls one -------------------------------------------------------------------


@pytest.mark.server
def test_a_reply_calls_the_mcp_tool_off_its_loop_and_speaks_from_its_answer(hub):
    config = parse_config({
        "tools": {"city": {"mcp": list(STDIO.mcp), "include": ["museum_hours"]}},
        "profiles": {"default": {"tools": ["end_call", "city"]}}})
    llm, tts = ScriptedLLM([CALL, SPOKEN]), FakeTTS(s_per_char=0.001)
    stages = fake_stages(llm=llm, tts=tts)
    stages.mcp = hub
    runner = TurnRunner(stages, config.profiles["default"])
    assert runner.tools.names == ("end_call", "museum_hours")
    ran_on: list[str] = []
    call_tool = hub.call

    def call_recorded(tool, arguments):
        ran_on.append(threading.current_thread().name)
        return call_tool(tool, arguments)

    hub.call = call_recorded
    assert ('{"type": "function", "function": {"name": "museum_hours", "description": "When the '
            'city museum opens and closes on a day of the week.", "parameters": {"type": '
            '"object", "properties": {"day": {"type": "string"}}, "required": ["day"]}}}'
            ) in runner.system_prompt
    assert runner.system_prompt.endswith(ANSWER_OR_LOOK_UP)
    history: list[Message] = []
    result, _ = answer(runner, history)
    second = llm.prompts[1]
    assert second[-2] == Message("assistant", CALL)
    assert second[-1] == Message("user", tool_response(HOURS))
    assert " ".join(tts.texts) == SPOKEN and result.reply_text == SPOKEN
    [use] = result.tools
    assert (use.name, use.arguments, use.outcome) == ("museum_hours", '{"day": "Saturday"}', "ok")
    assert use.detail == HOURS and use.latency_s > 0
    assert len(ran_on) == 1 and ran_on[0].startswith("model-")  # a worker, not the loop


@pytest.mark.server
def test_a_failed_mcp_tool_says_the_tool_error_phrase(hub):
    config = parse_config({
        "tools": {"city": {"mcp": list(STDIO.mcp), "include": ["broken"]}},
        "profiles": {"default": {"tools": ["city"]}}})
    llm, tts = ScriptedLLM([CALL.replace("museum_hours", "broken"), SPOKEN]), FakeTTS()
    stages = fake_stages(llm=llm, tts=tts)
    stages.mcp = hub
    runner = TurnRunner(stages, config.profiles["default"])
    result, _ = answer(runner, [])
    assert tts.texts == [runner.profile.tool_error] and len(llm.prompts) == 1
    [use] = result.tools
    assert (use.name, use.outcome) == ("broken", "tool-error")
    assert result.tool_error == "broken: tool-error"


@pytest.mark.unit
def test_a_profile_naming_an_mcp_server_needs_the_hub():
    config = parse_config({"tools": {"city": {"mcp": ["python", "k.py"]}},
                           "profiles": {"default": {"tools": ["city"]}}})
    with pytest.raises(ValueError, match="tools.city is an MCP server"):
        TurnRunner(fake_stages(), config.profiles["default"])
