"""A colour per run that stays the same across pages, filters and restarts of the board."""
from __future__ import annotations

import zlib

# Distinct hues first (Tableau 10), then darker and lighter variants (Dark2, Set1): neighbours never look alike.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#1b9e77",
    "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#377eb8", "#984ea3", "#a65628", "#17becf", "#6b6ecf",
)


def run_color(run: str) -> str:
    return PALETTE[zlib.crc32(run.encode()) % len(PALETTE)]


def with_alpha(color: str, alpha: float) -> str:
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"
