"""MCP tools: an operator's MCP server, its tools listed once and called like HTTP tools.

A ``[tools.NAME]`` table with ``mcp`` (:class:`~dialplan.profile.McpServer`) names a server; a
profile that lists NAME offers its tools (:class:`~agent.turn.tools.Toolbox`), under their own
names, with their descriptions and input schemas. One :class:`McpHub` per process (its
:class:`~agent.turn.runner.StageCache`'s) keeps one session per server for the process's life,
on a thread and asyncio loop of its own (``mcp``): opened when the first profile that lists the
server loads, its tools listed then, once (the system prompt every call primes is made from
them), and opened again in the background, backing off, whenever it fails: its process exited,
its HTTP endpoint went away. A session found dead before a call is reopened first, within the
call's ``timeout_s``; a call the session failed under is not sent again (the tool may have run).

A call is a job of the process scheduler's workers, like an HTTP tool's
(:mod:`agent.turn.http_tool`): the worker waits for the answer from the hub's loop, the call's
loop never does. It fails as an HTTP tool does, with a :class:`ToolFailed` whose outcome is the
call log's: ``timeout``, ``unreachable`` (no session, or it closed under the call),
``tool-error`` (the tool's own ``isError`` answer), ``mcp-error`` (the server refused the
request, or answered what the protocol does not allow); the caller then hears ``tool_error``.

The ``mcp`` package is imported on the hub's thread, when a profile first lists a server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sys
import threading
from dataclasses import dataclass, field

from agent import log
from agent.turn.http_tool import MAX_RESULT_CHARS, ToolFailed
from dialplan.profile import McpServer

RETRY_S = 0.5
"""A failed session is opened again after this, doubling each time it fails again..."""
RETRY_MAX_S = 30.0
"""...up to this."""
GRACE_S = 1.0
"""How much longer than ``timeout_s`` a worker waits for the loop's verdict (it is the loop's
own timeout that answers; this only bounds a loop that stopped)."""


@dataclass(frozen=True)
class McpTool:
    """One tool an MCP server listed, as the LLM is offered it."""

    server: str
    """The ``[tools.NAME]`` it came from."""
    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    """Its input schema, without the schema generators' titles (tokens the model need not read)."""
    timeout_s: float = 3.0
    read_only: bool = False
    """Its server says it changes nothing (``readOnlyHint``): the caller's words may choose it
    (:mod:`agent.turn.routing`)."""


