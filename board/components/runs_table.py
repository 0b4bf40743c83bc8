"""The runs overview table: one row per run, rank sub-runs listed under their group."""
from __future__ import annotations

import time

from dash import dcc, html

from board.components.colors import run_color
from board.components.dynamics_alerts_table import ranks_link
from board.data.reader import is_event_file
from board.data.run import RunSummary
from instrumentation.format.units import format_bytes

COLUMNS = ("run", "last step", "last update", "scalar tags", "histogram tags", "points", "size", "files", "status")


def human_age(wall_time: float | None, now: float | None = None) -> str:
    if wall_time is None:
        return "—"
    seconds = max(0.0, (now if now is not None else time.time()) - wall_time)
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _status(summary: RunSummary) -> list[html.Span | html.Div]:
    """One warning badge per reason (corrupt records, unreadable files or directory, a failed read) with its full
    text as the tooltip, and below them in full the reasons too long for a badge; then the restart badge, or ok."""
    badges: list[html.Span | html.Div] = []
    for index, warning in enumerate(summary.warnings):
        badges.append(html.Span(f"⚠ {_short(warning)}", className="fs-badge fs-badge-warn", title=warning,
                                id={"type": "runs-warning", "run": summary.name, "index": index}))
    if summary.superseded_points:
        badges.append(html.Span(f"↺ restarted ({summary.superseded_points} points superseded)", className="fs-badge",
                                title="steps went backwards: points of the abandoned timeline are hidden"))
    long = [warning for warning in summary.warnings if _short(warning) != warning]  # shortened: said in full
    if long:
        badges.append(html.Div("; ".join(long), className="fs-muted fs-run-warnings",
                               style={"maxWidth": "30em", "overflowWrap": "anywhere"}))  # not widening the table
    return badges or [html.Span("ok", className="fs-badge fs-badge-ok")]


def _short(warning: str, limit: int = 60) -> str:
    """The badge's label: without the event file's name (the full line has it), at most `limit` characters."""
    head, _, rest = warning.partition(": ")
    label = rest if rest and is_event_file(head) else warning
    return label if len(label) <= limit else label[:limit - 1] + "…"


def _ranks_view(group: str) -> dcc.Link:
    return dcc.Link("ranks view →", href=ranks_link(group), className="fs-badge fs-ranks-link",
                    id={"type": "runs-ranks-link", "group": group}, title="step time, skew and breakdown per rank")


def runs_table(summaries: list[RunSummary], now: float | None = None) -> html.Table:
    rows = []
    ranks: dict[str, int] = {}
    for summary in summaries:
        if summary.group != summary.name:
            ranks[summary.group] = ranks.get(summary.group, 0) + 1
    named = {summary.name for summary in summaries}
    headed: set[str] = set()
    for summary in summaries:
        group = summary.group
        if group != summary.name and group not in named and group not in headed:
            headed.add(group)
            title = f"{group}  ({ranks[group]} ranks) "
            rows.append(html.Tr([html.Td([title, _ranks_view(group)], colSpan=len(COLUMNS), className="fs-group")]))
        indent = {"paddingLeft": "1.5em"} if summary.group != summary.name else {}
        own_ranks = [" ", _ranks_view(summary.name)] if summary.name in ranks else []  # a run that also has ranks
        rows.append(html.Tr([
            html.Td([html.Span("●", style={"color": run_color(summary.name)}), " ", summary.name, *own_ranks],
                    style=indent, className="fs-run-name"),
            html.Td("—" if summary.last_step is None else str(summary.last_step)),
            html.Td(human_age(summary.last_update, now), title="" if summary.last_update is None else
                    time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(summary.last_update))),
            html.Td(str(summary.scalar_tags)),
            html.Td(str(summary.histogram_tags)),
            html.Td(f"{summary.points:,}"),
            html.Td(format_bytes(summary.size_bytes)),
            html.Td(str(summary.files)),
            html.Td(_status(summary), style={"whiteSpace": "normal"}),
        ], id={"type": "runs-row", "run": summary.name}, style={"whiteSpace": "nowrap"}))  # only the status wraps
    return html.Table([html.Thead(html.Tr([html.Th(c) for c in COLUMNS])), html.Tbody(rows)], className="fs-table")
