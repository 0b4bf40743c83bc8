"""The top-ops table: a sortable DataTable of OpStat rows."""
from __future__ import annotations

import math

from dash import dash_table

from instrumentation.format.trace_stats import OpStat

COLUMNS = (("key", "name", "text"), ("calls", "calls", "numeric"), ("self_ms", "self ms", "numeric"),
           ("total_ms", "total ms", "numeric"), ("mean_us", "mean µs", "numeric"),
           ("percent_of_step", "% of step", "numeric"), ("bytes", "self allocated B (gross)", "numeric"),
           ("gflop", "GFLOP", "numeric"))
# With device time (kernel events), after the CPU columns: the GPU time of the group's kernels, summed and mean.
CUDA_COLUMNS = (("cuda_ms", "CUDA ms", "numeric"), ("cuda_mean_us", "CUDA mean µs", "numeric"))
# With frees recorded (torch's profile_memory=True), torch's two memory columns: allocated minus freed, by the ops
# themselves ("Self CPU Mem") and with the ops nested in them ("CPU Mem").
NET_COLUMNS = (("self_net_bytes", "self mem B (net)", "numeric"), ("total_net_bytes", "total mem B (net)", "numeric"))


def columns_for(stats: list[OpStat]) -> tuple[tuple[str, str, str], ...]:
    """The table's columns: the CUDA ones only when some group ran kernels, the net memory ones only when the
    trace records frees."""
    columns = COLUMNS[:6] + (CUDA_COLUMNS if any(stat.cuda_calls for stat in stats) else ())
    if any(stat.self_net_bytes is not None for stat in stats):
        columns += NET_COLUMNS
    return columns + COLUMNS[6:]


def op_rows(stats: list[OpStat], top_level: str = "(model)") -> list[dict]:
    return [{"key": stat.key or top_level, "calls": stat.calls, "self_ms": round(stat.self_us / 1e3, 4),
             "total_ms": round(stat.total_us / 1e3, 4), "mean_us": round(stat.mean_us, 2),
             "percent_of_step": round(stat.percent_of_step, 2), "bytes": stat.bytes,
             "gflop": None if math.isnan(stat.flops) else round(stat.flops / 1e9, 6),
             "cuda_ms": round(stat.cuda_us / 1e3, 4), "cuda_mean_us": round(stat.cuda_mean_us, 2),
             "self_net_bytes": stat.self_net_bytes, "total_net_bytes": stat.total_net_bytes} for stat in stats]


def ops_table(table_id: str, rows: list[dict], group_label: str = "op") -> dash_table.DataTable:
    columns = [{"id": key, "name": group_label if key == "key" else name, "type": kind} for key, name, kind in COLUMNS]
    return dash_table.DataTable(id=table_id, columns=columns, data=rows, sort_action="native", page_size=25,
                                sort_by=[{"column_id": "self_ms", "direction": "desc"}],
                                style_table={"overflowX": "auto"},
                                style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": 13,
                                            "padding": "4px 8px"},
                                style_cell_conditional=[{"if": {"column_id": "key"}, "textAlign": "left",
                                                         "maxWidth": "28em", "overflow": "hidden",
                                                         "textOverflow": "ellipsis"}],
                                style_header={"backgroundColor": "#eef1f4", "fontWeight": 600})
