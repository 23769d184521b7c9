"""The console's JSON API under ``/api/``: what the pages show, for scripts too.

    GET  /api/calls?active=1                 the calls that are up (the live hub's)
    GET  /api/calls?since=24h&profile=&end_reason=&q=&start=&end=&limit=&offset=
                                             the call history, newest first, and the total
    GET  /api/calls/ID                       one call: turns and stages, events, tool calls,
                                             messages (and ``live`` while it is up)
    GET  /api/calls/ID/recording             its stereo WAV
    GET  /api/messages?handled=0|1           callers' messages
    POST /api/messages/ID/handled            mark one handled (body {"handled": false} undoes)
    GET  /api/messages/ID/audio              its WAV
    GET  /api/webhooks?status=&call=         the webhooks' deliveries and counts per status
    GET  /api/events                         server-sent events: a ``snapshot`` of the calls
                                             that are up, then each live event as it comes

Database work runs in Starlette's thread pool, never on the event loop that streams the
events. A call log that is down (or not migrated yet) answers 503, a bad filter 400.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse

from agent.console import queries
from agent.console.hub import Hub
from db.reports import parse_since

KEEPALIVE_S = 15.0
"""A comment line this often keeps idle event streams open through proxies."""


class BadRequest(ValueError):
    """A query parameter the API cannot read; the message names it."""


def _time(text: str, name: str) -> datetime | None:
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"{name}: {text!r} is not an ISO 8601 time") from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def _int(text: str, name: str, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        raise BadRequest(f"{name}: {text!r} is not a number") from None


def history_filter(params) -> queries.HistoryFilter:
    """The history's filters from a request's query parameters.

    Raises:
        BadRequest: a value that does not parse; the message names its parameter.
    """
    try:
        since = parse_since(params.get("since", ""))
    except ValueError as e:
        raise BadRequest(f"since: {e}") from None
    return queries.HistoryFilter(
        since=since, start=_time(params.get("start", ""), "start"),
        end=_time(params.get("end", ""), "end"), profile=params.get("profile", ""),
        end_reason=params.get("end_reason", ""), text=params.get("q", ""),
        limit=_int(params.get("limit", ""), "limit", 50),
        offset=_int(params.get("offset", ""), "offset", 0))


def _error(status: int, text: str) -> JSONResponse:
    return JSONResponse({"error": text}, status_code=status)


class Api:
    """The endpoints, over one call log and one hub."""

    def __init__(self, engine, hub: Hub):
        self.engine = engine
        self.hub = hub

    async def _db(self, fn, *args) -> Any:
        return await run_in_threadpool(fn, self.engine, *args)

    async def guarded(self, request: Request, handler) -> Response:
        try:
            return await handler(request)
        except BadRequest as e:
            return _error(400, str(e))
        except SQLAlchemyError as e:
            return _error(503, f"the call log is unavailable: {str(e).splitlines()[0][:200]}")

    async def calls(self, request: Request) -> Response:
        if request.query_params.get("active") in ("1", "true", "yes"):
            return JSONResponse({"calls": self.hub.snapshot()["calls"]})
        rows, total = await self._db(queries.history, history_filter(request.query_params))
        return JSONResponse({"calls": rows, "total": total})

    async def call(self, request: Request) -> Response:
        cid = request.path_params["call_id"]
        row = await self._db(queries.call, cid)
        live = self.hub.call(cid)
        if row is None and live is None:
            return _error(404, f"no call {cid}")
        return JSONResponse({**(row or {"id": cid}), "live": live})

    async def recording(self, request: Request) -> Response:
        path = await self._db(queries.recording, request.path_params["call_id"])
        return _wav(path, "recording")

    async def messages(self, request: Request) -> Response:
        flag = request.query_params.get("handled", "")
        handled = None if flag == "" else flag in ("1", "true", "yes")
        return JSONResponse({"messages": await self._db(queries.messages, handled)})

    async def handled(self, request: Request) -> Response:
        body = await request.body()
        try:
            handled = bool(json.loads(body).get("handled", True)) if body else True
        except (ValueError, AttributeError):
            raise BadRequest('body: expected JSON like {"handled": true}') from None
        done = await self._db(queries.mark_handled, request.path_params["message_id"], handled)
        if done is None:
            return _error(404, f"no message {request.path_params['message_id']}")
        return JSONResponse(done)

    async def message_audio(self, request: Request) -> Response:
        path = await self._db(queries.message_audio, request.path_params["message_id"])
        return _wav(path, "message audio")

    async def webhooks(self, request: Request) -> Response:
        q = request.query_params
        return JSONResponse(await self._db(queries.deliveries, q.get("status", ""),
                                           q.get("call", ""),
                                           _int(q.get("limit", ""), "limit", 100)))

    async def events(self, request: Request) -> Response:
        sub, snapshot = self.hub.subscribe(asyncio.get_running_loop())

        async def stream():
            try:
                # A page whose stream ended reconnects within a second, from a new snapshot.
                yield "retry: 1000\n" + _sse({"kind": "snapshot", **snapshot}, snapshot["seq"])
                while True:
                    try:
                        ev = await asyncio.wait_for(sub.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    if ev is None:  # it fell behind: the page reconnects, from a snapshot
                        return
                    yield _sse(ev.as_json(), ev.seq)
            finally:
                self.hub.unsubscribe(sub)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})


def _sse(data: dict, seq: int) -> str:
    return f"id: {seq}\ndata: {json.dumps(data, separators=(',', ':'), default=str)}\n\n"


def _wav(path: str | None, what: str) -> Response:
    if not path or not Path(path).is_file():
        return _error(404, f"no {what} file")
    return FileResponse(path, media_type="audio/wav")
