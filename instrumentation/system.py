"""SystemSampler: a thread sampling CPU and RSS (the process CPU clock, /proc/self/statm, psutil for children) and
NVIDIA GPUs (NVML) onto the training-step axis; the training thread does nothing per step."""
from __future__ import annotations

import os
import sys
import threading
import time
from types import ModuleType
from typing import Any

import psutil

from engine import hooks
from instrumentation.budget import Pacer, check_every
from instrumentation.memory.host import rss_reader
from instrumentation.format import tags as tag_names
from instrumentation.format.system_status import GpuStatus, write_gpu_status
from instrumentation.format.tags import (CPU_PERCENT, MEM_TOTAL_BYTES, MEM_USED_BYTES, POWER_W, PROCESS_MEM_BYTES,
                                         RATE_METRICS, RSS_BYTES, TEMPERATURE_C, UTIL_PERCENT)

_CPU_TAG, _RSS_TAG = tag_names.system_tag(CPU_PERCENT), tag_names.system_tag(RSS_BYTES)
SAMPLER_BUDGET = 0.02  # of wall time: the thread holds the interpreter while it samples
CHILDREN_EVERY_S = 1.0  # how often the list of child processes is read again (their figures: at every sample)
_notices_said: set[str] = set()  # the "no GPU metrics" notices this process has printed


def say_once(notice: str) -> None:
    """Print an informational line on stderr the first time this process has it to say (a demo or a sweep starts
    a sampler per run: the reason NVML is missing does not change between them)."""
    if notice not in _notices_said:
        _notices_said.add(notice)
        print(f"flowscope.system: info: {notice}", file=sys.stderr)


class _Nvml:
    """NVML per GPU; a metric that a GPU does not support is dropped for that GPU after its first error."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.disabled: set[tuple[int, str]] = set()
        self.notes: list[str] = []

    def sample(self, pids: set[int]) -> dict[str, float]:
        values: dict[str, float] = {}
        nvml = self.nvml
        for index, handle in enumerate(self.handles):
            readers = (
                ("memory", lambda: _memory(nvml.nvmlDeviceGetMemoryInfo(handle))),
                ("utilization", lambda: {UTIL_PERCENT: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)}),
                ("power", lambda: {POWER_W: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0}),
                ("temperature", lambda: {
                    TEMPERATURE_C: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))}),
                ("processes", lambda: {PROCESS_MEM_BYTES: float(sum(
                    p.usedGpuMemory or 0 for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                    if p.pid in pids))}),
            )
            for name, read in readers:
                if (index, name) in self.disabled:
                    continue
                try:
                    values.update({tag_names.gpu_tag(index, key): value for key, value in read().items()})
                except nvml.NVMLError as error:
                    self.disabled.add((index, name))
                    self.notes.append(f"GPU {index}: {name} is not available ({error}); not sampled any more")
        return values

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library we no longer use
            pass


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads (CLOCK_PROCESS_CPUTIME_ID: ns resolution, no read)."""
    return time.process_time()


def _memory(info: Any) -> dict[str, float]:
    return {MEM_USED_BYTES: float(info.used), MEM_TOTAL_BYTES: float(info.total)}


def _descendant_pids(pid: int) -> list[int] | None:
    """Every descendant of ``pid`` from the kernel's per-thread child lists (Linux ``/proc/<pid>/task/<tid>/children``:
    a few small reads, where psutil's ``children()`` reads the stat file of every process on the machine — about
    1 ms on a quiet one); None where those files do not exist."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            if parent == pid:
                return None
            continue  # a child that exited meanwhile
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as listing:
                    children = [int(child) for child in listing.read().split()]
            except FileNotFoundError:
                if parent == pid and not found:
                    return None  # the kernel has no child lists (CONFIG_PROC_CHILDREN off)
                continue
            except OSError:
                continue
            found.extend(children)
            pending.extend(children)
    return found


def open_nvml(nvml: ModuleType | None = None) -> tuple[_Nvml | None, str]:
    """NVML, or None and the reason it is not available (no package, no driver, no GPU)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError as error:
            return None, f"no GPU metrics: the nvidia-ml-py package is not installed ({error})"
    try:
        reader = _Nvml(nvml)
    except Exception as error:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"no GPU metrics: NVML is not available ({type(error).__name__}: {error})"
    if not reader.handles:
        reader.close()
        return None, "no GPU metrics: NVML sees no GPU"
    return reader, f"sampling {len(reader.handles)} GPU(s) through NVML"


