"""A style per run (colour, line dash, marker symbol) that is the same on every page and across reloads, and that no
two runs of the log directory share: the store gives each run's group a slot (`LogdirStore.run_slot`); a slot is a
hue of `PALETTE`, then, beyond the palette, the same hues with another dash and marker; the ranks of one job are
shades of their group's hue."""
from __future__ import annotations

import colorsys
from dataclasses import dataclass

from flask import has_app_context

from board.context import board_context
from board.data.run_slots import RunSlot, RunSlots

# Ten clearly different hues (D3's category10), each readable on white.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "hexagon", "pentagon", "cross",
           "triangle-down", "hourglass", "bowtie")
# Lightness shifts of a hue for the runs of one group: the group's own run the hue itself, rank N shade N + 1.
SHADES = (0.0, -0.14, 0.14, -0.24, 0.24, -0.32)
_OUTSIDE_A_BOARD = RunSlots()  # slots for figures built outside a board app (tests, scripts)


@dataclass(frozen=True, slots=True)
class RunStyle:
    color: str  # "#rrggbb"
    dash: str  # Plotly line dash
    symbol: str  # Plotly marker symbol


def shade(color: str, lightness_shift: float) -> str:
    """`color` lighter (> 0) or darker (< 0) by `lightness_shift` of HLS lightness, the hue kept."""
    if lightness_shift == 0:
        return color
    red, green, blue = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    hue, lightness, saturation = colorsys.rgb_to_hls(red, green, blue)
    lightness = min(0.9, max(0.12, lightness + lightness_shift))
    return "#" + "".join(f"{round(c * 255):02x}" for c in colorsys.hls_to_rgb(hue, lightness, saturation))


def slot_style(slot: RunSlot) -> RunStyle:
    """The style of a slot. Group slots beyond the palette (`variant` > 0) and ranks beyond the shades (`wrap` > 0)
    change the dash and the marker, so that no two slots share colour, dash and marker (60 groups of up to 11
    ranks)."""
    variant = slot.group // len(PALETTE)
    shade_index = 0 if slot.rank is None else slot.rank + 1
    wrap = shade_index // len(SHADES)
    color = shade(PALETTE[slot.group % len(PALETTE)], SHADES[shade_index % len(SHADES)])
    return RunStyle(color, DASHES[(variant - wrap) % len(DASHES)],
                    SYMBOLS[(variant + len(DASHES) * wrap) % len(SYMBOLS)])


def run_style(run: str) -> RunStyle:
    """The run's style, from the board's store (in a board app), else from slots kept for this process."""
    if has_app_context():
        return slot_style(board_context().store.run_slot(run))
    return slot_style(_OUTSIDE_A_BOARD.slot(run))


def run_color(run: str) -> str:
    return run_style(run).color


def with_alpha(color: str, alpha: float) -> str:
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"
