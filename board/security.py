"""Request guard: the optional token (query parameter once, then a cookie) and conservative response headers (CSP)."""
from __future__ import annotations

import hmac
from urllib.parse import urlencode

from collections.abc import Callable
from functools import lru_cache

from flask import Flask, Response, g, redirect, request

from board.api import json_error

TOKEN_PARAMETER = "token"
TOKEN_COOKIE = "flowscope_token"


LOOPBACK_HOST_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def request_host_name(host_header: str) -> str:
    """The name in a Host header, without port or IPv6 brackets ("[::1]:6006" → "::1")."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@lru_cache(maxsize=8)
def content_security_policy(inline_script_hashes: tuple[str, ...]) -> str:
    """The board's CSP: scripts only from the board itself plus Dash's own inline scripts (by hash; no
    'unsafe-inline' or 'unsafe-eval' for scripts). Styles allow inline: Plotly and the dropdowns insert <style>
    elements at run time. Images may be data:/blob: URLs (Plotly's icons and its PNG export)."""
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'", *inline_script_hashes],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())


def install_guard(server: Flask, token: str | None, loopback_only: bool = False,
                  policy: Callable[[], str] | None = None) -> None:
    """Every request (pages, Dash's own routes, assets, API) must carry `token` when one is set.

    `loopback_only` (a board bound to a loopback address without a token): requests must name a loopback host,
    so a web page whose own name was rebound to 127.0.0.1 (DNS rebinding) cannot read the board.
    `policy`: gives the Content-Security-Policy of every response (see `content_security_policy`)."""

    @server.before_request
    def _check_token() -> Response | None:
        if loopback_only and request_host_name(request.host).lower() not in LOOPBACK_HOST_NAMES:
            return json_error(403, f"Host {request.host!r} is not a loopback name; this board only answers "
                                   "http://127.0.0.1 or http://localhost (protection against DNS rebinding)")
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
        if policy is not None:
            response.headers.setdefault("Content-Security-Policy", policy())
        if token is not None and g.get("flowscope_set_token_cookie"):
            _set_cookie(response, token)
        return response


def _set_cookie(response: Response, token: str) -> None:
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
