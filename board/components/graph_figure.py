"""The Graph page's figure: a laid-out graph (board.data.graph_layout) drawn with SVG scatter traces and boxes."""
from __future__ import annotations

import plotly.graph_objects as go

from board.components.colors import with_alpha
from board.data.graph import KIND_INPUT, KIND_OP, KIND_PARAMETER, GraphNode, GraphView
from board.data.graph_layout import DrawnGraph, DrawnItem
from board.data.graph_profile import GraphCosts
from instrumentation.format.units import format_bytes

PHASE_COLORS = {"forward": "#4e79a7", "backward": "#f28e2b", "optimizer": "#59a14f", "loss": "#b07aa1", "": "#7f7f7f"}
BOX_COLOR = "#4e79a7"
LABELS_UP_TO = 160  # items; beyond that, names only on hover
VISIBLE_LAYERS = 30  # layers shown when the page opens
COLOR_MODES = ("phase", "time", "memory")


def _value(item: DrawnItem, costs: GraphCosts | None, mode: str) -> float | None:
    if costs is None or mode == "phase":
        return None
    found = [costs.per_node[node_id] for node_id in item.node_ids if node_id in costs.per_node]
    if not found:
        return None
    return sum(cost.time_ms for cost in found) if mode == "time" else sum(cost.bytes for cost in found)


def _hover(item: DrawnItem, nodes: dict[str, GraphNode], costs: GraphCosts | None, marks: dict[str, str]) -> str:
    lines = []
    if item.kind == "group":
        ops = [nodes[node_id] for node_id in item.node_ids if nodes[node_id].kind == KIND_OP]
        lines += [f"<b>{item.label}</b>", f"{len(ops)} ops, {len(item.node_ids) - len(ops)} inputs/parameters",
                  "click to expand"]
    else:
        node = nodes[item.node_ids[0]]
        lines += [f"<b>{node.record_name}</b> · {node.id}", f"module: {node.module or '(none)'}",
                  f"{node.dtype}[{','.join(map(str, node.shape))}]" + (f" · {node.phase}" if node.phase else "")]
        if node.fused_from:
            lines.append("fused: " + " + ".join(node.fused_from))
        if node.bytes is not None:
            lines.append(f"output: {format_bytes(node.bytes)}")
    if costs is not None:
        found = [costs.per_node[node_id] for node_id in item.node_ids if node_id in costs.per_node]
        if found:
            lines.append(f"time: {sum(c.time_ms for c in found):.4g} ms/step · allocated: "
                         f"{format_bytes(int(sum(c.bytes for c in found)))}/step")
        elif item.kind in ("group", KIND_OP):
            lines.append("no profile record joined")
    lines += [marks[node_id] for node_id in item.node_ids if node_id in marks][:3]
    return "<br>".join(lines)


def _symbol(item: DrawnItem, nodes: dict[str, GraphNode]) -> str:
    if item.kind == "group":
        return "square"
    if item.kind == KIND_INPUT:
        return "triangle-right"
    if item.kind == KIND_PARAMETER:
        return "square-open"
    return "diamond" if nodes[item.node_ids[0]].fused_from else "circle"


