"""The tool side of a turn's reply: fixed phrases, call control, HTTP and MCP tools' rounds.

A mixin of :class:`agent.turn.reply.Reply`, kept apart so that the reply's stream of words
and speech reads on its own. It uses the reply's state and steps (``result``, ``runner``,
``_ask``, ``_put``, ``_llm_end``, ``_finish``...): it is not a stage and has no state of
its own beyond the reply's. A call the call itself carries out (end, transfer, take a
message, collect digits) ends the reply with its phrase and is handed to the session in
``result.action``; an HTTP or MCP tool runs once the gate is open and its answer goes back to
the model for a second round. An action the caller's words alone ask for is taken before the
model is asked (:mod:`agent.turn.intent`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

from agent.turn.http_tool import ToolFailed, call_http_tool
from agent.turn.intent import (
    farewell,
    leaves_message,
    operator_of,
    promised_transfer,
    requested_transfer,
)
from agent.turn.reply_state import ReplyState
from agent.turn.result import ToolUse
from agent.turn.routing import arguments_shape, opening, parse_arguments, route
from agent.turn.tools import (
    CALL_CONTROL,
    ToolCall,
    ToolCallScanner,
    announcement,
    as_hermes,
    tool_response,
)
from models.llm.base import LLM, Message
from models.priority import Cancellable, JobCancelled, Priority, cancel_on

MAX_TOOL_ROUNDS = 2
"""Tool answers (or "no such tool" notes) fed back to the model in one turn, at most."""
WORDS_REFUSE = ("end_call", "take_message")
"""Tools refused when the caller's words do not ask for them (:meth:`Toolbox.problem`)."""


