"""The instrumentation breakdown: each paced observer's measured share of step time, with its interval."""
from __future__ import annotations

import math

import plotly.graph_objects as go
from dash import dash_table

from board.data.overhead import ObserverCost

BAR_COLOR = "#b07aa1"  # the "log" part of the step breakdown: time spent in the instrumentation
_LAYOUT = {"template": "plotly_white", "margin": {"l": 130, "r": 20, "t": 40, "b": 40}}


def _percent(share: float) -> float | None:
    return None if math.isnan(share) else 100.0 * share


def overhead_figure(costs: list[ObserverCost], title: str = "instrumentation") -> go.Figure:
    """Horizontal bars: each observer's recent share of step time (%), labelled with its interval and ms per step."""
    figure = go.Figure()
    labels = [f"every {c.interval} · {c.instrumentation_ms:.3g} ms/step" if c.interval else
              f"{c.instrumentation_ms:.3g} ms/step" for c in costs]
    figure.add_bar(y=[c.observer for c in costs], x=[_percent(c.share) for c in costs], orientation="h",
                   marker_color=BAR_COLOR, text=labels, textposition="auto", name="share of step time",
                   hovertemplate="%{y}: %{x:.2f} % of step time<br>%{text}<extra></extra>")
    figure.update_layout(title=title, xaxis_title="measured share of step time (%)",
                         height=120 + 40 * max(len(costs), 1), yaxis={"autorange": "reversed"}, **_LAYOUT)
    if not costs:
        figure.add_annotation(text="no paced observer in this run (perf/interval/* tags)", showarrow=False,
                              xref="paper", yref="paper", x=0.5, y=0.5)
    return figure


def overhead_rows(costs: list[ObserverCost]) -> list[dict]:
    """Rows of the breakdown table: observer, interval, ms per step, share (%)."""
    return [{"observer": c.observer, "interval": c.interval or None,
             "instrumentation_ms": None if math.isnan(c.instrumentation_ms) else round(c.instrumentation_ms, 4),
             "share_percent": None if math.isnan(c.share) else round(100 * c.share, 3)} for c in costs]


OVERHEAD_COLUMNS = (("observer", "observer", "text"), ("interval", "interval (steps)", "numeric"),
                    ("instrumentation_ms", "ms per step", "numeric"), ("share_percent", "% of step time", "numeric"))


def overhead_table(table_id: str, rows: list[dict]) -> dash_table.DataTable:
    return dash_table.DataTable(id=table_id, columns=[{"id": k, "name": n, "type": t} for k, n, t in OVERHEAD_COLUMNS],
                                data=rows, style_table={"overflowX": "auto", "maxWidth": "44em"},
                                style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": 13,
                                            "padding": "4px 8px"},
                                style_header={"backgroundColor": "#eef1f4", "fontWeight": 600})
