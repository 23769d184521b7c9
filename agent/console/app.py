"""The console's Starlette application: pages, the JSON API, the script, the token check.

:func:`make_app` wires the routes of :mod:`agent.console.pages`, :mod:`agent.console.pages_ops`
and :mod:`agent.console.api` over one call-log engine and one :class:`~agent.console.hub.Hub`,
behind :class:`~agent.console.auth.TokenAuth`. Page rendering reads the database, so it runs
in the thread pool like the API's queries; the event loop only streams.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from agent.console import pages, pages_ops, queries
from agent.console.api import Api, BadRequest, history_filter
from agent.console.auth import TokenAuth, login_routes
from agent.console.hub import Hub
from db.reports import parse_since

STATIC = Path(__file__).with_name("static")


def make_app(engine: Engine, hub: Hub, token: str = "") -> Starlette:
    """The console over ``engine``'s call log and ``hub``'s live calls.

    Args:
        engine: the call log.
        hub: the calls that are up.
        token: the bearer token every request must carry ("": none asked).
    """
    api = Api(engine, hub)

    def page(render):
        async def endpoint(request: Request) -> Response:
            try:
                return HTMLResponse(await run_in_threadpool(render, request))
            except SQLAlchemyError as e:
                return HTMLResponse(pages.layout("Call log unavailable", "<p>"
                                                 + pages.e(str(e).splitlines()[0][:300])
                                                 + "</p>", ""), status_code=503)
        return endpoint

    def history(request: Request) -> str:
        params = dict(request.query_params)
        try:
            rows, total = queries.history(engine, history_filter(request.query_params))
        except BadRequest as e:
            return pages.history_page([], 0, params, queries.choices(engine), str(e))
        return pages.history_page(rows, total, params, queries.choices(engine))

    def one_call(request: Request) -> str:
        cid = request.path_params["call_id"]
        row = queries.call(engine, cid)
        if row is None:
            return pages.layout(f"No call {cid}", "<p>No such call in the call log (yet).</p>",
                                "/calls")
        return pages.call_page(engine, row, hub.call(cid))

    def messages(request: Request) -> str:
        show = request.query_params.get("show", "open")
        return pages_ops.messages_page(
            queries.messages(engine, False if show == "open" else None), show)

    def webhooks(request: Request) -> str:
        status = request.query_params.get("status", "")
        return pages_ops.webhooks_page(queries.deliveries(engine, status), status)

    def charts(request: Request) -> str:
        window = request.query_params.get("since", "7d")
        try:
            since = parse_since(window)
        except ValueError as e:
            return pages.layout("Latency", f"<p>{pages.e(e)}</p>", "/charts")
        return pages_ops.charts_page(engine, since, window)

    async def live(request: Request) -> Response:
        return HTMLResponse(pages.live_page(hub.snapshot()))

    async def script(request: Request) -> Response:
        return FileResponse(STATIC / "console.js", media_type="text/javascript")

    def guarded(handler):
        async def endpoint(request: Request) -> Response:
            return await api.guarded(request, handler)
        return endpoint

    login, logout = login_routes(token)
    routes = [
        Route("/", live),
        Route("/calls", page(history)),
        Route("/calls/{call_id}", page(one_call)),
        Route("/messages", page(messages)),
        Route("/webhooks", page(webhooks)),
        Route("/charts", page(charts)),
        Route("/static/console.js", script),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout),
        Route("/api/calls", guarded(api.calls)),
        Route("/api/calls/{call_id}", guarded(api.call)),
        Route("/api/calls/{call_id}/recording", guarded(api.recording)),
        Route("/api/messages", guarded(api.messages)),
        Route("/api/messages/{message_id:int}/handled", guarded(api.handled),
              methods=["POST"]),
        Route("/api/messages/{message_id:int}/audio", guarded(api.message_audio)),
        Route("/api/webhooks", guarded(api.webhooks)),
        Route("/api/events", api.events),
    ]
    return Starlette(routes=routes, middleware=[Middleware(TokenAuth, token=token)])
