"""Operator-defined HTTP tools: POST the model's arguments as JSON, read JSON back.

A job of the process scheduler like the turn's model work, but it holds no CPU slot: it waits
on the network. Every failure is one :class:`ToolFailed` with a short outcome code for the
call log (``timeout``, ``http-500``, ``bad-json``, ``unreachable``); the caller then hears the
profile's ``tool_error`` phrase and the call goes on.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

from dialplan.profile import HttpTool

MAX_RESULT_CHARS = 2000
"""A result longer than this is cut before it goes back to the model (its context is small)."""


class ToolFailed(Exception):
    """The tool gave no usable answer; ``outcome`` is the call log's code for why."""

    def __init__(self, outcome: str, detail: str = ""):
        super().__init__(f"{outcome}: {detail}" if detail else outcome)
        self.outcome = outcome
        self.detail = detail


def call_http_tool(tool: HttpTool, arguments: dict) -> str:
    """POST ``arguments`` to the tool; its JSON answer, compact, as text for the model.

    Raises:
        ToolFailed: timeout, an HTTP error status, a connection failure, or not JSON.
    """
    body = json.dumps(arguments).encode("utf-8")
    req = urllib.request.Request(tool.url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json",
        "User-Agent": "callagent"})
    try:
        with urllib.request.urlopen(req, timeout=tool.timeout_s) as resp:
            raw = resp.read(1_000_000)
    except urllib.error.HTTPError as e:
        raise ToolFailed(f"http-{e.code}", str(e.reason)) from e
    except TimeoutError as e:
        raise ToolFailed("timeout", f"no answer in {tool.timeout_s:g} s") from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, (TimeoutError, socket.timeout)):
            raise ToolFailed("timeout", f"no answer in {tool.timeout_s:g} s") from e
        raise ToolFailed("unreachable", str(e.reason)) from e
    except OSError as e:
        raise ToolFailed("unreachable", repr(e)) from e
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ToolFailed("bad-json", raw[:80].decode("utf-8", "replace")) from e
    return json.dumps(data, ensure_ascii=False)[:MAX_RESULT_CHARS]
