"""What a profile's LLM may do besides talk: the tools it is offered and how a call is read.

The tools are described to the model in its system prompt in the Hermes format the bundled
Qwen 2.5 models were trained on (``<tools>`` JSON signatures, ``<tool_call>`` JSON answers),
written into the prompt text itself so that every backend (and any chat template) sends the
same tokens, and the prompt stays one cached prefix. The small models do not always keep to
that format (``bench tools``): a reply that opens with ``<tool_call>``, ``<tools>``, a
code fence or a bare JSON object naming a tool is a call, held back from TTS from its first
character (:class:`ToolCallScanner`), so the caller never hears half of one.

The rules beside the model (a goodbye ends the call, a request by name transfers) are in
:mod:`agent.turn.intent`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from agent import log
from agent.turn.intent import asks_for_message, took_leave
from agent.turn.mcp_tool import McpHub, McpTool
from dialplan.profile import BUILTIN_TOOLS, HttpTool, Profile

CALL_CONTROL = ("end_call", "transfer", "take_message", "collect_digits", "send_digits")
"""Tools the call itself carries out once their phrase is heard (the others run in the turn)."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model made."""

    name: str
    arguments: dict = field(default_factory=dict)
    raw: str = ""
    """The model's text for it, as it goes back into the history."""
    implicit: bool = False
    """Not called by the model: read from what it said (:func:`agent.turn.intent.farewell`)."""
    source: str = "llm"
    """Who chose it: ``llm``, or ``caller`` (their words named it:
    :func:`agent.turn.intent.requested_transfer`)."""

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True)


def spoken_name(name: str) -> str:
    """A directory name as said aloud: ``front-desk`` -> ``the front desk``."""
    words = name.replace("-", " ").replace("_", " ").strip()
    return words if words.lower().startswith("the ") else f"the {words}"


ANSWER_IN_WORDS = ("Answer the caller's questions in words, from the facts you are given. Call a "
                   "function only to act on the call, and never mention the functions to the "
                   "caller.")
"""Ends the tools block: without it the small models answered a question about a fact by
describing a function call ("you can call the take_message function"; bench answers)."""
ANSWER_OR_LOOK_UP = ("Answer the caller's questions in words, from the facts you are given or "
                     "from what a function answers. Call a function to act on the call, or to "
                     "look up what its description says it knows, and never mention the "
                     "functions to the caller.")
"""Ends it instead where a tool looks things up (an HTTP or MCP tool): "only to act on the
call" kept the model from calling one."""


