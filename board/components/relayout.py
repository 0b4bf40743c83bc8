"""Turn Plotly's relayoutData (a zoom, a reset) into the x window the data layer understands."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


@dataclass(frozen=True, slots=True)
class Zoom:
    window: tuple[float, float] | None  # None: back to the whole series


def _x_number(value: Any, x_axis: str) -> float:
    if x_axis == "wall" and isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace(" ", "T"))
        return parsed.replace(tzinfo=timezone.utc).timestamp()  # the chart shows UTC
    return float(value)


def window_from_relayout(relayout: dict[str, Any], x_axis: str) -> Zoom | None:
    """The new x window, a reset (`Zoom(None)`), or None when the event does not change the x range."""
    if relayout.get("xaxis.autorange") or relayout.get("autosize") and "xaxis.range[0]" not in relayout:
        return Zoom(None) if relayout.get("xaxis.autorange") else None
    if "xaxis.range[0]" in relayout and "xaxis.range[1]" in relayout:
        low, high = relayout["xaxis.range[0]"], relayout["xaxis.range[1]"]
    elif isinstance(relayout.get("xaxis.range"), list) and len(relayout["xaxis.range"]) == 2:
        low, high = relayout["xaxis.range"]
    else:
        return None
    try:
        return Zoom((_x_number(low, x_axis), _x_number(high, x_axis)))
    except (TypeError, ValueError):
        return None
