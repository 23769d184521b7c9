"""OpenAI-compatible LLM backend: the reply streamed from a chat-completions server over HTTP.

For one model served to many agents (llama.cpp's ``llama-server``, vLLM, a GPU box): each
turn is ``POST {llm.base_url}/chat/completions`` with ``stream: true``, and every server-sent
event's ``choices[0].delta.content`` is a piece of the reply. Token usage is asked for with
``stream_options.include_usage`` and read from whichever event carries it (the last one on
OpenAI and vLLM); llama.cpp's server also reports ``timings.cache_n``, its reused prompt tokens.

Every failure (connection refused, an HTTP error status, no token within ``llm.timeout_s``,
the stream cut before the reply finished, an error event) raises :class:`LLMServerError`,
which the turn runner raises on the turn's thread like any LLM error: the turn is logged with
it. Closing the stream (barge-in) closes the HTTP response, so the server stops generating.

Waiting on the network takes no slot of the process scheduler (:mod:`models.scheduler`): the
model runs elsewhere, and holding the one CPU slot through a remote prefill would stall every
local ASR and TTS job behind it.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx

from dialplan import ConfigError
from dialplan.options import LLMOptions
from models.llm.base import LLM, LLMStream, Message, Piece
from models.llm.shape import JsonObject
from models.metrics import LLMMetrics
from models.scheduler import Scheduler

log = logging.getLogger("callagent.llm")

class LLMServerError(RuntimeError):
    """The LLM server was unreachable, failed, was too slow, or cut the reply short."""


@dataclass(frozen=True)
class Usage:
    """Token counts a server reported for one completion (0 = not reported)."""

    prompt: int = 0
    cached: int = 0
    completion: int = 0


class OpenAILLM(LLM):
    """A chat model behind an OpenAI-compatible HTTP API, streamed.

    A request's prompt runs on the server, not this CPU: it may run beside calls
    (:attr:`reads_in_short_steps`).

    Raises:
        ConfigError: ``llm.base_url`` is missing or not an http(s) URL, or ``llm.timeout_s``
            is not positive.
    """

    constrains = True
    reads_in_short_steps = True

    def __init__(self, options: LLMOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        base = options.base_url.strip().rstrip("/")
        if not base:
            raise ConfigError('llm.base_url: required with llm.backend = "openai" '
                              "(e.g. http://127.0.0.1:8080/v1)")
        if not base.startswith(("http://", "https://")):
            raise ConfigError(f"llm.base_url: expected an http:// or https:// URL, got {base!r}")
        if options.timeout_s <= 0:
            raise ConfigError(f"llm.timeout_s: must be > 0, got {options.timeout_s!r}")
        self.options = options
        self.model_name = options.model
        self.url = base + "/chat/completions"
        # An empty key was looked up in the environment at config load (dialplan.config).
        key = options.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # The read timeout bounds the wait for the response, the first token and each next one.
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(options.timeout_s))

    def stream(self, messages: list[Message]) -> LLMStream:
        reply = self._stream_impl(messages)
        return _RemoteStream(self.model_name, reply)

    def complete(self, messages: list[Message], max_tokens: int,
                 shape: JsonObject | None = None,
                 alone: Callable[[], bool] | None = None) -> LLMStream:
        """A one-off greedy reply; with ``shape``, its JSON schema as ``response_format``.

        The OpenAI form (``json_schema``), which llama.cpp's server and vLLM hold the reply
        to by a grammar; a server that ignores it returns free text, which the caller checks.
        """
        body = self.body(self.fit(messages), max_tokens=max_tokens)
        body["temperature"] = 0.0
        if shape is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "reply", "strict": True, "schema": shape.schema()}}
        return _RemoteStream(self.model_name, self._reply(body))

    def _reply(self, body: dict[str, Any]) -> _Reply:
        return _Reply(self._client, self.url, self.options.timeout_s, body)

    def _stream_impl(self, messages: list[Message]) -> _Reply:
        return self._reply(self.body(self.fit(messages)))

    def body(self, messages: list[Message], max_tokens: int | None = None,
             stream: bool = True) -> dict[str, Any]:
        """The chat-completions request for ``messages`` with this profile's sampling."""
        o = self.options
        body: dict[str, Any] = {
            "model": o.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": o.max_tokens if max_tokens is None else max_tokens,
            "temperature": o.temperature,
            "seed": o.seed,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def prime(self, system_prompt: str, spread: bool = True) -> None:
        """Have the server evaluate the system prompt once, ahead of the first turn.

        llama.cpp's server and vLLM keep evaluated prompt prefixes, so the first turn then
        starts warm. Best effort: a server that is down now is logged here and fails the turn
        that needs it, not the call's start.
        """
        body = self.body([Message("system", system_prompt), Message("user", "Hello")],
                         max_tokens=1, stream=False)
        try:
            self._client.post(self.url, json=body).raise_for_status()
        except httpx.HTTPError as e:
            log.warning("event=llm-prime-failed call=- url=%s error=%s", self.url,
                        json.dumps(_describe(e, self.options.timeout_s)))


class _Reply:
    """One streamed completion, read event by event; closing it closes the HTTP response.

    ``close`` may come from another thread while this one waits for the next token: the
    reader is woken by shutting the socket down (closing the response under it would race
    with its read) and closes the response itself on its way out.
    """

    def __init__(self, client: httpx.Client, url: str, timeout_s: float, body: dict[str, Any]):
        self._client, self._url = client, url
        self._body = body
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._resp: httpx.Response | None = None
        self._events: Iterator[str] | None = None
        self._closed = False
        self._reading = False
        self._finished = False  # a finish_reason came: the reply is whole
        self.usage: Usage | None = None

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:
        with self._lock:
            if self._closed:
                raise StopIteration
            self._reading = True
        try:
            return self._next()
        except (httpx.HTTPError, LLMServerError) as e:
            closed, self._closed = self._closed, True
            # Closed (barge-in) while reading, or cut after the last token: nothing is lost.
            if closed or (self._finished and isinstance(e, httpx.HTTPError)):
                raise StopIteration from None
            if isinstance(e, LLMServerError):
                raise
            raise LLMServerError(f"LLM server {self._url}: "
                                 f"{_describe(e, self._timeout)}") from e
        except BaseException:  # StopIteration included: the reply is over
            self._closed = True
            raise
        finally:
            with self._lock:
                self._reading = False
                done = self._closed
            if done and self._resp is not None:
                self._resp.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            resp, reading = self._resp, self._reading
        if resp is None:
            return
        if not reading:
            resp.close()
            return
        stream = resp.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the reader
                pass

    def _open(self) -> None:
        client = self._client
        resp = client.send(client.build_request("POST", self._url, json=self._body),
                           stream=True)
        with self._lock:
            self._resp = resp
            if self._closed:  # closed while connecting
                raise StopIteration
        if resp.status_code >= 400:
            detail = resp.read().decode("utf-8", "replace").strip()[:300]
            raise LLMServerError(f"LLM server {self._url}: HTTP {resp.status_code}"
                                 + (f": {detail}" if detail else ""))
        self._events = _sse_data(resp.iter_lines())

    def _next(self) -> Piece:
        if self._events is None:
            self._open()
        deadline = time.monotonic() + self._timeout
        for data in self._events:
            if data.strip() == "[DONE]":  # without a finish_reason first, a cut (see below)
                break
            event = _parse(data, self._url)
            self.usage = _usage(event) or self.usage
            for choice in event.get("choices") or ():
                if choice.get("finish_reason"):
                    self._finished = True
                text = (choice.get("delta") or {}).get("content")
                if text:
                    return Piece(text)
            # Keep-alive comments and empty deltas reset the read timeout; this does not.
            if not self._finished and time.monotonic() > deadline:
                raise LLMServerError(f"LLM server {self._url}: no token within "
                                     f"{self._timeout:g} s")
        if not self._finished:
            # llama_cpp.server, for one, ends a stream it interrupts for another request with
            # [DONE] alone: half a reply is an error to log, not an answer.
            raise LLMServerError(f"LLM server {self._url}: the stream ended before the "
                                 "reply finished")
        raise StopIteration


class _RemoteStream(LLMStream):
    """:class:`LLMStream` with no scheduler, and with the server's usage.

    The steps wait on the network, not this CPU (see the module docstring). Token counts are
    the server's when it reports them (an event may carry several tokens); otherwise pieces.
    """

    def __init__(self, model: str, reply: _Reply):
        super().__init__(model, reply)
        self._reply = reply

    @property
    def metrics(self) -> LLMMetrics:
        m = super().metrics
        u = self._reply.usage
        if u is None:
            return m
        return replace(m, prompt_tokens=u.prompt, cached_tokens=u.cached,
                       tokens=u.completion or m.tokens)


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined; comments skipped)."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:  # a last event without its blank line (some servers end the stream so)
        yield "\n".join(data)


