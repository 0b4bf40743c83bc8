"""Which points of a PR curve are drawn: thresholds where something is predicted positive (TP + FP > 0).

At a threshold above every prediction nothing is predicted positive: precision is 0/0 (writers store 0) and recall
0, a point TensorBoard's PR-curve view leaves out; drawn, it adds a segment to (0, 0) that no threshold measured."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.media import PrCurvePoint


@dataclass(frozen=True, slots=True)
class DrawnCurve:
    """The drawn thresholds of one curve, with their rows, and how many were left out."""

    step: int
    thresholds: np.ndarray
    rows: dict[str, np.ndarray]
    left_out: int


def drawn_curve(point: PrCurvePoint) -> DrawnCurve:
    predicted = point.rows["true_positives"] + point.rows["false_positives"]
    keep = predicted > 0
    return DrawnCurve(point.step, point.thresholds[keep], {name: row[keep] for name, row in point.rows.items()},
                      int((~keep).sum()))
