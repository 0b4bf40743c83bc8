"""RankMonitor: per-step communication figures of one rank of a data-parallel job, replica checksums and the
straggler check (docs/dynamics.md, *Data-parallel training*)."""
from __future__ import annotations

from time import perf_counter_ns as _now_ns
from time import time as _wall
from typing import Any

import numpy as np

from engine import hooks
from instrumentation.budget import Pace
from instrumentation.distributed.checksum import ReplicaCheck
from instrumentation.distributed.context import initialized
from instrumentation.distributed.cpu_wait import ThreadSchedule, cpu_wait_ns
from instrumentation.distributed.straggler import (DEFAULT_MARGIN, DEFAULT_MIN_STEPS, DEFAULT_WARMUP_STEPS,
                                                   DEFAULT_WINDOW, StragglerRule, StragglerSettings)
from instrumentation.dynamics.guard import FailureReporter
from instrumentation.format import tags as tag_names
from instrumentation.format.alerts import Alert, AlertWriter

DEFAULT_CHECKSUM_EVERY = 50  # steps between two replica checksums (0: never)


class EngineGroup:
    """The ranks of ``engine.distributed`` (rank 0 of 1 when it is not initialised: collectives are not called)."""

    def __init__(self) -> None:
        self._module = initialized()

    def rank(self) -> int:
        return int(self._module.rank()) if self._module is not None else 0

    def world_size(self) -> int:
        return int(self._module.world_size()) if self._module is not None else 1

    def all_gather(self, array: np.ndarray) -> np.ndarray:
        if self._module is None:
            return np.asarray(array)[None]
        return self._module.all_gather(array)


def step_comm(intervals: list[tuple[int, int, int]], start_ns: int, end_ns: int) -> tuple[int, int]:
    """(ns with at least one collective in flight, bytes) of ``(start_ns, end_ns, nbytes)`` collectives within the step
    ``[start_ns, end_ns]``: each interval clipped to it; one that ended before it began (a collective between steps)
    is left out, its bytes too."""
    clipped = sorted((max(s, start_ns), min(e, end_ns), b) for s, e, b in intervals if e >= start_ns and s <= end_ns)
    union_ns = nbytes = 0
    reach = start_ns
    for s, e, b in clipped:
        nbytes += b
        if e > reach:
            union_ns += e - max(s, reach)
            reach = e
    return union_ns, nbytes


