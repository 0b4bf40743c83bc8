"""The Runs page's notice of logged data that this board does not draw (never dropped without a word)."""
from __future__ import annotations

from dash import html

from board.data.plugin_inventory import PluginUse, not_shown


def plugin_notice(uses: list[PluginUse]) -> html.Div | None:
    """None when every plugin's data is drawn; otherwise one line per plugin with its run and tag counts."""
    missing = not_shown(uses)
    if not missing:
        return None
    lines = [html.Li(f"{plugin}: {runs} run{'s' * (runs != 1)}, {tags} tag{'s' * (tags != 1)}",
                     id=f"plugins-not-shown-{index}") for index, (plugin, (runs, tags)) in enumerate(missing.items())]
    return html.Div(className="fs-notice", id="runs-plugins-not-shown", children=[
        html.Span("Logged data this board does not show (listed in /api/plugins; TensorBoard shows it):"),
        html.Ul(lines)])
