"""The Dash application: navigation, pages, the JSON API and the request guard on one Flask server."""
from __future__ import annotations

import logging
from pathlib import Path

import dash
from dash import Dash, dcc, html
from dash.exceptions import DependencyException
from flask import Response, request
from werkzeug.exceptions import HTTPException

from board import api_graph, api_media, api_ranks  # noqa: F401 - add the graph, text, images, ranks... routes to the API
from board.api import StrictJSONProvider, api, json_error
from board.config import BoardConfig
from board.context import EXTENSION, BoardContext
from board.data.store import LogdirStore
from board.data.views import SmoothingCache
from board.preload import install_plotly_preload
from board.security import content_security_policy, install_guard

log = logging.getLogger(__name__)
CALLBACK_PATH = "/_dash-update-component"


def create_app(config: BoardConfig, store: LogdirStore | None = None) -> Dash:
    """A ready-to-serve app. The store is refreshed by the caller (`store.start()`), never at import time."""
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        title="flowscope",
        update_title=None,
        suppress_callback_exceptions=True,  # charts are created per tag, after the first layout
        assets_folder=str(Path(__file__).parent / "assets"),
    )
    store = store if store is not None else LogdirStore(config.logdir, config.reload_interval, config.cache_root)
    app.server.extensions[EXTENSION] = BoardContext(config=config, store=store, smoothing=SmoothingCache())
    app.server.json = StrictJSONProvider(app.server)
    # Dash answers a component-suite path that names no registered library (e.g. "../..") with an exception.
    app.server.register_error_handler(DependencyException, lambda error: json_error(404, "no such file"))
    app.server.register_blueprint(api)
    app.server.register_error_handler(Exception, _callback_request_error)
    for page in _pages():
        page.register_callbacks(app)
    # NOTE: the policy names each inline script by its hash; Dash adds one (the pages' title callback) on its
    # first request, so the hashes are taken per response (a few microseconds).
    install_guard(app.server, config.token, loopback_only=config.is_loopback and config.token is None,
                  policy=lambda: content_security_policy(tuple(app.csp_hashes())))
    app.layout = _shell
    install_plotly_preload(app)
    return app


def _callback_request_error(error: Exception) -> Response:
    """A callback request that Dash or a callback cannot handle (a body of the wrong shape, an input of the wrong
    type: what a browser running the board never sends) is a 400, logged with its traceback; elsewhere an
    unexpected exception stays a 500."""
    if isinstance(error, HTTPException):
        return error
    if request.path != CALLBACK_PATH:
        raise error
    log.warning("callback request failed: %s: %s", type(error).__name__, error, exc_info=error)
    return json_error(400, f"malformed callback request ({type(error).__name__})")


def _pages() -> list:
    # NOTE: imported here, not at module top: dash.register_page needs an app created with use_pages first.
    from board.pages import (alerts, dynamics, graph, histograms, hparams, images, memory, pr_curves, profile, ranks,
                             runs, scalars, system, text)

    pages = [runs, scalars, histograms, memory, system, dynamics, ranks, alerts, profile, graph, text, images, hparams,
             pr_curves]
    for page in pages:  # what Dash does itself for modules it imports from a pages folder
        dash.page_registry[page.__name__]["layout"] = page.layout
    return pages


def _shell() -> html.Div:
    """Navigation built from the page registry, so pages added later (Dynamics, Profile, …) appear in it."""
    pages = sorted(dash.page_registry.values(), key=lambda page: (page.get("order") or 0, page["name"]))
    return html.Div([
        html.Nav(className="fs-nav", children=[
            html.Span("flowscope", className="fs-brand"),
            *[dcc.Link(page["name"], href=page["relative_path"], className="fs-nav-link",
                       id=f"nav-{page['module'].split('.')[-1]}")
              for page in pages],
        ]),
        html.Main(dash.page_container, className="fs-main"),
    ])
