"""engine.distributed on this machine, ratios in one run (it starts the MPI jobs itself):

(a) throughput of ``engine.distributed.all_reduce`` against raw mpi4py ``Allreduce`` on 1, 4, 16, 64 MiB float32
    buffers, 2 ranks (target ≥ 0.9×);
(b) overlap: a 2-rank training step of an MLP (8 Linear layers of width 1024, ReLU, batch 32 per rank, float32,
    SGD) with DistributedDataParallel's bucketed non-blocking AllReduce (25 MiB buckets, and 4 MiB) against the same
    step with one blocking AllReduce of all gradients after backward (target ≤ 0.85×);
(c) scaling efficiency 1 → 2 ranks, same per-rank batch: samples/s on 2 ranks / (2 × samples/s on 1 rank).

    python bench/distributed.py [--steps 20]

Every rank runs with OMP_NUM_THREADS=1 (one core per rank). Times are medians over the repeats.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SIZES_MIB = (1, 4, 16, 64)
WIDTH, LAYERS, BATCH = 1024, 8, 32


# --- the MPI side (python bench/distributed.py --worker KIND OUT) --------------------------------------------------

def _allreduce_worker(repeats: int) -> dict:
    import engine.distributed as dist
    from engine.distributed import process_group
    dist.init()
    comm, mpi = process_group.group.comm, process_group.group.MPI
    times: dict[str, dict[int, list[float]]] = {"raw": {}, "engine": {}}
    for mib in SIZES_MIB:
        buffer = np.ones(mib * (1 << 20) // 4, dtype=np.float32)
        for repeat in range(repeats + 1):
            for kind in (("raw", "engine") if repeat % 2 else ("engine", "raw")):  # alternate who goes first
                comm.Barrier()
                start = time.perf_counter()
                if kind == "raw":
                    comm.Allreduce(mpi.IN_PLACE, buffer, mpi.SUM)
                else:
                    dist.all_reduce(buffer)
                if repeat:  # the first is a warm-up
                    times[kind].setdefault(mib, []).append(time.perf_counter() - start)
    return {kind: {mib: statistics.median(t) for mib, t in by_size.items()} for kind, by_size in times.items()}


def _model():
    import engine
    from engine import nn
    engine.manual_seed(0)
    layers = []
    for i in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH)] + ([nn.ReLU()] if i < LAYERS - 1 else [])
    return nn.Sequential(*layers)


MODES = ("blocking", "ddp", "ddp4", "nocomm")


class _Setup:
    """One model, its optimizer and how its step communicates: "ddp" (DDP, 25 MiB buckets), "ddp4" (4 MiB),
    "blocking" (one AllReduce of all gradients after backward), "nocomm" (no communication: the compute floor)."""

    def __init__(self, mode: str) -> None:
        import engine
        import engine.distributed as dist
        self.mode, self.model = mode, _model()
        self.net = dist.DistributedDataParallel(self.model, bucket_cap_mb=4 if mode == "ddp4" else 25) \
            if mode.startswith("ddp") else self.model
        self.optimizer = engine.optim.SGD(self.net.parameters(), lr=1e-4)
        self.params = list(self.model.parameters())
        self.flat = np.empty(sum(p.size for p in self.params), dtype=np.float32)

    def step(self, x) -> float:
        from engine.distributed import process_group
        group = process_group.group
        start = time.perf_counter()
        self.optimizer.zero_grad()
        (self.net(x) ** 2).mean().backward()
        if self.mode == "blocking":
            offset = 0
            for p in self.params:
                self.flat[offset:offset + p.size] = p.grad._data.reshape(-1)
                offset += p.size
            group.comm.Allreduce(group.MPI.IN_PLACE, self.flat, group.MPI.SUM)
            self.flat /= group.size
            offset = 0
            for p in self.params:
                p.grad._data[...] = self.flat[offset:offset + p.size].reshape(p.shape)
                offset += p.size
        self.optimizer.step()
        return time.perf_counter() - start


def _step_worker(kind: str, steps: int) -> dict:
    """Median step time per mode, the modes taking turns step by step (the machine's noise hits all alike);
    ``kind`` "local": one process, no communication."""
    import engine
    import engine.distributed as dist
    from engine.distributed import process_group
    if kind == "local":
        setups = [_Setup("nocomm")]
    else:
        dist.init()
        setups = [_Setup(mode) for mode in MODES]
    x = engine.tensor(np.random.default_rng(dist.rank()).normal(size=(BATCH, WIDTH)).astype(np.float32))
    times: dict[str, list[float]] = {setup.mode: [] for setup in setups}
    for step in range(steps + 2):
        for setup in setups:
            if kind != "local":
                process_group.group.comm.Barrier()
            elapsed = setup.step(x)
            if step >= 2:
                times[setup.mode].append(elapsed)
    return {mode: statistics.median(t) for mode, t in times.items()} | {"param_bytes": int(setups[0].flat.nbytes)}


def _worker(kind: str, out: str, steps: int) -> None:
    result = _allreduce_worker(steps) if kind == "allreduce" else _step_worker(kind, steps)
    import engine.distributed as dist
    if dist.rank() == 0:
        Path(out).write_text(json.dumps(result))


# --- the driver ----------------------------------------------------------------------------------------------------

def _run(kind: str, ranks: int, steps: int) -> dict:
    from engine.distributed.launch import environment, find_mpiexec
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        worker = [sys.executable, __file__, "--worker", kind, str(out), "--steps", str(steps)]
        command = worker if kind == "local" else [find_mpiexec(), "--oversubscribe", "-n", str(ranks), *worker]
        env = environment()
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        subprocess.run(command, check=True, env=env, cwd=REPO)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "OUT"))
    parser.add_argument("--steps", type=int, default=20)
    options = parser.parse_args()
    if options.worker:
        _worker(*options.worker, options.steps)
        return
    steps = options.steps
    print(f"(a) AllReduce, 2 ranks, float32, median of {steps}")
    print(f"{'MiB':>5} {'raw ms':>9} {'engine ms':>10} {'raw GB/s':>9} {'throughput ratio':>17}")
    a = _run("allreduce", 2, steps)
    for mib in SIZES_MIB:
        raw, ours = a["raw"][str(mib)], a["engine"][str(mib)]
        print(f"{mib:>5} {raw * 1e3:9.2f} {ours * 1e3:10.2f} {mib / 1024 / raw:9.2f} {raw / ours:16.3f}x")
    print(f"\n(b) 2-rank step, MLP {LAYERS} x Linear({WIDTH}, {WIDTH}) + ReLU, batch {BATCH}/rank, float32, SGD; "
          "the modes take turns step by step")
    local_before = _run("local", 1, steps)["nocomm"]
    b = _run("steps", 2, steps)
    local = min(local_before, _run("local", 1, steps)["nocomm"])
    print(f"{b['param_bytes'] / 2**20:.1f} MiB of gradients per step")
    print(f"{'step':<44} {'ms':>8} {'vs blocking':>12}")
    labels = {"blocking": "one blocking AllReduce after backward", "ddp": "DDP, 25 MiB buckets",
              "ddp4": "DDP, 4 MiB buckets", "nocomm": "no communication (the compute floor)"}
    for kind, label in labels.items():
        print(f"{label:<44} {b[kind] * 1e3:8.1f} {b[kind] / b['blocking']:11.3f}x")
    print(f"{'1 rank alone, no communication':<44} {local * 1e3:8.1f}")
    best = min(b["ddp"], b["ddp4"])
    print(f"\n(c) scaling 1 -> 2 ranks (same per-rank batch): samples/s {BATCH / local:.0f} -> {2 * BATCH / best:.0f}, "
          f"efficiency {local / best:.2f} (without communication {local / b['nocomm']:.2f}: two ranks on two cores "
          "share the memory bandwidth)")

if __name__ == "__main__":
    main()