class ToolSteps:
    """What a :class:`~agent.turn.reply.Reply` does with a tool call or a fixed phrase."""

    def _decided(self, words: str) -> ToolCall | None:
        """An action the caller's words alone ask for (:mod:`agent.turn.intent`).

        A transfer by name, a message: no 2 s of JSON decoding, and no chance of "Sure, I can
        take you there" with nothing done (bench tools).
        """
        names = self.runner.tools.names
        p = self.runner.profile
        target = (requested_transfer(words, p.directory, operator_of(p.keypad))
                  if "transfer" in names else None)
        if target is not None:
            args = {"target": target}
            return ToolCall("transfer", args, raw=as_hermes("transfer", args), source="caller")
        if "take_message" in names and leaves_message(words):
            return ToolCall("take_message", {}, raw=as_hermes("take_message", {}),
                            source="caller")
        return None

    def _route(self) -> None:
        """Ask the model whether the words need a look-up (:mod:`agent.turn.routing`).

        With the caller's words of the turn before: a follow-up names no subject of its own.
        """
        self._to(ReplyState.ASKING)
        self._job("llm", self._timed(route), self.runner.stages.llm, self.runner.router,
                  self.result.transcript, self._cancel, self.runner.said_last(self.history),
                  stage="llm", priority=self.urgency.llm_rank,
                  then=partial(self._or_ask, self._look_up))

    def _or_ask(self, go: Callable[[object], None], f: Future) -> None:
        """A routing job's answer to ``go`` on with; None: the model is asked as usual."""
        out = self._outcome(f, self._llm_end)
        if out is None:
            return
        value, _ = out
        if self.cancelled:
            self._llm_end()
        elif value is None:
            self._ask(self.result.transcript)
        else:
            go(value)

    def _look_up(self, name: str) -> None:
        """Call the look-up tool the caller's words chose (:mod:`agent.turn.routing`).

        The model writes only its arguments, on the turn's own prompt (cached: the call's
        history), the call's opening given and the arguments held to the tool's schema. If
        they do not come out right the model is asked as usual, and chooses for itself.
        """
        words = self.result.transcript
        params = self.runner.tools.parameters(name)
        shape = arguments_shape(params)
        if shape is None and (params.get("properties") or {}):
            self._ask(words)  # nested or listed arguments: the model writes the whole call
            return
        if shape is None:
            self._routed(name, {})
            return
        prompt = self.runner.prompt(self.history, words)
        self._job("llm", self._timed(fill_arguments), self.runner.stages.llm, prompt, name,
                  params, self._cancel, stage="llm", priority=self.urgency.llm_rank,
                  then=partial(self._or_ask, partial(self._routed, name)))

    def _routed(self, name: str, args: dict) -> None:
        self._tool(ToolCall(name, args, raw=as_hermes(name, args), source="words"))

    def _hold(self) -> None:
        """The caller asked the agent to wait: ``hold_ack`` at once, from the cache, no model.

        The session then keeps quiet for them (``result.hold``, ``limits.hold_s``).
        """
        self._to(ReplyState.SPEAKING)
        self.t.llm_first_token_at = self._now()
        self.result.hold, self.result.reply_text = True, self.runner.profile.hold_ack
        self._announce(self.runner.profile.hold_ack,
                       priority=(Priority.FIRST_AUDIO, self.t.speech_end_at or 0.0))

    def _implied(self, said: str) -> ToolCall | None:
        """The call action a reply with no tool call promised: what it said, it does.

        A goodbye hangs up; "I'll transfer you now" to a directory entry transfers.
        """
        names = self.runner.tools.names
        if "end_call" in names and farewell(said, self.result.transcript):
            return ToolCall("end_call", implicit=True)
        if "transfer" in names:
            p = self.runner.profile
            target = promised_transfer(said, p.directory, p.keypad)
            if target is not None:
                return ToolCall("transfer", {"target": target}, implicit=True)
        return None

    def _ask_plain(self) -> None:
        """Ask the model again without the tools block (its stream already closed)."""
        self._plain, self._scanner = True, ToolCallScanner()
        self._ask(self.result.transcript)

    def _announce(self, text: str, priority=None) -> None:
        """Say a fixed phrase (a tool's announcement, ``repeat``) from the profile's cache."""
        if not text:
            return
        if self.t.first_chunk_text_at is None:
            self.t.first_chunk_text_at = self._now()
        self._said.append(text)
        self._job("tts", self._timed(self.runner.speak), text, stage="tts",
                  priority=priority or self.urgency.tts_rank, then=partial(self._announced, text))

    def _announced(self, clause: str, f: Future) -> None:
        out = self._outcome(f, self._finish)
        if out is None:
            return
        pcm, at = out
        if self.t.tts_first_audio_at is None and len(pcm):
            self.t.tts_first_audio_at = at
        self._out(pcm, clause)
        self._finish()

    def _tool(self, call: ToolCall) -> None:
        self._close_stream()
        problem = self.runner.tools.problem(call, self.result.transcript)
        if problem:
            self._used(call, "invalid", 0.0, problem)
            if call.name in WORDS_REFUSE and not self._said and not self._plain:
                # A hang-up or a message the caller's words did not ask for ("What time do you
                # open on Saturday?" -> end_call): told so, the 1.5B called a tool again or
                # said nothing (bench answers); asked without the tools, it answers.
                self._ask_plain()
                return
            if len(self._rounds) // 2 < MAX_TOOL_ROUNDS:
                self._answered(call, json_error(problem))
            else:
                self._llm_end()
            return
        if call.name in CALL_CONTROL:
            self.result.action = call
            self._announce(announcement(call, self.runner.profile))
            self._llm_end()
            return
        self._tool_call = call
        self._to(ReplyState.TOOL_HELD)
        if self.gate_open:
            self._run_tool()

    def _run_tool(self) -> None:
        call, self._tool_call = self._tool_call, None
        self._to(ReplyState.TOOL)
        self._tool_since = self._now()
        tools = self.runner.tools
        if call.name in tools.mcp:
            run, tool, stage = self.runner.stages.mcp.call, tools.mcp[call.name], "mcp"
        else:
            run, tool, stage = call_http_tool, tools.http[call.name], "http"
        self._job("tool", run, tool, call.arguments, stage=stage, priority=self.urgency.llm_rank,
                  then=partial(self._tool_done, call))

    def _tool_done(self, call: ToolCall, f: Future) -> None:
        took = self._now() - self._tool_since
        try:
            content = f.result()
        except JobCancelled:  # the caller barged in or left before it ran: still a row
            self._used(call, "cancelled", took, "not run: the turn was cancelled first")
            self._llm_end()
            return
        except ToolFailed as e:
            self._tool_failed(call, e.outcome, e.detail, took)
            return
        except Exception as e:  # noqa: BLE001 - a tool's bug is the tool's failure
            self._tool_failed(call, "error", repr(e), took)
            return
        self._used(call, "ok", took, content[:200])
        if self.cancelled:
            self._llm_end()
            return
        self._answered(call, content)

    def _tool_failed(self, call: ToolCall, outcome: str, detail: str, took: float) -> None:
        self._used(call, outcome, took, detail)
        self.result.tool_error = f"{call.name}: {outcome}"
        self._put(self.runner.profile.tool_error)
        self._llm_end()

    def _answered(self, call: ToolCall, content: str) -> None:
        """Feed the tool's answer back: the model's second round is the spoken reply."""
        self._rounds += [Message("assistant", call.raw), Message("user", tool_response(content))]
        self._scanner = ToolCallScanner()
        self._ask(self.result.transcript)

    def _used(self, call: ToolCall, outcome: str, took: float, detail: str = "") -> None:
        self.result.tools.append(ToolUse(call.name, call.arguments_json, outcome, took, detail,
                                         "words" if call.source == "words" else "llm"))


def fill_arguments(llm: LLM, prompt: list[Message], name: str, parameters: dict,
                   cancel: Cancellable) -> dict | None:
    """A look-up's arguments as the model writes them after ``<tool_call>`` and the name.

    A job of the call: the stream is read to its end here. None where they do not parse.
    """
    shape = arguments_shape(parameters)
    with cancel_on(cancel):
        stream = llm.complete(prompt, 8 + len(shape.fields) * 24, shape, opening=opening(name))
    try:
        text = "".join(stream)
    finally:
        stream.close()
    return parse_arguments(text, parameters)


def json_error(problem: str) -> str:
    """A tool's refusal as the JSON the model reads back."""
    return json.dumps({"error": problem})
