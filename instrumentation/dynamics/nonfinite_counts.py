"""Which `nonfinite/<param>/<stat>` NaN/Inf counts a step writes: those of parameters where one is not zero."""
from __future__ import annotations

from instrumentation.dynamics.parameters import ParameterStats
from instrumentation.format import tags as tag_names


class NonfiniteCounts:
    """Per parameter, its four counts (NaN and ±Inf in the gradient and in the weights before the step) at every
    measured step where one of them is not zero, and zeros once at the first measured step after they all went
    back to zero, so that a chart ends where the parameter recovered. A healthy run writes none: the first step
    of a parameter's series is where NaN/Inf reached it."""

    def __init__(self) -> None:
        self._tags: dict[str, tuple[str, ...]] = {}
        self._nonzero: set[str] = set()  # parameters whose counts were last written non-zero

    def scalars(self, stats: ParameterStats) -> tuple[list[str], list[float]]:
        """The (tags, values) to write for ``stats.step``; empty lists in the common case."""
        columns = (stats.grad_nan_counts, stats.grad_inf_counts, stats.weight_nan_counts, stats.weight_inf_counts)
        if not self._nonzero and not any(map(any, columns)):
            return [], []
        tags: list[str] = []
        values: list[float] = []
        for name, *counts in zip(stats.names, *columns):
            nonzero = any(counts)
            if nonzero or name in self._nonzero:
                tags.extend(self._tags_of(name))
                values.extend(float(count) for count in counts)
                (self._nonzero.add if nonzero else self._nonzero.discard)(name)
        return tags, values

    def _tags_of(self, name: str) -> tuple[str, ...]:
        found = self._tags.get(name)
        if found is None:
            found = self._tags[name] = tuple(tag_names.nonfinite_tag(name, stat) for stat in tag_names.NONFINITE_STATS)
        return found
