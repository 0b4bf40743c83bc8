"""Marks of a step slider whose stops are the logged steps."""
from __future__ import annotations


def step_marks(steps: list[int], labelled: int = 10) -> dict[int, str]:
    """Every step is a stop of the slider (step=None); about `labelled` of them, and the last, carry a label."""
    every = max(1, len(steps) // labelled)
    return {step: (str(step) if index % every == 0 or index == len(steps) - 1 else "")
            for index, step in enumerate(steps)}
