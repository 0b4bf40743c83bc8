"""Pages that draw Plotly charts have the browser fetch plotly.js with the page's HTML.

Dash loads plotly.js (4.8 MB) only when the first graph is rendered, that is after the page's layout came back
from its callback: a preload link lets the browser fetch it while it runs Dash's own scripts. Only pages that
register with `preload_plotly=True` get the links, so a page without charts fetches nothing it does not use."""
from __future__ import annotations

from typing import Any

import dash
from dash import Dash
from flask import request

SCRIPTS = ("plotly/package_data/plotly.min.js", "dash/dcc/async-graph.js")


def install_plotly_preload(app: Dash) -> None:
    interpolate = app.interpolate_index

    def interpolate_index(**kwargs: Any) -> str:
        html = interpolate(**kwargs)
        path = "/" + (app.strip_relative_path(request.path) or "")
        if not any(page.get("preload_plotly") and page["path"] == path for page in dash.page_registry.values()):
            return html
        prefix = app.config.requests_pathname_prefix
        links = "".join(f'<link rel="preload" as="script" href="{prefix}_dash-component-suites/{script}">'
                        for script in SCRIPTS)
        return html.replace("</head>", links + "</head>", 1)

    app.interpolate_index = interpolate_index