class Toolbox:
    """The tools one profile offers, their prompt text, and the checks on a call.

    Args:
        profile: its ``tools``, ``directory``, ``http_tools`` and ``mcp_servers``.
        mcp: the process's MCP sessions, which list each MCP server's tools (needed when the
            profile names one).
    """

    def __init__(self, profile: Profile, mcp: McpHub | None = None):
        self.profile = profile
        self.http: dict[str, HttpTool] = {
            n: profile.http_tools[n] for n in profile.tools
            if n not in BUILTIN_TOOLS and n in profile.http_tools}
        self.mcp: dict[str, McpTool] = {}
        """The MCP servers' tools by name, as their servers listed them."""
        names: list[str] = []
        for n in profile.tools:
            if n not in profile.mcp_servers:
                names.append(n)
                continue
            if mcp is None:
                raise ValueError(f"tools.{n} is an MCP server, and this command connects none")
            for tool in mcp.tools(n, profile.mcp_servers[n]):
                if tool.name in names or tool.name in profile.tools:
                    log.event("mcp-tool-skipped", tool=n, name=tool.name, level=logging.WARNING,
                              why="another tool of the profile has its name")
                    continue
                names.append(tool.name)
                self.mcp[tool.name] = tool
        self.names = tuple(names)

    def __bool__(self) -> bool:
        return bool(self.names)

    def lookups(self) -> dict[str, str]:
        """The tools that only look something up, name -> description (chosen by the words)."""
        found = {n: t.description for n, t in self.mcp.items() if t.read_only}
        found.update({n: t.description for n, t in self.http.items() if t.read_only})
        return {n: found[n] for n in self.names if n in found}

    def parameters(self, name: str) -> dict:
        """An HTTP or MCP tool's arguments' JSON schema."""
        tool = self.http.get(name) or self.mcp[name]
        return tool.parameters

    def specs(self) -> list[dict]:
        """The tools as OpenAI/Hermes function signatures."""
        return [self._spec(n) for n in self.names]

    def _spec(self, name: str) -> dict:
        if name in self.http or name in self.mcp:
            tool = self.http.get(name) or self.mcp[name]
            return _fn(name, tool.description, tool.parameters)
        if name == "end_call":
            return _fn(name, "Hang up. Use it when the caller says goodbye or has nothing more "
                             "to ask.")
        if name == "transfer":
            entries = self.profile.directory
            about = "; ".join(f"{k}: {e.description}" if e.description else k
                              for k, e in entries.items())
            return _fn(name, "Transfer the caller to a person or department. Use it when the "
                             "caller asks for a person or department, or for something only "
                             "staff can do.",
                       {"type": "object", "properties": {"target": {
                           "type": "string", "enum": list(entries), "description": about}},
                        "required": ["target"]})
        if name == "take_message":
            return _fn(name, "Take a message for the staff: the caller's next words are "
                             "recorded and passed on.")
        if name == "collect_digits":
            return _fn(name, "Ask the caller to type a number on their keypad (an account, "
                             "card or order number); the digits come back as their next words.",
                       {"type": "object", "properties": {"prompt": {
                           "type": "string", "description": "what to ask them to type"}}})
        if name == "send_digits":
            return _fn(name, "Press keys on the phone's keypad (a menu of the called system, an "
                             "extension number).",
                       {"type": "object", "properties": {"digits": {
                           "type": "string", "description": "the keys: 0-9, * and #"}},
                        "required": ["digits"]})
        raise KeyError(name)

    def system_prompt(self, base: str) -> str:
        """``base`` with the tools block appended (Qwen 2.5's own template text)."""
        if not self.names:
            return base
        sigs = "".join("\n" + json.dumps(s) for s in self.specs())
        return (f"{base}\n\n# Tools\n\nYou may call one or more functions to assist with the "
                "user query.\n\nYou are provided with function signatures within "
                f"<tools></tools> XML tags:\n<tools>{sigs}\n</tools>\n\nFor each function "
                "call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                "\"arguments\": <args-json-object>}\n</tool_call>\n\n"
                + (ANSWER_OR_LOOK_UP if self.http or self.mcp else ANSWER_IN_WORDS))

    def problem(self, call: ToolCall, words: str = "") -> str:
        """Why ``call`` cannot be carried out ("" if it can), said back to the model.

        ``words``: what the caller said this turn.
        """
        if call.name not in self.names:
            return f"unknown tool {call.name!r}; the tools are: {', '.join(self.names)}"
        if call.name == "end_call" and not took_leave(words):
            return "the caller did not take leave: answer them instead of hanging up"
        if call.name == "take_message" and not asks_for_message(words):
            return "the caller did not ask to leave a message: answer their question instead"
        if call.name == "transfer":
            target = target_of(call, self.profile)
            if target is None:
                return (f"unknown target {call.arguments.get('target')!r}; the directory has: "
                        f"{', '.join(self.profile.directory)}")
        if call.name == "send_digits":
            digits = str(call.arguments.get("digits", ""))
            if not digits or any(c not in "0123456789*#" for c in digits):
                return f"digits {digits!r}: only 0-9, * and # can be pressed"
        if call.name in self.http or call.name in self.mcp:
            schema = (self.http.get(call.name) or self.mcp[call.name]).parameters
            missing = [k for k in schema.get("required", []) if k not in call.arguments]
            if missing:
                return f"missing arguments: {', '.join(missing)}"
        return ""


def announcement(call: ToolCall, profile: Profile) -> str:
    """What the agent says as it carries out a call-control tool."""
    if call.name == "transfer":
        return profile.transferring.format(name=spoken_name(target_of(call, profile) or "staff"))
    if call.name == "take_message":
        return profile.message_prompt
    if call.name == "collect_digits":
        return str(call.arguments.get("prompt") or profile.digits_prompt)
    if call.name == "send_digits":
        return ""  # the tones are what the other side hears
    return profile.goodbye


def target_of(call: ToolCall, profile: Profile) -> str | None:
    """The directory entry a transfer names (forgiving case, spaces and "the")."""
    want = str(call.arguments.get("target", "")).strip().lower()
    want = re.sub(r"^the\s+", "", want).replace(" ", "-").replace("_", "-")
    for name in profile.directory:
        if name.lower() == want:
            return name
    for name in profile.directory:  # "children's section" for children, "desk" for front-desk
        if want and (name.lower() in want or want in name.lower()):
            return name
    return None


