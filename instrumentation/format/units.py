"""Byte counts as people read them: IEC units (B, KiB, MiB, GiB, TiB), for text and for chart axes."""
from __future__ import annotations

import math

IEC_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_STEPS = (1, 2, 5)  # tick spacings tried at each power of 1024 (times 1, 10, 100 of it)


def format_bytes(count: float) -> str:
    """``count`` bytes in the largest IEC unit that keeps the number >= 1: "512 B", "1.5 KiB", "2.3 MiB"."""
    amount = float(count)
    for unit in IEC_UNITS:
        if abs(amount) < 1024 or unit == IEC_UNITS[-1]:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def _tick_label(value: float, scale: int, unit: str) -> str:
    amount = value / scale
    if amount == 0:
        return "0 B"
    return f"{amount:.0f} {unit}" if amount == int(amount) else f"{amount:g} {unit}"


def byte_ticks(highest: float, ticks: int = 5) -> tuple[list[float], list[str]]:
    """Tick positions from 0 to at least ``highest`` bytes, about ``ticks`` of them, at round IEC amounts (1, 2 or 5
    times a power of ten of one unit: 0, 512 KiB, 1 MiB ...), and their labels; ([0], ["0 B"]) for nothing."""
    if not highest > 0 or not math.isfinite(highest):
        return [0.0], ["0 B"]
    power = min(int(math.log(highest, 1024)), len(IEC_UNITS) - 1) if highest >= 1 else 0
    scale, unit = 1024 ** power, IEC_UNITS[power]
    raw = highest / scale / max(1, ticks - 1)
    decade = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    spacing = next((s * decade for s in _STEPS + (10,) if s * decade >= raw), 10 * decade)
    if unit == "B":
        spacing = max(1.0, spacing)
    count = int(math.ceil(highest / scale / spacing - 1e-9))
    values = [i * spacing * scale for i in range(count + 1)]
    return values, [_tick_label(v, scale, unit) for v in values]


def bytes_axis(highest: float, title: str = "bytes") -> dict:
    """A Plotly y axis for byte counts up to ``highest``, ticked in IEC units (Plotly's own formats are SI)."""
    values, labels = byte_ticks(highest)
    return {"title": {"text": title}, "tickmode": "array", "tickvals": values, "ticktext": labels,
            "rangemode": "tozero"}
