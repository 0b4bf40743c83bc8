"""Request guard: the optional token (query parameter once, then a cookie) and conservative response headers."""
from __future__ import annotations

import hmac
from urllib.parse import urlencode

from flask import Flask, Response, g, redirect, request

from board.api import json_error

TOKEN_PARAMETER = "token"
TOKEN_COOKIE = "flowscope_token"


def install_guard(server: Flask, token: str | None) -> None:
    """Every request (pages, Dash's own routes, assets, API) must carry `token` when one is set."""

    @server.before_request
    def _check_token() -> Response | None:
        if token is None:
            return None
        offered = request.args.get(TOKEN_PARAMETER)
        if offered is not None and hmac.compare_digest(offered.encode(), token.encode()):
            if request.method == "GET" and not request.path.startswith("/api/"):
                # Take the token out of the address bar (and of the history) once it is in a cookie.
                rest = [(k, v) for k, v in request.args.items(multi=True) if k != TOKEN_PARAMETER]
                response = redirect(request.path + (f"?{urlencode(rest)}" if rest else ""), code=303)
                _set_cookie(response, token)
                return response
            g.flowscope_set_token_cookie = True
            return None
        cookie = request.cookies.get(TOKEN_COOKIE)
        if cookie is not None and hmac.compare_digest(cookie.encode(), token.encode()):
            return None
        if request.path.startswith("/api/") or request.path.startswith("/_dash"):
            return json_error(401, "this board needs its token: add ?token=… to the address once")
        return Response("This board needs its token: open it with ?token=… once.\n", 401, mimetype="text/plain")

    @server.after_request
    def _headers(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        if token is not None and g.get("flowscope_set_token_cookie"):
            _set_cookie(response, token)
        return response


def _set_cookie(response: Response, token: str) -> None:
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
