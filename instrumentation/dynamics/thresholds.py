"""DynamicsThresholds: when watch() turns a training signal into an alert (one frozen value object)."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class DynamicsThresholds:
    """The alert rules' numbers. A ``*_patience`` is how many consecutive checks the condition must hold; a check
    is a step on which the statistic is computed (every ``watch(..., every=N)`` steps). Update-ratio
    rules look at weights only (parameters with two or more dimensions): biases and normalisation shifts start
    at or near zero, so their ratio is large for a healthy reason.
    """

    exploding_update_ratio: float = 1.0  # one update larger than the weights it changed (healthy ≈ 1e-3..1e-2)
    exploding_patience: int = 1  # checks in a row (a single such step already rewrites the layer)
    vanishing_update_ratio: float = 1e-4  # below this the layer has stopped learning
    vanishing_patience: int = 10
    vanishing_min_steps: int = 20  # vanishing is judged from this step on (the first updates may be tiny)
    # not judged while the lr is below this share of its peak (a decayed schedule)
    vanishing_annealed_lr_fraction: float = 0.1
    dead_fraction: float = 0.9  # share of a layer's units never positive over a whole batch
    dead_patience: int = 10
    loss_spike_factor: float = 4.0  # a loss above this many times the median of the recent losses …
    loss_spike_min_rise: float = 0.5  # … and above it by this share of the first median (no alarms near zero)
    loss_window: int = 20  # recent losses the median is taken over
    loss_min_history: int = 5  # losses needed before spikes are judged

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value or value < 0:
                raise ValueError(f"DynamicsThresholds.{field.name} must be a non-negative number, got {value!r}")
        for name in ("exploding_patience", "vanishing_patience", "dead_patience", "loss_min_history"):
            if getattr(self, name) < 1 or int(getattr(self, name)) != getattr(self, name):
                raise ValueError(f"DynamicsThresholds.{name} must be an integer >= 1, got {getattr(self, name)!r}")
        if not self.loss_min_history <= self.loss_window:
            raise ValueError(f"DynamicsThresholds: loss_min_history ({self.loss_min_history}) must not exceed "
                             f"loss_window ({self.loss_window})")
