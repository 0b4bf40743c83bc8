"""A colour per run that stays the same across pages, filters and restarts of the board."""
from __future__ import annotations

import zlib

# Plotly's "Dark24"-like qualitative palette without the greys, readable on white.
PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#0b5394", "#a61c00", "#38761d", "#b45f06", "#674ea7", "#741b47", "#0097a7",
    "#6aa84f", "#cc0000", "#3d85c6", "#e69138",
)


def run_color(run: str) -> str:
    return PALETTE[zlib.crc32(run.encode()) % len(PALETTE)]


def with_alpha(color: str, alpha: float) -> str:
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"
