"""The Runs page's lead: each run's alerts, one badge per kind, linking to the page and step that explain it."""
from __future__ import annotations

from dash import dcc, html

from board.components.colors import run_color
from board.components.dynamics_alerts_table import SEVERITY_BADGES, alert_link
from board.data.alerts import SEVERITY_RANK, KindSummary


def _badge(summary: KindSummary) -> dcc.Link:
    alert = summary.first.alert
    count = f" ×{summary.count}" if summary.count > 1 else ""
    return dcc.Link(f"{summary.kind}{count} · step {alert.step}", href=alert_link(summary.first),
                    className=SEVERITY_BADGES.get(summary.severity, "fs-badge") + " fs-alert-link",
                    title=alert.message if not alert.subject or alert.subject in alert.message
                    else f"{alert.subject}: {alert.message}")  # most messages name their subject already (a leak's
    # site is in the middle of its message)


def _headline(kinds: list[KindSummary], limit: int = 160) -> html.Div:
    """The message of the run's first alert of its worst severity: what went wrong, in one line."""
    worst = max(kinds, key=lambda summary: SEVERITY_RANK.get(summary.severity, -1))
    message = worst.first.alert.message
    return html.Div(message if len(message) <= limit else message[:limit - 1] + "…", className="fs-muted fs-alert-why")


def alert_summary(summaries: dict[str, list[KindSummary]], problems: dict[str, str]) -> html.Div:
    """One line per run: its name, then a badge per alert kind (count, step of the first, severity colour; the
    first alert's message as the tooltip) and its worst alert's message, "no alerts", or why its alerts file could
    not be read."""
    rows = []
    for run, kinds in summaries.items():
        if kinds:
            found: list = [*(_badge(summary) for summary in kinds), _headline(kinds)]
        elif run in problems:
            found = [html.Span(f"⚠ alerts not read: {problems[run]}", className="fs-muted")]
        else:
            found = [html.Span("no alerts", className="fs-badge fs-alert-none")]
        rows.append(html.Tr([
            html.Td([html.Span("●", style={"color": run_color(run)}), " ", run], className="fs-run-name",
                    style={"width": "1%", "whiteSpace": "nowrap"}),
            html.Td(found, className="fs-alert-kinds")], className="runs-alert-row", **{"data-run": run}))
    errors = sum(1 for kinds in summaries.values() if any(s.severity == "error" for s in kinds))
    flagged = sum(1 for kinds in summaries.values() if kinds)
    headline = (f"{flagged} of {len(summaries)} runs raised alerts" + (f" ({errors} with errors)" if errors else "")
                if flagged else f"no alerts in {len(summaries)} runs")
    return html.Div(id="runs-alerts", className="fs-section", children=[
        html.H3("Alerts"),
        html.Div([headline, " · each badge opens the page and step that explain it · ",
                  dcc.Link("every alert", href="/alerts")], className="fs-muted"),
        html.Table(html.Tbody(rows), className="fs-alert-summary")])
