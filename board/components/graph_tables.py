"""The Graph page's tables: what each pass removed or merged, the fused nodes, one node, eager vs traced rows."""
from __future__ import annotations

from dash import html

from board.data.graph import GraphPass, GraphView
from board.data.graph_profile import ComparisonRow
from instrumentation.format.units import format_bytes

MAX_IDS_SHOWN = 12


def _ids(ids: tuple[str, ...] | list[str], original: GraphView | None) -> str:
    """`n7 (Mul), n9 (Add)`: ids with their op in the graph the pass ran on, when it is at hand."""
    ops = {node.id: node.record_name for node in original.nodes} if original is not None else {}
    shown = [f"{node_id} ({ops[node_id]})" if node_id in ops else node_id for node_id in ids[:MAX_IDS_SHOWN]]
    more = len(ids) - MAX_IDS_SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") if ids else "—"


def passes_table(passes: tuple[GraphPass, ...], original: GraphView | None) -> html.Div | html.Table:
    if not passes:
        return html.Div("No optimised graph with passes for this graph.", className="fs-muted", id="graph-no-passes")
    header = html.Tr([html.Th("pass"), html.Th("nodes"), html.Th("removed"), html.Th("merged")])
    rows = [html.Tr([html.Td(entry.name), html.Td(f"{entry.nodes_before} → {entry.nodes_after}"),
                     html.Td(_ids(entry.removed, original)),
                     html.Td("; ".join(f"{_ids(sources, original)} → {into}" for into, sources in entry.merged)
                             or "—")],
                    id=f"graph-pass-{index}")
            for index, entry in enumerate(passes)]
    return html.Table([html.Thead(header), html.Tbody(rows)], className="fs-table", id="graph-passes-table")


def fused_table(view: GraphView) -> html.Div | html.Table:
    fused = [node for node in view.nodes if node.fused_from]
    if not fused:
        return html.Div()
    header = html.Tr([html.Th("fused node"), html.Th("ops it runs"), html.Th("module"), html.Th("shape")])
    rows = [html.Tr([html.Td(node.id), html.Td(" + ".join(node.fused_from)), html.Td(node.module or "(none)"),
                     html.Td(f"{node.dtype}[{','.join(map(str, node.shape))}]")]) for node in fused]
    return html.Div([html.H4("Fused groups"),
                     html.Table([html.Thead(header), html.Tbody(rows)], className="fs-table", id="graph-fused-table")])


def node_detail(view: GraphView, key: str | None) -> str:
    node = next((node for node in view.nodes if node.id == key), None)
    if node is None:
        return ""
    parts = [f"{node.id}: {node.record_name}", f"module {node.module or '(none)'}",
             f"{node.dtype}[{','.join(map(str, node.shape))}]", f"inputs: {', '.join(node.inputs) or '—'}"]
    if node.phase:
        parts.append(node.phase)
    if node.bytes is not None:
        parts.append(f"output {format_bytes(node.bytes)}")
    return " · ".join(parts)


def comparison_rows(rows: list[ComparisonRow]) -> list[dict]:
    return [{"key": row.key, "eager_ms": round(row.eager_ms, 4), "traced_ms": round(row.traced_ms, 4),
             "ratio": None if row.time_ratio is None else round(row.time_ratio, 3),
             "eager_bytes": round(row.eager_bytes), "traced_bytes": round(row.traced_bytes)} for row in rows]
