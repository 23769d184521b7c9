"""The console's bearer token: checked on every request but the sign-in page's.

An API client sends ``Authorization: Bearer <token>``. A browser cannot put that header on a
page, an ``<audio>`` source or an ``EventSource``, so it signs in once at ``/login``: the page
posts the token, and the console answers with an HttpOnly, SameSite=Strict cookie holding an
HMAC of it (not the token itself), which every later request carries. Without a token
(``console.token`` empty, loopback only) nothing is checked. A pure ASGI middleware: it never
buffers a response, so the event stream passes through as it is written.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "callagent_console"
OPEN = ("/login", "/logout")
"""Paths served without the token."""


def session_value(token: str) -> str:
    """The cookie's value for ``token``: an HMAC of it, so the cookie is not the token."""
    return hmac.new(token.encode(), b"callagent-console-session", hashlib.sha256).hexdigest()


def authorized(token: str, headers: Headers, cookies: dict[str, str]) -> bool:
    """Whether a request carries ``token`` (header) or its session cookie; True without one."""
    if not token:
        return True
    kind, _, given = headers.get("authorization", "").partition(" ")
    if kind.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return True
    return hmac.compare_digest(cookies.get(COOKIE, "").encode(), session_value(token).encode())


class TokenAuth:
    """Refuses requests without the token: 401 under ``/api/``, else a redirect to ``/login``."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.token or scope["path"] in OPEN:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if authorized(self.token, request.headers, request.cookies):
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/api/"):
            response: Response = JSONResponse(
                {"error": "unauthorized: send Authorization: Bearer <console token>"},
                status_code=401, headers={"WWW-Authenticate": 'Bearer realm="callagent"'})
        else:
            target = scope["path"] + (f"?{scope['query_string'].decode()}"
                                      if scope.get("query_string") else "")
            response = RedirectResponse(f"/login?next={quote(target, safe='')}", 303)
        await response(scope, receive, send)


LOGIN_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>callagent console: sign in</title>
<style>body{font:14px system-ui,sans-serif;margin:48px}input{font:inherit;width:24em}</style>
</head><body><h1>callagent console</h1><form id="f"><p>Token:
<input id="t" type="password" autocomplete="current-password" autofocus>
<button>Sign in</button></p><p id="m"></p></form>
<script>
document.getElementById("f").onsubmit = async (e) => {
  e.preventDefault();
  const r = await fetch("/login", {method: "POST",
    headers: {"Authorization": "Bearer " + document.getElementById("t").value}});
  if (r.ok) {
    const next = new URLSearchParams(location.search).get("next") || "/";
    location.href = next.startsWith("/") && !next.startsWith("//") ? next : "/";
  } else { document.getElementById("m").textContent = "Wrong token."; }
};
</script></body></html>"""


def login_routes(token: str):
    """``GET /login`` (the form), ``POST /login`` (sets the cookie), ``GET /logout``."""

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return HTMLResponse(LOGIN_PAGE)
        if not token:
            return JSONResponse({"ok": True})
        if not authorized(token, request.headers, {}):
            return JSONResponse({"error": "wrong token"}, status_code=401)
        response = JSONResponse({"ok": True})
        response.set_cookie(COOKIE, session_value(token), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE)
        return response

    return login, logout
