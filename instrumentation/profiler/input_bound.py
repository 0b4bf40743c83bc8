"""The ``input_bound`` diagnosis: steps that spend a large share of their time waiting for input."""
from __future__ import annotations

import collections
import os

from engine import hooks
from instrumentation.format.alert_names import FIRST_STEP, INPUT_BOUND, LAST_STEP
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.profiler.gpu_lane import gpu_busy_ns

INPUT_BOUND_SHARE = 0.3  # data wait / step time over the window above which the run is input-bound
WINDOW_STEPS = 20
COOLDOWN_STEPS = 500     # at most one alert per this many steps


class InputBoundDetector:
    """Observer of ``data_wait`` and ``step_end``: over the last ``window_steps`` steps, when summed input wait
    exceeds ``share`` of summed step time, writes an ``input_bound`` warning with the evidence.

    On a GPU (``gpu_step`` is called with each step's kernel records, by the profiler's kernel timer) a step's wait
    counts only as far as the GPU was idle in that step: ``min(data wait, step time − GPU busy time)``. The host
    waiting for input while queued kernels keep the GPU busy costs nothing; the GPU idling while the host waits
    does. The evidence then says ``basis: "gpu_idle"`` and has ``gpu_idle_ms``."""

    def __init__(self, run_dir: str | os.PathLike[str], share: float = INPUT_BOUND_SHARE,
                 window_steps: int = WINDOW_STEPS, cooldown_steps: int = COOLDOWN_STEPS) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"input_bound share must be in (0, 1), got {share!r}")
        if window_steps < 1:
            raise ValueError(f"input_bound window_steps must be >= 1, got {window_steps!r}")
        self.writer = AlertWriter(run_dir)
        self.share, self.window_steps, self.cooldown_steps = share, window_steps, cooldown_steps
        self.alerts_written = 0
        self._wait_ns = 0
        self._gpu_busy: dict[int, int] = {}  # step -> GPU busy ns (gpu_step), taken at that step's end
        self._window: collections.deque[tuple[int, int, int, int | None]] = collections.deque(maxlen=window_steps)
        self._last_alert_step: int | None = None
        self._subscribed = False

    def start(self) -> InputBoundDetector:
        if not self._subscribed:
            hooks.add_recorder(self)
            self._subscribed = True
        return self

    def stop(self) -> None:
        if self._subscribed:
            hooks.remove_recorder(self)
            self._subscribed = False

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self._wait_ns += event.wait_ns

    def gpu_step(self, step: int, kernels: list[tuple]) -> None:
        """The kernel records ``(op index, stream, start_ns, end_ns)`` of ``step`` (read at its end)."""
        self._gpu_busy[step] = gpu_busy_ns(kernels)

    def step_end(self, event: hooks.StepEvent) -> None:
        busy = self._gpu_busy.pop(event.step, None)
        idle = None if busy is None else max(event.duration_ns - busy, 0)
        wait = min(self._wait_ns, event.duration_ns)
        self._window.append((event.step, wait if idle is None else min(wait, idle), event.duration_ns, idle))
        self._wait_ns = 0
        if len(self._window) < self.window_steps:
            return
        if self._last_alert_step is not None and event.step - self._last_alert_step < self.cooldown_steps:
            return
        wait_ns = sum(w for _, w, _, _ in self._window)
        step_ns = sum(d for _, _, d, _ in self._window)
        idles = [i for _, _, _, i in self._window if i is not None]
        if step_ns <= 0 or wait_ns / step_ns <= self.share:
            return
        self._last_alert_step = event.step
        self.alerts_written += 1
        first, last = self._window[0][0], self._window[-1][0]
        observed = wait_ns / step_ns
        self.writer.write(Alert(
            kind=INPUT_BOUND, severity="warning", subject="input pipeline", step=event.step,
            message=(f"steps {first}-{last} spent {observed:.0%} of their time waiting for input"
                     f"{' with the GPU idle' if idles else ''} (threshold "
                     f"{self.share:.0%}): the input pipeline limits training speed; try prefetch(), "
                     "map(num_parallel_calls=...) or cache()"),
            evidence={FIRST_STEP: first, LAST_STEP: last, "steps": len(self._window),
                      "data_wait_share": observed, "threshold": self.share,
                      "data_wait_ms": wait_ns / 1e6, "step_time_ms": step_ns / 1e6,
                      "mean_data_wait_ms": wait_ns / 1e6 / len(self._window),
                      "mean_step_time_ms": step_ns / 1e6 / len(self._window),
                      "basis": "gpu_idle" if idles else "data_wait",
                      **({"gpu_idle_ms": sum(idles) / 1e6} if idles else {})}))
