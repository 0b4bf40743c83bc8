"""``key_averages(group_by=...)`` and ``.table()`` over a recorded trace (the numbers the board shows too)."""
from __future__ import annotations

from typing import Any

from instrumentation.format.trace_columns import TraceColumns, columns_from_trace
from instrumentation.format.trace_stats import OpStat, format_table, op_stats


class KeyAverages(list):
    """A list of ``OpStat`` rows (sorted by self time) with ``table()``."""

    def __init__(self, rows: list[OpStat], columns: TraceColumns, group_by: str) -> None:
        super().__init__(rows)
        self.columns, self.group_by = columns, group_by

    def table(self, sort_by: str = "self_us", row_limit: int = 20) -> str:
        return format_table(op_stats(self.columns, self.group_by, sort_by), self.group_by, row_limit)


def key_averages(trace: dict[str, Any], group_by: str = "op") -> KeyAverages:
    columns = columns_from_trace(trace)
    return KeyAverages(op_stats(columns, group_by), columns, group_by)