class RankMonitor:
    """An engine recorder for one rank of a data-parallel job, writing to ``writer`` (that rank's ``SummaryWriter``:
    ``rank_logdir``). At every step it keeps a row — ``perf/step_time_ms``, ``perf/data_time_ms``,
    ``perf/allreduce_ms`` (time with a collective in flight: the union of the step's collective intervals),
    ``perf/allreduce_wait_ms`` (the optimizer side waiting for buckets), ``perf/comm_bytes`` and
    ``perf/cpu_wait_ms`` (outside the allreduce wait, ready to run but waiting for a CPU: ``cpu_wait``) — handed to
    the writer in batches, and the step's busy time (step − allreduce wait − data wait − CPU wait).

    Every ``straggler_window`` steps the ranks all_gather the window's busy times and each decides about itself
    (``straggler``: busy ≥ (1 + ``straggler_margin``) × the other ranks' median on ≥ ``straggler_min_steps`` of the
    window's steps; once per episode; a window beginning before ``straggler_warmup_steps`` is not reported: the
    first steps hold every observer's warm-up). Every ``checksum_every`` steps (0: never; needs ``model``) it logs
    ``dist/param_checksum`` and compares every parameter's crc32 with rank 0's (``replica_divergence``). Both make
    collective calls at the same steps on every rank (the engine's step numbers): create the monitor at the same step
    on every rank. Alerts go to the writer's run (``plugins/alerts/alerts.jsonl``) and to ``alerts``.

    ``group``: an object with ``rank()``, ``world_size()`` and ``all_gather(array)`` (default: ``engine.distributed``).
    ``watch(model, writer)`` attaches one by itself in a job of more than one rank."""

    writes_step_times = True  # a Watch it is attached to leaves perf/step_time_ms and perf/data_time_ms to it

    def __init__(self, writer: Any, model: Any = None, *, checksum_every: int = DEFAULT_CHECKSUM_EVERY,
                 straggler_window: int = DEFAULT_WINDOW, straggler_margin: float = DEFAULT_MARGIN,
                 straggler_min_steps: int = DEFAULT_MIN_STEPS, straggler_warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 group: Any = None) -> None:
        if not isinstance(getattr(writer, "log_dir", None), str) or not callable(getattr(writer, "add_scalar", None)):
            raise TypeError(f"RankMonitor: writer must be a SummaryWriter (with log_dir and add_scalar), got "
                            f"{type(writer).__name__}")
        if isinstance(checksum_every, bool) or not isinstance(checksum_every, int) or checksum_every < 0:
            raise ValueError(f"RankMonitor: checksum_every must be an integer >= 0 (0: never), got {checksum_every!r}")
        if model is not None and not callable(getattr(model, "named_parameters", None)):
            raise TypeError(f"RankMonitor: model must be an engine.nn.Module, got {type(model).__name__}")
        self.writer = writer
        self.settings = StragglerSettings(straggler_window, straggler_margin, straggler_min_steps,
                                          straggler_warmup_steps)
        self.group = group if group is not None else EngineGroup()
        self.rank, self.world_size = int(self.group.rank()), int(self.group.world_size())
        self.checksum_every = checksum_every if model is not None else 0
        self.alerts: list[Alert] = []
        self.checksums: list[tuple[int, int]] = []  # (step, combined checksum) logged so far
        self.closed = False
        self._replicas = ReplicaCheck(list(model.named_parameters()), self.rank, self.group.all_gather) \
            if self.checksum_every else None
        self._straggler = StragglerRule(self.rank, self.world_size, self.settings)
        self._alert_writer = AlertWriter(writer.log_dir)
        self._guard = FailureReporter("flowscope.rank_monitor")
        self._add_rows = getattr(writer, "add_scalar_rows", None)
        # the step in progress
        self._comm: list[tuple[int, int, int]] = []
        self._wait_ns = self._data_ns = 0
        self.schedule = ThreadSchedule()  # the training thread's CPU wait (read at its steps' begin and end)
        self._schedule_at_begin: tuple[int, int] | None = None
        # the window: busy times by step % window, the rows not handed over yet, the cost measured
        self._busy_ms = np.full(self.settings.window, np.nan)
        # (step, wall time, row): one append a step, so that a flush from another thread (an abort) takes whole rows
        self._rows: list[tuple[int, float, list[float]]] = []
        self._spent_ns = self._window_step_ns = self._window_steps = 0
        hooks.add_recorder(self)
        if callable(getattr(writer, "add_flush_callback", None)):
            writer.add_flush_callback(self.flush)

    # ---- recorder methods: a few attribute updates each --------------------------------------------------
    def communication(self, event: Any) -> None:
        self._comm.append((event.start_ns, event.end_ns, event.nbytes))

    def step_begin(self, event: hooks.StepEvent) -> None:
        self._schedule_at_begin = self.schedule.read()

    def comm_wait(self, event: Any) -> None:
        self._wait_ns += event.duration_ns

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self._data_ns += event.wait_ns

    def step_end(self, event: hooks.StepEvent) -> None:
        began = _now_ns()
        step = event.step
        # NOTE: the step's figures fail alone: the collective calls below must happen whatever (the others wait)
        self._guard.call("the step's figures", self._record, event)
        window = self.settings.window
        if (step + 1) % window == 0:
            if self.world_size > 1:
                self._guard.call("the straggler check", self._straggler_check, step)
            self._busy_ms[:] = np.nan
        if self.checksum_every and (step + 1) % self.checksum_every == 0:
            self._guard.call("the replica checksum", self._checksum, step)
        if len(self._rows) >= window:
            self._guard.call("writing the step rows", self.flush)
        self._spent_ns += _now_ns() - began
        if (step + 1) % window == 0:
            self._guard.call("writing its own cost", self._write_cost, step)

    def _record(self, event: hooks.StepEvent) -> None:
        """The step's row and busy time from what the recorder methods gathered."""
        step, step_ns = event.step, event.duration_ns
        allreduce_ns, nbytes = step_comm(self._comm, event.time_ns - step_ns, event.time_ns) if self._comm else (0, 0)
        wait_ns, data_ns, at_begin = self._wait_ns, self._data_ns, self._schedule_at_begin
        self._comm, self._wait_ns, self._data_ns, self._schedule_at_begin = [], 0, 0, None
        busy_ns = max(step_ns - wait_ns - data_ns, 0)
        at_end = self.schedule.read() if at_begin is not None else None
        cpu_wait = 0 if at_end is None else cpu_wait_ns(at_end[0] - at_begin[0], at_end[1] - at_begin[1], wait_ns,
                                                       busy_ns)
        self._rows.append((step, _wall(), [step_ns / 1e6, data_ns / 1e6, allreduce_ns / 1e6, wait_ns / 1e6,
                                           float(nbytes), cpu_wait / 1e6]))
        self._busy_ms[step % self.settings.window] = (busy_ns - cpu_wait) / 1e6
        self._window_step_ns += step_ns
        self._window_steps += 1

    # ---- periodic work ---------------------------------------------------------------------------------
    def _straggler_check(self, step: int) -> None:
        window = self.settings.window  # NOTE: windows end at steps window-1, 2*window-1...: slot i is step first+i
        busy_ms = np.asarray(self.group.all_gather(self._busy_ms.copy()), dtype=np.float64)
        alert = self._straggler.window(step - window + 1, step, busy_ms.reshape(self.world_size, window))
        if alert is not None:
            self._report(alert)

    def _checksum(self, step: int) -> None:
        combined, alert = self._replicas.run(step)
        if self._replicas.failure is not None:
            self._guard.failed_at("computing the parameter checksums", self._replicas.failure)
        if combined is not None:
            self.checksums.append((step, combined))
            self.writer.add_scalar(tag_names.PARAM_CHECKSUM, float(combined), step)
        if alert is not None:
            self._report(alert)

    def _write_cost(self, step: int) -> None:
        steps, spent_ns, step_ns = self._window_steps, self._spent_ns, self._window_step_ns
        self._spent_ns = self._window_step_ns = self._window_steps = 0
        if steps:
            Pace(tag_names.RANK_MONITOR_OBSERVER, self.settings.window, spent_ns / steps / 1e6, step_ns / steps / 1e6,
                 spent_ns / step_ns if step_ns > 0 else 0.0).write(self.writer, step)

    def _report(self, alert: Alert) -> None:
        self.alerts.append(alert)
        self._alert_writer.write(alert)

    # ---- writing and lifetime --------------------------------------------------------------------------
    def flush(self) -> None:
        """Hand the rows kept so far to the writer (also called at the start of the writer's ``flush()``)."""
        kept, self._rows = self._rows, []
        if not kept:
            return
        steps, walls, rows = zip(*kept)
        if self._add_rows is not None:
            self._add_rows(tag_names.RANK_STEP_TAGS, rows, steps, walls)
            return
        for row, step, wall in zip(rows, steps, walls):
            for tag, value in zip(tag_names.RANK_STEP_TAGS, row):
                self.writer.add_scalar(tag, value, step, walltime=wall)

    def close(self) -> None:
        """Stop observing and hand the last rows to the writer; idempotent."""
        if self.closed:
            return
        self.closed = True
        hooks.remove_recorder(self)
        self.schedule.close()
        remove = getattr(self.writer, "remove_flush_callback", None)
        if callable(remove):
            remove(self.flush)
        self._guard.call("writing the last step rows", self.flush)

    def __enter__(self) -> RankMonitor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
