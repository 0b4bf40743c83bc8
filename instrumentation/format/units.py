"""Byte counts as people read them: IEC units (B, KiB, MiB, GiB, TiB), for text and for chart axes."""
from __future__ import annotations

import math
from dataclasses import dataclass

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


# A tag's unit, read from its name's suffix (`perf/step_time_ms`, `mem/host/rss_bytes`): the base unit it is counted
# in and that unit's size in the base (bytes, or seconds).
UNIT_SUFFIXES = {"_bytes": ("bytes", 1.0), "_ns": ("s", 1e-9), "_us": ("s", 1e-6), "_ms": ("s", 1e-3), "_s": ("s", 1.0)}
SI_TIME_UNITS = (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0))


@dataclass(frozen=True, slots=True)
class TagUnit:
    kind: str  # "bytes" or "s"
    size: float  # one unit of the tag's values, in the kind's base (1e-3 for `_ms`)


def tag_unit(tag: str) -> TagUnit | None:
    """The unit a tag's values are in, from its suffix (`_bytes`, `_ns`, `_us`, `_ms`, `_s`), else None."""
    for suffix, (kind, size) in UNIT_SUFFIXES.items():
        if tag.endswith(suffix) and len(tag) > len(suffix):
            return TagUnit(kind, size)
    return None


def _display_unit(peak_base: float, kind: str) -> tuple[str, float]:
    """(name, size in the base) of the largest unit that keeps ``peak_base`` >= 1 of it."""
    if kind == "bytes":
        power = min(int(math.log(peak_base, 1024)), len(IEC_UNITS) - 1) if peak_base >= 1 else 0
        return IEC_UNITS[power], float(1024 ** power)
    chosen = SI_TIME_UNITS[0]
    for name, size in SI_TIME_UNITS:
        if peak_base >= size:
            chosen = (name, size)
    return chosen


def unit_ticks(low: float, high: float, unit: TagUnit, ticks: int = 5) -> tuple[list[float], list[str]]:
    """Tick positions (in the tag's own units) covering [low, high] at round amounts of one display unit (IEC for
    bytes, SI for times: 1, 2 or 5 times a power of ten), and their labels: "512 KiB", "1.5 ms"."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        raise ValueError(f"tick range must be finite and ordered, got [{low}, {high}]")
    name, size = _display_unit(max(abs(low), abs(high)) * unit.size, unit.kind)
    scale = size / unit.size  # one display unit, in the tag's units
    lo, hi = low / scale, high / scale
    raw = (hi - lo) / max(1, ticks - 1) or max(abs(hi), 1.0)
    decade = 10 ** math.floor(math.log10(raw))
    spacing = next(s * decade for s in _STEPS + (10,) if s * decade >= raw * (1 - 1e-9))
    first, last = math.floor(lo / spacing + 1e-9), math.ceil(hi / spacing - 1e-9)
    amounts = [i * spacing for i in range(first, last + 1)]
    digits = max(0, -math.floor(math.log10(spacing)))
    return [a * scale for a in amounts], [f"{a:.{digits}f} {name}" if a else f"0 {name}" for a in amounts]
