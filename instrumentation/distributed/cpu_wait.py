"""CPU wait: the time a rank's training thread was ready to run but waited for a CPU (Linux schedstat), so that a rank
sharing its cores with other processes is not taken for a slow one."""
from __future__ import annotations

import os

SCHEDSTAT = "/proc/thread-self/schedstat"  # "<ns on a CPU> <ns ready, waiting for a CPU> <time slices>"


class ThreadSchedule:
    """``read()``: (ns on a CPU, ns waiting for one) of the thread that first called it, or None without the file
    (not Linux, or a kernel without schedstats; then every later read is None too). One ``pread`` a call
    (≈ 0.4 µs)."""

    def __init__(self, path: str = SCHEDSTAT) -> None:
        self.path = path
        self.available = True
        self._fd: int | None = None

    def read(self) -> tuple[int, int] | None:
        if self._fd is None:
            if not self.available:
                return None
            try:
                self._fd = os.open(self.path, os.O_RDONLY)  # NOTE: thread-self resolves now: the reading thread
            except OSError:
                self.available = False
                return None
        try:
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):
            self.close()
            self.available = False
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def cpu_wait_ns(cpu_ns: int, run_queue_ns: int, wait_ns: int, limit_ns: int) -> int:
    """A step's CPU wait outside its allreduce wait: the step's run-queue time times the share of its runnable time
    (on a CPU or waiting for one) not spent in the allreduce wait (a rank waiting in MPI polls: it is runnable
    there too, and its run-queue time in the wait is part of that wait already), at most ``limit_ns``."""
    runnable_ns = cpu_ns + run_queue_ns
    if run_queue_ns <= 0 or runnable_ns <= 0:
        return 0
    share = min(max((runnable_ns - wait_ns) / runnable_ns, 0.0), 1.0)
    return int(min(run_queue_ns * share, max(limit_ns, 0)))