class McpHub:
    """The process's MCP sessions, one per server, on one thread with an asyncio loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def tools(self, name: str, server: McpServer) -> tuple[McpTool, ...]:
        """The tools server ``name`` listed ((): none yet).

        The first ask opens the session and waits up to ``connect_timeout_s`` for its list;
        later asks return at once, with what was listed by then.
        """
        with self._lock:
            session = self._sessions.get(name)
            first = session is None
            if first:
                session = self._sessions[name] = _Session(name, server)
                asyncio.run_coroutine_threadsafe(session.run(), self._start())
        if first and not session.listed.wait(server.connect_timeout_s):
            log.event("mcp-down", tool=name, level=logging.ERROR,
                      error=f"no tool list in {server.connect_timeout_s:g} s; retrying")
        return session.tools or ()

    def call(self, tool: McpTool, arguments: dict) -> str:
        """Call ``tool`` and wait (a worker's thread) for its answer, as text for the model.

        Raises:
            ToolFailed: timeout, unreachable, tool-error or mcp-error.
        """
        session = self._sessions[tool.server]
        future = asyncio.run_coroutine_threadsafe(
            session.call(tool.name, arguments, tool.timeout_s), self._start())
        try:
            return future.result(tool.timeout_s + GRACE_S)
        except concurrent.futures.TimeoutError as e:
            future.cancel()
            raise ToolFailed("timeout", f"no answer in {tool.timeout_s:g} s") from e

    def close(self, timeout: float = 5.0) -> None:
        """End every session (a command's server process is stopped) and the loop."""
        with self._lock:
            loop, thread, sessions = self._loop, self._thread, list(self._sessions.values())
            self._sessions.clear()
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        for session in sessions:
            done = asyncio.run_coroutine_threadsafe(session.close(), loop)
            try:
                done.result(timeout)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    def _start(self) -> asyncio.AbstractEventLoop:
        """The hub's loop, started on first use."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="mcp", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop


class _Session:
    """One server's session, opened again whenever it fails (all on the hub's loop)."""

    def __init__(self, name: str, server: McpServer):
        self.name = name
        self.server = server
        self.tools: tuple[McpTool, ...] | None = None
        """Listed once, by the first session that opened."""
        self.listed = threading.Event()
        """The first try to open the session ended, listed or failed."""
        self._client = None
        self._up: asyncio.Event | None = None
        self._broken: asyncio.Event | None = None
        self._closing = False
        self._task: asyncio.Task | None = None
        self._error = ""

    async def run(self) -> None:
        """Open the session, list the tools once, hold it until it fails; again, backing off.

        A session that opened and then failed is opened again at once (a call may be waiting
        for it); one that did not open is tried again after :data:`RETRY_S`, doubling.
        """
        from mcp import Client  # here: the package costs a second to import

        self._task = asyncio.current_task()
        self._up, self._broken = asyncio.Event(), asyncio.Event()
        delay = RETRY_S
        while not self._closing:
            self._broken.clear()
            opened = False
            try:
                async with Client(self._transport(), mode="auto",
                                  read_timeout_seconds=self.server.connect_timeout_s) as client:
                    if self.tools is None:
                        self.tools = await self._list(client)
                    self._client, self._error, opened = client, "", True
                    self._up.set()
                    self.listed.set()
                    log.event("mcp-connected", tool=self.name, tools=len(self.tools),
                              names=",".join(t.name for t in self.tools))
                    await self._broken.wait()
                if not self._closing:
                    log.event("mcp-down", tool=self.name, error=self._error or "closed",
                              level=logging.WARNING, retry_s=0)
            except Exception as e:  # noqa: BLE001 - whatever the server did, it is retried
                self._error = _brief(e)
                log.event("mcp-down", tool=self.name, error=self._error, level=logging.WARNING,
                          retry_s=0 if opened else delay)
            finally:
                self._drop()
                self.listed.set()
            if self._closing:
                return
            if opened:
                delay = RETRY_S
                continue
            await asyncio.sleep(delay)
            delay = min(2 * delay, RETRY_MAX_S)

    async def close(self) -> None:
        """End the session (a command's process is stopped) and stop opening it again."""
        self._closing = True
        task = self._task
        if task is None or task.done():
            return
        if self._client is None:  # waiting to retry, or opening: nothing to end cleanly
            task.cancel()
        else:
            self._broken.set()
        await asyncio.wait({task}, timeout=8.0)
        if not task.done():
            task.cancel()

    async def call(self, name: str, arguments: dict, timeout_s: float) -> str:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._client is not None and _closed(self._client):
            # It closed while idle (its process exited): nothing was sent, so reopen it first.
            self._drop("the session had closed")
        try:
            await asyncio.wait_for(self._up.wait(), max(deadline - loop.time(), 0.01))
        except TimeoutError as e:
            raise ToolFailed("unreachable", f"no session in {timeout_s:g} s"
                             + (f": {self._error}" if self._error else "")) from e
        client = self._client
        try:
            result = await client.call_tool(name, arguments,
                                            read_timeout_seconds=max(deadline - loop.time(), 0.01))
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                raise ToolFailed("timeout", f"no answer in {timeout_s:g} s") from e
            if e.code == CONNECTION_CLOSED:
                self._drop("the session closed during a call")
                raise ToolFailed("unreachable", "the session closed during the call") from e
            raise ToolFailed("mcp-error", f"{e.code}: {e}") from e
        except ValidationError as e:
            raise ToolFailed("mcp-error", f"not an MCP result: {_brief(e)}") from e
        except Exception as e:  # noqa: BLE001 - the transport failed under the call
            self._drop(_brief(e))
            raise ToolFailed("unreachable", _brief(e)) from e
        text = result_text(result)
        if result.is_error:
            raise ToolFailed("tool-error", text[:200])
        return text

    def _drop(self, why: str = "") -> None:
        """The session is gone: calls wait for the next one, which :meth:`run` opens."""
        self._error = why or self._error
        self._client = None
        if self._up is not None:
            self._up.clear()
            self._broken.set()

    def _transport(self):
        """What :class:`mcp.Client` connects to: the URL, or the command run as a process."""
        if self.server.url:
            return self.server.url
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        command, *args = self.server.mcp
        return stdio_client(StdioServerParameters(command=command, args=args), errlog=sys.stderr)

    async def _list(self, client) -> tuple[McpTool, ...]:
        listed, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        want = self.server.include
        missing = [n for n in want if n not in {t.name for t in listed}]
        if missing:
            log.event("mcp-tools-missing", tool=self.name, names=",".join(missing),
                      level=logging.WARNING)
        return tuple(
            McpTool(self.name, t.name, t.description or t.title or t.name,
                    lean_schema(t.input_schema), self.server.timeout_s,
                    bool(t.annotations and t.annotations.read_only_hint))
            for t in listed if not want or t.name in want)


def _closed(client) -> bool:
    """Whether the session's connection has closed (its process exited, its stream ended).

    The SDK keeps it on the session's JSON-RPC dispatcher; with ``mcp`` pinned, the tests of
    a server killed while idle check that it is still there.
    """
    dispatcher = getattr(client.session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


def result_text(result) -> str:
    """A tool's answer as the model reads it: its text (JSON compacted), or its structure."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if texts:
        text = "\n".join(texts)
        try:
            text = json.dumps(json.loads(text), ensure_ascii=False)
        except ValueError:
            pass
    elif result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    else:
        text = ""
    return text[:MAX_RESULT_CHARS]


def lean_schema(schema: dict) -> dict:
    """``schema`` without ``title`` and ``$schema`` keys (a property named title stays)."""
    def lean(node, in_properties: bool = False):
        if isinstance(node, dict):
            if in_properties:
                return {k: lean(v) for k, v in node.items()}
            return {k: lean(v, k in ("properties", "$defs", "definitions"))
                    for k, v in node.items()
                    if not (k in ("title", "$schema") and isinstance(v, str))}
        if isinstance(node, list):
            return [lean(v) for v in node]
        return node
    out = lean(schema or {})
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def _brief(e: BaseException) -> str:
    """An exception in a line (a task group's, by its first cause)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"[:200]
