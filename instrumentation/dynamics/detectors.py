"""Alert rules over the watched signals: exploding/vanishing updates, dead layers, loss spikes (``loss_rule``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from instrumentation.dynamics.loss_rule import LossSpikeRule
from instrumentation.dynamics.thresholds import DynamicsThresholds
from instrumentation.format.alert_names import DEAD_UNITS, EXPLODING_GRADIENT, VANISHING_GRADIENT
from instrumentation.format.alerts import Alert


@dataclass(slots=True)
class _Episode:
    """Consecutive checks on which one (kind, subject) condition held; reported once per episode."""

    first_step: int = -1
    checks: int = 0
    reported: bool = False
    values: list[float] = field(default_factory=list)


class Streaks:
    """Counts consecutive checks per (kind, subject) and says when a streak reaches the patience."""

    def __init__(self) -> None:
        self.episodes: dict[tuple[str, str], _Episode] = {}

    def unconfirmed(self) -> bool:
        """Whether a condition holds that has not reached its patience yet (an episode to confirm or end)."""
        return any(not episode.reported for episode in self.episodes.values())

    def observe(self, kind: str, subject: str, step: int, holds: bool, value: float, patience: int) -> _Episode | None:
        """The episode to report now (once, when it reaches the patience), else None; a miss ends the episode."""
        key = (kind, subject)
        if not holds:
            self.episodes.pop(key, None)
            return None
        episode = self.episodes.setdefault(key, _Episode(first_step=step))
        episode.checks += 1
        episode.values.append(value)
        del episode.values[:-patience]
        if episode.checks >= patience and not episode.reported:
            episode.reported = True
            return episode
        return None


class DynamicsRules:
    """Turns per-step statistics into alerts according to a ``DynamicsThresholds``."""

    def __init__(self, thresholds: DynamicsThresholds) -> None:
        self.thresholds = thresholds
        self.streaks = Streaks()
        self.loss_rule = LossSpikeRule(thresholds)
        self.loss = self.loss_rule.observe  # (step, value) -> alerts: every loss (docs/dynamics.md)
        self.learning_rate: float | None = None
        self.peak_learning_rate = 0.0

    def observe_learning_rate(self, lr: float) -> None:
        self.learning_rate = lr
        if math.isfinite(lr):
            self.peak_learning_rate = max(self.peak_learning_rate, lr)

    def _annealed(self) -> bool:
        """The schedule, not the gradients, has shrunk the updates (lr below its share of the peak lr)."""
        lr = self.learning_rate
        return lr is not None and lr < self.thresholds.vanishing_annealed_lr_fraction * self.peak_learning_rate

    def updates(self, step: int, names: tuple[str, ...], ratios: list[float], grad_norms: list[float],
                ndims: dict[str, int]) -> list[Alert]:
        """Exploding when ‖Δw‖/‖w‖ exceeds the threshold (or is not finite), vanishing when it stays below its own."""
        t, alerts, episodes = self.thresholds, [], self.streaks.episodes
        annealed = None
        for name, ratio, grad_norm in zip(names, ratios, grad_norms):
            if ndims.get(name, 0) < 2:
                continue
            finite = math.isfinite(ratio)
            exploding = not finite or not math.isfinite(grad_norm) or ratio > t.exploding_update_ratio
            vanishing = step >= t.vanishing_min_steps and finite and ratio < t.vanishing_update_ratio
            if vanishing:
                if annealed is None:
                    annealed = self._annealed()
                vanishing = not annealed
            for kind, holds in ((EXPLODING_GRADIENT, exploding), (VANISHING_GRADIENT, vanishing)):
                if holds or (kind, name) in episodes:  # NOTE: the common case, nothing to count, costs nothing
                    alert = self._update_alert(kind, holds, step, name, ratio, grad_norm)
                    if alert is not None:
                        alerts.append(alert)
        return alerts

    def _update_alert(self, kind: str, holds: bool, step: int, name: str, ratio: float,
                      grad_norm: float) -> Alert | None:
        t = self.thresholds
        if kind == EXPLODING_GRADIENT:
            patience, threshold, severity = t.exploding_patience, t.exploding_update_ratio, "error"
            verdict = (f"above {threshold:g} (or not finite); healthy is about 1e-3..1e-2: lower the learning rate or "
                       "clip gradients")
        else:
            patience, threshold, severity = t.vanishing_patience, t.vanishing_update_ratio, "warning"
            verdict = f"below {threshold:g}: this layer has stopped learning"
        episode = self.streaks.observe(kind, name, step, holds, ratio, patience)
        if episode is None:
            return None
        message = (f"{name}: update ratio ‖Δw‖/‖w‖ {ratio:.3g} (gradient norm {grad_norm:.3g}), "
                   f"{episode.checks} check(s) since step {episode.first_step} " + verdict)
        return Alert(kind, severity, name, message, step,
                     evidence={"update_ratios": episode.values, "grad_norm": grad_norm,
                               "first_step": episode.first_step, "threshold": threshold})

    def dead(self, step: int, layer: str, dead_fraction: float) -> list[Alert]:
        t = self.thresholds
        episode = self.streaks.observe(DEAD_UNITS, layer, step, dead_fraction >= t.dead_fraction, dead_fraction,
                                       t.dead_patience)
        if episode is None:
            return []
        return [Alert(DEAD_UNITS, "warning", layer,
                      f"{layer}: {dead_fraction:.0%} of its units were never positive over a batch, for "
                      f"{episode.checks} check(s) since step {episode.first_step} (threshold {t.dead_fraction:.0%})",
                      step, evidence={"dead_fractions": episode.values, "first_step": episode.first_step,
                                      "threshold": t.dead_fraction})]
