"""Host memory: RSS per step (psutil) with the same trend test, and optional tracemalloc attribution of growth."""
from __future__ import annotations

import os
import sysconfig
import tracemalloc
from typing import Any

import psutil

from instrumentation.memory.leak import LeakSettings, TrendWindow
from instrumentation.memory.stacks import is_internal as _is_internal
from instrumentation.memory.trend import Trend

HOST_MIN_BYTES_PER_STEP = 64 * 1024  # RSS moves in pages and with the C allocator's arenas: ignore slower drifts
TOP_LINES = 5


class HostMemoryWatch:
    """``read_rss()`` reads this process's RSS; ``observe(step, rss)`` returns its trend when it grows steadily.

    With ``attribution=True`` tracemalloc runs from the end of the warm-up (costly: every Python allocation is
    traced; see bench/memory_overhead.py) and the growth is attributed to the source lines whose traced memory
    grew most since then (each traced allocation counted at its innermost frame outside the standard library,
    installed packages and flowscope; ``frames`` frames are traced). ``attribution`` is a list of {"site",
    "bytes_per_step", "count_per_step"}."""

    def __init__(self, settings: LeakSettings, *, attribution: bool = False, frames: int = 8,
                 min_bytes_per_step: float = HOST_MIN_BYTES_PER_STEP) -> None:
        self._rss = rss_reader()
        self._window = TrendWindow(settings, min_bytes_per_step)
        self._settings = settings
        self._attribution = attribution
        self._frames = frames
        self._baseline: tracemalloc.Snapshot | None = None
        self._baseline_step = 0
        self._started_tracing = False
        self._seen = 0

    def read_rss(self) -> int:
        """This process's RSS now, in bytes."""
        return self._rss()

    def observe(self, step: int, rss: int) -> Trend | None:
        """Add the RSS read at ``step`` (``read_rss``); the trend when it grows steadily."""
        self._seen += 1
        if self._attribution and self._seen == self._settings.warmup_steps + 1:
            self._start_tracing(step)
        return self._window.observe(step, rss)

    def wants_every_step(self) -> bool:
        """Whether the window of reads is not full yet or its last reads rise (``TrendWindow.wants_every_step``)."""
        return self._window.wants_every_step()

    def attribution(self, step: int) -> list[dict[str, Any]]:
        if self._baseline is None or step <= self._baseline_step:
            return []
        now = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        steps = step - self._baseline_step
        by_site: dict[str, list[int]] = {}
        for diff in now.compare_to(self._baseline, "traceback"):
            if diff.size_diff:
                entry = by_site.setdefault(_user_site(diff.traceback), [0, 0])
                entry[0] += diff.size_diff
                entry[1] += diff.count_diff
        ranked = sorted(((size, count, site) for site, (size, count) in by_site.items() if size > 0), reverse=True)
        return [{"site": site, "bytes_per_step": size / steps, "count_per_step": count / steps}
                for size, count, site in ranked[:TOP_LINES]]

    def _start_tracing(self, step: int) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(self._frames)
            self._started_tracing = True
        self._baseline = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        self._baseline_step = step

    def close(self) -> None:
        fd = getattr(self._rss, "fd", None)
        if fd is not None:
            os.close(fd)
        self._rss = _closed
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False
        self._baseline = None


def rss_reader() -> Any:
    """A function returning this process's RSS in bytes: a pread of /proc/self/statm on Linux (a few µs, the file
    stays open), psutil elsewhere."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        process = psutil.Process()
        return lambda: process.memory_info().rss
    page_bytes = os.sysconf("SC_PAGE_SIZE")

    def read() -> int:
        return int(os.pread(fd, 128, 0).split()[1]) * page_bytes

    read.fd = fd  # type: ignore[attr-defined]
    return read


def _closed() -> int:
    raise RuntimeError("HostMemoryWatch is closed")


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[name] + os.sep for name in ("stdlib", "purelib", "platlib")})


def _user_site(traceback: tracemalloc.Traceback) -> str:
    """The innermost frame outside the standard library, installed packages and flowscope ("file:line")."""
    frames = list(traceback)  # oldest first
    for frame in reversed(frames):
        if not _is_internal(frame.filename) and not frame.filename.startswith(_LIBRARY_DIRS):
            return f"{frame.filename}:{frame.lineno}"
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno}"