def _fn(name: str, description: str, parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": parameters or {"type": "object", "properties": {}}}}


_OPENERS = ("<tool_call>", "<tools>", "```json", "```", "{")


class ToolCallScanner:
    """Splits a streamed reply into speech and, at most, one tool call.

    :meth:`push` returns the text safe to speak now and the call once its JSON object is
    complete. Text from a ``<``, ``{`` or backtick on is held until it is known not to open a
    call; a spoken reply almost never holds one of them.
    """

    def __init__(self) -> None:
        self._held = ""
        self._in_call = False
        self.call: ToolCall | None = None
        self.malformed = ""
        """The text of a call whose JSON never completed or named no tool."""

    def push(self, text: str) -> tuple[str, ToolCall | None]:
        if self.call is not None or self.malformed:
            return "", None
        self._held += text
        if not self._in_call:
            i = _first_trigger(self._held)
            if i < 0:
                out, self._held = self._held, ""
                return out, None
            speech, rest = self._held[:i], self._held[i:]
            if any(rest.startswith(o) for o in _OPENERS):
                self._in_call = True
                self._held = rest
            elif any(o.startswith(rest) for o in _OPENERS):
                self._held = rest  # could still open one: wait for more
                return speech, None
            else:  # a "<" or "`" that opens nothing: speak it after all
                self._held = ""
                return speech + rest, None
            return speech + self._take_call(), self.call
        self._take_call()
        return "", self.call

    def _take_call(self) -> str:
        obj = _json_object(self._held)
        named = _NAMED.search(self._held)  # <function name="transfer" arguments={...}
        if obj is None and named is None:
            tag = _TAG.search(self._held)  # <tools><transfer target="children"/></tools>
            if tag is None:
                return ""
            obj = ({"name": tag.group(1), "arguments": dict(_ATTR.findall(tag.group(2)))},
                   tag.end())
        if obj is None:
            return ""  # the arguments' object is still to come
        data, _ = obj
        if named is not None and isinstance(data, dict) and "name" not in data:
            data = {"name": named.group(1), "arguments": data}
        name = data.get("name") if isinstance(data, dict) else None
        args = data.get("arguments", data.get("parameters", {})) if isinstance(data, dict) else {}
        if isinstance(args, str):  # some models send the arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        if not isinstance(name, str) or not name:
            self.malformed = self._held
            return ""
        self.call = ToolCall(name, args if isinstance(args, dict) else {},
                             raw=as_hermes(name, args))
        return ""

    def flush(self) -> tuple[str, ToolCall | None]:
        """The end of the reply: held text that opened no call is speech after all.

        A call cut short (``max_tokens``, an unclosed tag) still counts if it named its tool:
        the small models copy the schema into the arguments and run out of tokens.
        """
        if self.call is not None or self.malformed:
            return "", self.call
        held, self._held = self._held, ""
        if self._in_call:
            named = _NAMED.search(held) or _JSON_NAME.search(held)
            if named is None:
                self.malformed = held
                return "", None
            args = dict(_JSON_STR.findall(held[named.end():]))
            args.pop("type", None)
            self.call = ToolCall(named.group(1), args, raw=as_hermes(named.group(1), args))
            return "", self.call
        return held, None


_TAG = re.compile(r"<(?!tools\b|tool_call\b|/)([A-Za-z_]\w*)((?:\s+\w+\s*=\s*\"[^\"]*\")*)\s*/?>")
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_NAMED = re.compile(r'<function\s+name\s*=\s*"?([A-Za-z_]\w*)')
_JSON_NAME = re.compile(r'"name"\s*:\s*"([A-Za-z_]\w*)"')
_JSON_STR = re.compile(r'"(\w+)"\s*:\s*"([^"]*)"')


def _first_trigger(text: str) -> int:
    hits = [i for i in (text.find("<"), text.find("{"), text.find("`")) if i >= 0]
    return min(hits) if hits else -1


def _json_object(text: str) -> tuple[dict, int] | None:
    """The first complete JSON object in ``text`` and where it ends, or None yet."""
    start = text.find("{")
    if start < 0:
        return None
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                try:
                    return json.loads(text[start:i + 1]), i + 1
                except ValueError:
                    return {}, i + 1
    return None


def as_hermes(name: str, args) -> str:
    """The call as the model should have written it (what the history keeps)."""
    return ("<tool_call>\n" + json.dumps({"name": name, "arguments": args})
            + "\n</tool_call>")


TOOL_RESPONSE = "<tool_response>"
"""How a tool's result, kept in the history as a user message, begins."""


def tool_response(content: str) -> str:
    """A tool's result as the next user message.

    Qwen's template renders a ``tool`` message exactly so; written out, any template and
    backend sends the same tokens.
    """
    return f"{TOOL_RESPONSE}\n{content}\n</tool_response>"