def graph_figure(view: GraphView | None, drawn: DrawnGraph | None, costs: GraphCosts | None = None,
                 mode: str = "phase", marks: dict[str, str] | None = None, title: str = "") -> go.Figure:
    """Edges as one line trace, items as markers (coloured by phase, or by time/memory per step with a colour
    bar), expanded groups as boxes; `customdata` of a marker is its item key (a click on a group expands it)."""
    figure = go.Figure()
    figure.update_layout(template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10}, title=title,
                         showlegend=True, hovermode="closest", dragmode="pan", uirevision=title,
                         xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": None},
                         legend={"orientation": "h", "y": -0.02})
    if view is None or drawn is None or not drawn.items:
        figure.add_annotation(text="no graph", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        return figure
    marks = marks or {}
    nodes = {node.id: node for node in view.nodes}
    items = drawn.items
    xs: list[float | None] = []
    ys: list[float | None] = []
    for a, b in drawn.edges:
        xs += [items[a].x, items[b].x, None]
        ys += [items[a].y, items[b].y, None]
    figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#b0b0b0", "width": 1}, hoverinfo="skip",
                                name="edges", showlegend=False))
    # NOTE: one layout update for all boxes: add_shape/add_annotation validate the whole layout on every call
    # (2 s for 50 boxes)
    figure.update_layout(
        shapes=[{"type": "rect", "x0": box.x0, "x1": box.x1, "y0": box.y0, "y1": box.y1, "layer": "below",
                 "line": {"color": with_alpha(BOX_COLOR, 0.6), "width": 1}, "fillcolor": with_alpha(BOX_COLOR, 0.06)}
                for box in drawn.boxes],
        annotations=[{"x": box.x0, "y": box.y1, "text": box.label, "showarrow": False, "xanchor": "left",
                      "yanchor": "bottom", "font": {"size": 10, "color": "#33557f"}} for box in drawn.boxes])
    show_text = len(items) <= LABELS_UP_TO
    values = [_value(item, costs, mode) for item in items]
    coloured = [i for i, value in enumerate(values) if value is not None]

    def trace(indices: list[int], name: str, **marker: object) -> go.Scatter:
        return go.Scatter(
            x=[items[i].x for i in indices], y=[items[i].y for i in indices], name=name,
            mode="markers+text" if show_text else "markers", text=[items[i].label for i in indices],
            textposition=["top center" if items[i].layer % 2 == 0 else "bottom center" for i in indices],
            textfont={"size": 9},
            customdata=[items[i].key for i in indices], hovertext=[_hover(items[i], nodes, costs, marks)
                                                                   for i in indices],
            hoverinfo="text", marker={"size": [18 if items[i].kind == "group" else 11 for i in indices],
                                      "symbol": [_symbol(items[i], nodes) for i in indices],
                                      "line": {"width": 1, "color": "#333"}, **marker})

    if mode != "phase" and coloured:
        unit = "ms/step" if mode == "time" else "bytes/step"
        figure.add_trace(trace(coloured, f"{mode} ({unit})", color=[values[i] for i in coloured],
                               colorscale="YlOrRd", showscale=True, colorbar={"title": unit, "thickness": 12}))
        rest = [i for i in range(len(items)) if values[i] is None]
        if rest:
            figure.add_trace(trace(rest, "no profile record", color="#d9d9d9"))
    else:
        by_phase: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            phases = {nodes[node_id].phase for node_id in item.node_ids if nodes[node_id].kind == KIND_OP}
            by_phase.setdefault(next(iter(phases)) if len(phases) == 1 else "", []).append(i)
        for phase, indices in by_phase.items():
            figure.add_trace(trace(indices, phase or ("inputs / mixed" if view.source == "flowscope" else "nodes"),
                                   color=PHASE_COLORS.get(phase, "#7f7f7f")))
    marked = [i for i, item in enumerate(items) if any(node_id in marks for node_id in item.node_ids)]
    if marked:
        figure.add_trace(go.Scatter(x=[items[i].x for i in marked], y=[items[i].y for i in marked], mode="markers",
                                    name="changed by a pass", hoverinfo="skip",
                                    marker={"size": 20, "symbol": "circle-open", "color": "#e15759",
                                            "line": {"width": 2}}))
    # NOTE: a long graph opens on its first VISIBLE_LAYERS layers (drag or scroll to see the rest): squeezed
    # into the width of a page, a thousand layers would be a line
    layers = max(item.layer for item in items) + 1
    low, high = min(item.y for item in items), max(item.y for item in items)
    figure.update_layout(height=max(420, min(1200, 70 * _widest(items) + 120)),
                         xaxis={"range": [-1, max(min(layers, VISIBLE_LAYERS), 3)]},
                         yaxis={"range": [low - 1.2, high + 1.2]})
    return figure


def _widest(items: tuple[DrawnItem, ...]) -> int:
    counts: dict[int, int] = {}
    for item in items:
        counts[item.layer] = counts.get(item.layer, 0) + 1
    return max(counts.values())
