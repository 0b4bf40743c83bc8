"""Frozen value objects that every event-file reader yields, whichever writer produced the file."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class ScalarValue:
    """One scalar point; `value` may be NaN or ±Inf (never dropped)."""

    tag: str
    step: int
    wall_time: float
    value: float


@dataclass(frozen=True, slots=True)
class HistogramValue:
    """One histogram: bucket i holds `counts[i]` values in (`edges[i]`, `edges[i+1]`]."""

    tag: str
    step: int
    wall_time: float
    min: float
    max: float
    num: float
    sum: float
    sum_squares: float
    edges: np.ndarray = field(repr=False)  # len(counts) + 1 bucket boundaries, float64
    counts: np.ndarray = field(repr=False)  # float64


@dataclass(frozen=True, slots=True)
class TextValue:
    tag: str
    step: int
    wall_time: float
    text: str


@dataclass(frozen=True, slots=True)
class PluginValue:
    """A summary value of another plugin (e.g. hparams): kept raw so nothing read is thrown away."""

    tag: str
    step: int
    wall_time: float
    plugin_name: str
    content: bytes
    tensor: np.ndarray | None = field(default=None, repr=False)


SummaryValue = ScalarValue | HistogramValue | TextValue | PluginValue


@dataclass(frozen=True, slots=True)
class Event:
    """One decoded Event record. `values` is empty for file_version / non-summary events.

    `session_status` is "START", "STOP" or "CHECKPOINT" for a SessionLog event: a START at step S (what
    `SummaryWriter(purge_step=S)` writes on a restart) means that earlier events with step >= S are orphaned.
    """

    step: int
    wall_time: float
    values: tuple[SummaryValue, ...] = ()
    file_version: str | None = None
    session_status: str | None = None