def _parse(data: str, url: str) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except json.JSONDecodeError as e:
        raise LLMServerError(f"LLM server {url}: not a JSON event: {data[:200]!r}") from e
    if not isinstance(event, dict):
        raise LLMServerError(f"LLM server {url}: not a JSON object event: {data[:200]!r}")
    error = event.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        raise LLMServerError(f"LLM server {url}: {message}")
    return event


def _usage(event: dict[str, Any]) -> Usage | None:
    """Prompt, cached and completion tokens from an event's ``usage`` or llama.cpp ``timings``."""
    usage = event.get("usage") or {}
    timings = event.get("timings") or {}
    if not usage and not timings:
        return None
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = timings.get("cache_n", 0)
    prompt = usage.get("prompt_tokens")
    if prompt is None:  # llama.cpp timings: prompt_n evaluated now, cache_n reused
        prompt = timings.get("prompt_n", 0) + timings.get("cache_n", 0)
    completion = usage.get("completion_tokens") or timings.get("predicted_n", 0)
    return Usage(prompt=int(prompt or 0), cached=int(cached or 0), completion=int(completion))


def _describe(e: httpx.HTTPError, timeout_s: float) -> str:
    """What went wrong, for a person reading the turn's error."""
    if isinstance(e, httpx.ConnectTimeout):
        return f"no connection within {timeout_s:g} s"
    if isinstance(e, httpx.TimeoutException):
        return f"no token within {timeout_s:g} s"
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect ({e})"
    if isinstance(e, httpx.RemoteProtocolError | httpx.ReadError):
        return f"the stream was cut before the reply finished ({e})"
    if isinstance(e, httpx.HTTPStatusError):
        return f"HTTP {e.response.status_code}"
    return f"{type(e).__name__}: {e}"
