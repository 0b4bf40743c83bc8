"""``schedule(wait, warmup, active, repeat, skip_first)``: which steps to record, as ``torch.profiler.schedule``."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class ProfilerAction(enum.Enum):
    NONE = 0              # not recording
    WARMUP = 1            # recording, to be discarded (the first recorded step pays for lazy setup)
    RECORD = 2            # recording
    RECORD_AND_SAVE = 3   # recording; the cycle ends with this step: export and call on_trace_ready


@dataclass(frozen=True, slots=True)
class Schedule:
    """Callable: step number (0-based, counted by the profiler) -> ProfilerAction.

    After ``skip_first`` steps, cycles of ``wait`` idle, ``warmup`` discarded and ``active`` recorded steps,
    ``repeat`` times (0: forever). The last active step of a cycle is ``RECORD_AND_SAVE``."""

    wait: int
    warmup: int
    active: int
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "repeat", "skip_first"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"schedule: {name} must be a non-negative integer, got {getattr(self, name)!r}")
        if not isinstance(self.active, int) or self.active < 1:
            raise ValueError(f"schedule: active must be a positive integer, got {self.active!r}")

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"schedule: step must be >= 0, got {step}")
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < self.wait:
            return ProfilerAction.NONE
        if position < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def next_change(self, step: int) -> int | None:
        """The first step after ``step`` whose action may differ from ``self(step)``, or that follows a cycle's
        last step (None: every later step is NONE). The steps in between have nothing to start or end."""
        if step < self.skip_first:
            return self.skip_first
        offset = step - self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and offset // cycle >= self.repeat:
            return None
        position = offset % cycle
        for boundary in (self.wait, self.wait + self.warmup, cycle - 1):
            if position < boundary:
                return step - position + boundary
        return step + 1

    def as_dict(self) -> dict[str, int]:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active, "repeat": self.repeat,
                "skip_first": self.skip_first}


def schedule(wait: int, warmup: int, active: int, repeat: int = 1, skip_first: int = 0) -> Schedule:
    return Schedule(wait, warmup, active, repeat, skip_first)


def always_record(step: int) -> ProfilerAction:
    """The action without a schedule: record every step until the profiler stops."""
    return ProfilerAction.RECORD
