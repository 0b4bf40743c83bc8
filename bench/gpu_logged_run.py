"""A short instrumented training run on the GPU: writes a run directory with a GPU profile (Chrome trace), the memory
tracker's timeline, watch() dynamics and NVML samples, for bench/gpu_check.sh (``--logdir``, ``--steps``)."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from engine import hooks, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from instrumentation.monitor import watch  # noqa: E402
from instrumentation.profiler import profile, schedule  # noqa: E402
from instrumentation.summary import SummaryWriter  # noqa: E402
from instrumentation.system import SystemSampler  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    engine.manual_seed(0)
    (x_train, y_train), _ = engine.datasets.load_digits(seed=0)
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    model.to("cuda")
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    run_dir = os.path.join(args.logdir, f"{time.strftime('%Y%m%d-%H%M%S')}-gpu-mlp")
    batch = 256
    with SummaryWriter(run_dir) as writer:
        handle = watch(model, writer, optimizer=optimizer)
        handle.attach(SystemSampler(writer, interval=0.2))
        with profile(run_dir, schedule=schedule(wait=20, warmup=5, active=10)):
            for step in range(args.steps):
                start = (step * batch) % (len(x_train) - batch)
                hooks.mark_step_begin()
                x = engine.tensor(x_train[start:start + batch]).to("cuda")
                y = engine.tensor(y_train[start:start + batch]).to("cuda")
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                if step % 50 == 0:
                    print(f"step {step}: loss {loss.item():.4f}", flush=True)
        handle.close()
    print(f"logged run: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
