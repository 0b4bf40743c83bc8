"""Tensors allocated and freed on another thread (a user's loader thread) while the tracker writes a snapshot."""
from __future__ import annotations

import sys
import threading

import numpy as np

import engine
from instrumentation import SummaryWriter
from instrumentation.memory import MemoryTracker


def test_snapshots_while_another_thread_allocates(tmp_path):
    stop = threading.Event()

    def churn() -> None:  # every tensor made and dropped here is an alloc and a free event for the tracker
        while not stop.is_set():
            engine.tensor(np.ones(4, dtype=np.float32))

    interval = sys.getswitchinterval()
    with SummaryWriter(tmp_path) as writer:
        tracker = MemoryTracker(writer, stacks=True, history=10_000)  # the per-event path keeps a history
        thread = threading.Thread(target=churn)
        sys.setswitchinterval(1e-5)  # hand the GIL over often, also in the middle of the snapshot's loops
        thread.start()
        try:
            while len(tracker._history) < 2_000:  # (a snapshot loops over 2-10k events: thousands of GIL handovers)
                pass
            paths = [tracker.snapshot("manual") for _ in range(3)]
        finally:
            stop.set()
            thread.join()
            sys.setswitchinterval(interval)
            tracker.close()
    assert all(paths), paths