class SystemSampler:
    """Samples every ``interval`` seconds on a daemon thread: ``sys/cpu_percent`` and ``sys/rss_bytes`` of this
    process and its children, and per NVIDIA GPU ``sys/gpu<i>/{mem_used_bytes, mem_total_bytes, util_percent,
    power_w, temperature_c, process_mem_bytes}``. Each point's step is the training step in progress
    (``engine.hooks.current_step()``); the samples of one step are written as one point when the step changes
    (mean of rates, maximum of amounts), or every ``stall_flush_s`` while it does not (the latest aggregate of a
    stalled step replaces the previous one on the board). Without NVML or a GPU: one informational line on stderr,
    once per process.

    ``budget``: the share of wall time sampling may take (the thread holds the interpreter meanwhile): a pacer
    (``instrumentation.budget``) measures each sample and samples at one wake-up in k (``perf/interval/system``)
    when samples are dear (slow NVML, many GPUs or children, a short ``interval``); ``every``: one in ``every``."""

    def __init__(self, writer: Any, interval: float = 1.0, *, gpus: bool = True, nvml: ModuleType | None = None,
                 stall_flush_s: float = 5.0, start: bool = True, budget: float = SAMPLER_BUDGET,
                 every: int | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"SystemSampler interval must be a positive number of seconds, got {interval!r}")
        self.pace = Pacer(tag_names.SYSTEM_OBSERVER, budget, every=check_every("SystemSampler", every))
        self.writer, self.interval, self.stall_flush_s = writer, float(interval), stall_flush_s
        self._process = psutil.Process()
        self._children: dict[int, psutil.Process] = {}
        self._children_read_at = -float("inf")  # time.monotonic() of the last read of the child list
        self._read_rss = rss_reader()
        self._cpu_s, self._cpu_at = _cpu_seconds(), time.monotonic()  # the first sample's CPU share starts here
        self._nvml: _Nvml | None = None
        self.status = "GPU sampling off"
        if gpus:
            self._nvml, self.status = open_nvml(nvml)
            if self._nvml is None:
                say_once(f"{self.status}; CPU and memory are sampled (said once per process)")
        self._write_status()
        self._pending: dict[str, list[float]] = {}
        self._pending_step: int | None = None
        self._pending_since = 0.0
        self._stop = threading.Event()
        self._failed = False
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._loop, name="flowscope-system-sampler", daemon=True)
            self._thread.start()

    def _write_status(self) -> None:
        """``plugins/system/gpu_status.json`` in the run: the System page's note when there are no GPU metrics."""
        run_dir = getattr(self.writer, "log_dir", None)
        if run_dir is None:
            return
        gpus = len(self._nvml.handles) if self._nvml is not None else 0
        try:
            write_gpu_status(run_dir, GpuStatus(self._nvml is not None, gpus, self.status))
        except OSError as error:
            print(f"flowscope.system: cannot write the GPU status under {run_dir}: {error}", file=sys.stderr)

    def sample(self) -> dict[str, float]:
        """One sample now (tag → value), not written."""
        values = {_CPU_TAG: self._cpu_percent(), _RSS_TAG: float(self._read_rss())}
        pids = {self._process.pid}
        for child in self._live_children():
            try:
                values[_CPU_TAG] += child.cpu_percent(None)
                values[_RSS_TAG] += child.memory_info().rss
                pids.add(child.pid)
            except psutil.Error:  # the child exited meanwhile
                continue
        if self._nvml is not None:
            values.update(self._nvml.sample(pids))
            for note in self._nvml.notes:
                print(f"flowscope.system: {note}", file=sys.stderr)
            self._nvml.notes.clear()
        return values

    def tick(self) -> None:
        """Take one sample and aggregate or write it (what the thread does every ``interval``)."""
        step, now = hooks.current_step(), time.time()
        if self._pending_step is not None and step != self._pending_step:
            self._write(now)
        if self._pending_step is None:
            self._pending_step, self._pending_since = step, now
        for tag, value in self.sample().items():
            self._pending.setdefault(tag, []).append(value)
        if now - self._pending_since >= self.stall_flush_s:
            self._write(now, keep=True)

    def close(self) -> None:
        """Stop the thread and write what was sampled of the current step — with the thread, a last sample when the
        current step has none yet, so a run shorter than ``interval`` still has a point; the writer stays open.
        Idempotent."""
        closing = not self._stop.is_set()
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, 2 * self.interval))
            if closing and not self._pending:
                try:
                    self.tick()
                except Exception as error:  # noqa: BLE001 - closing must not fail because of a sample
                    print(f"flowscope.system: the last sample failed ({type(error).__name__}: {error})",
                          file=sys.stderr)
        if self._pending:
            self._write(time.time())
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
        fd = getattr(self._read_rss, "fd", None)
        if fd is not None and not (self._thread is not None and self._thread.is_alive()):  # a late sample reads it
            self._read_rss = lambda: self._process.memory_info().rss
            os.close(fd)

    def __enter__(self) -> SystemSampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _write(self, wall_time: float, keep: bool = False) -> None:
        step = self._pending_step
        for tag, values in self._pending.items():
            value = sum(values) / len(values) if tag.endswith(RATE_METRICS) else max(values)
            self.writer.add_scalar(tag, value, step, walltime=wall_time)
        if keep:  # a stalled step: the next aggregate of this step includes these samples again
            self._pending_since = wall_time
            return
        self._pending, self._pending_step = {}, None

    def _cpu_percent(self) -> float:
        """This process's CPU time (all threads) since the last sample over the wall time, in percent of one CPU (as
        psutil's ``cpu_percent``), from the process CPU clock: no file read."""
        cpu_s, now = _cpu_seconds(), time.monotonic()
        elapsed = now - self._cpu_at
        percent = 100.0 * (cpu_s - self._cpu_s) / elapsed if elapsed > 0 else 0.0
        self._cpu_s, self._cpu_at = cpu_s, now
        return percent

    def _live_children(self) -> list[psutil.Process]:
        """The child processes (recursively): the list is read again every ``CHILDREN_EVERY_S`` (a few reads per
        thread of this process), so a new child is counted from at most that long after it started."""
        now = time.monotonic()
        if now - self._children_read_at < CHILDREN_EVERY_S:
            return list(self._children.values())
        self._children_read_at = now
        pids = _descendant_pids(self._process.pid)
        if pids is None:  # no /proc/<pid>/task/<tid>/children here: psutil scans every process of the machine
            try:
                current = {child.pid: child for child in self._process.children(recursive=True)}
            except psutil.Error:
                return []
        else:
            current = {pid: self._children.get(pid) for pid in pids}
        for pid in list(self._children):
            if pid not in current:
                del self._children[pid]
        for pid, child in current.items():
            if pid not in self._children:
                try:
                    child = child or psutil.Process(pid)
                    child.cpu_percent(None)
                except psutil.Error:  # exited meanwhile
                    continue
                self._children[pid] = child
        return list(self._children.values())

    def _loop(self) -> None:
        woke_ns, wakes = time.perf_counter_ns(), 0
        while not self._stop.wait(self.interval):
            now_ns = time.perf_counter_ns()
            period_ns, woke_ns = now_ns - woke_ns, now_ns
            due = self.pace.due(wakes)
            wakes += 1
            try:
                if due:
                    self.tick()
                self._account(period_ns, time.perf_counter_ns() - now_ns if due else 0, due)
            except Exception as error:  # noqa: BLE001 - a sampler must never take training down
                if not self._failed:
                    self._failed = True
                    print(f"flowscope.system: sampling failed ({type(error).__name__}: {error}); the sampler keeps "
                          f"trying, further failures are not reported", file=sys.stderr)

    def _account(self, period_ns: int, spent_ns: int, sampled: bool) -> None:
        """Hand a wake-up's cost to the pacer (its "step" is the time since the last wake-up); write its figures
        when it reconsidered the interval."""
        if self.pace.record(period_ns, 0, spent_ns, int(sampled)):
            self.pace.last.write(self.writer, hooks.current_step())

