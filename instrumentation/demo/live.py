"""``python -m instrumentation.demo --live S``: one healthy run that keeps training, for the board's live view and
its Capture button (the run answers capture requests while it trains)."""
from __future__ import annotations

import threading
import time

import engine
from engine.nn import functional as F
from instrumentation.demo.common import ValidationLogger, digits, fresh_run_dir, instrumented, start_run
from instrumentation.demo.runs import mlp

LIVE_RUN = "live"
STEP_PERIOD_S = 0.05  # the MLP's steps take well under 1 ms: paced like a larger model's, the logs stay small


class Deadline:
    """Paces ``engine.fit`` at one step per ``STEP_PERIOD_S`` and ends it at the first step end after ``seconds``
    (0: never) or once ``stop`` is set."""

    def __init__(self, seconds: float, stop: threading.Event | None = None) -> None:
        self.end = time.monotonic() + seconds if seconds > 0 else None
        self.stop = stop

    def on_step_end(self, state: object) -> None:
        if (self.end is not None and time.monotonic() >= self.end) or (self.stop is not None and self.stop.is_set()):
            raise engine.StopTraining
        time.sleep(STEP_PERIOD_S)


def train_live(logdir: str, seed: int, seconds: float, stop: threading.Event | None = None) -> int:
    run_dir = fresh_run_dir(logdir, LIVE_RUN)
    start_run(seed)
    data, model = digits(seed), mlp()
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    print(f"demo: training {run_dir} " + (f"for {seconds:g} s" if seconds > 0 else "until Ctrl-C")
          + "; press Capture on the board's Profile page to record its next steps", flush=True)
    with instrumented(run_dir, model, seed) as (writer, handle):
        try:
            engine.fit(model, F.cross_entropy, optimizer, data.train(seed=seed), 10**6, val_data=data.test(),
                       callbacks=(handle, ValidationLogger(writer), Deadline(seconds, stop)), verbose=False)
        except KeyboardInterrupt:
            pass
    print(f"demo: {run_dir} stopped at step {engine.hooks.current_step()}", flush=True)
    return 0
