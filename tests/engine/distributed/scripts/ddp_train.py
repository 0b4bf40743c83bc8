"""Train a small float64 MLP on a fixed data set, data-parallel (``ddp``, under mpiexec) or in one process
(``single``, the oracle) with the same global batch; save per step losses, parameter digests and the events.
Usage: ddp_train.py ddp|single OUT_DIR STEPS ACCUMULATE"""
import contextlib
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

import engine
import engine.distributed as dist
from engine import nn
from engine.data import Dataset
from engine.nn import functional as F

mode, out_dir, steps, accumulate = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
GLOBAL_BATCH = 16
if mode == "ddp":
    dist.init()
rank, size = dist.rank(), dist.world_size()

engine.manual_seed(1234 + rank)  # different on every rank: the broadcast makes rank 0's the replicas' start
model = nn.Sequential(nn.Linear(10, 32, dtype="float64"), nn.Tanh(), nn.Linear(32, 32, dtype="float64"), nn.Tanh(),
                      nn.Linear(32, 32, dtype="float64"), nn.Tanh(), nn.Linear(32, 3, dtype="float64"))
net = dist.DistributedDataParallel(model, bucket_cap_mb=0.005) if mode == "ddp" else model
optimizer = engine.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

data = np.random.default_rng(7)
x_all = data.normal(size=(steps * GLOBAL_BATCH, 10))
y_all = (x_all[:, :3].sum(axis=1) > 0).astype(np.int64) + (x_all[:, 3] > 1).astype(np.int64)
dataset = Dataset.from_tensor_slices((x_all, y_all, np.arange(len(x_all))))
if mode == "ddp":
    dataset = dataset.shard(size, rank)
dataset = dataset.batch(GLOBAL_BATCH // size)


class Log:
    def __init__(self):
        self.events = []

    def communication(self, e):
        self.events.append(["communication", e.name, e.bucket, e.nbytes, e.start_ns, e.end_ns, e.step])

    def comm_wait(self, e):
        self.events.append(["comm_wait", e.step, e.start_ns, e.duration_ns, e.nbytes, e.buckets])

    def optimizer_step_begin(self, e):
        self.events.append(["optimizer_step_begin", e.step, e.time_ns])


log = engine.hooks.add_recorder(Log())
losses, digests, backward_ends, seen = [], [], [], []
for step, (xb, yb, index) in enumerate(dataset):
    if step == steps:
        break
    seen.extend(index.tolist())
    optimizer.zero_grad()
    micro = np.array_split(np.arange(len(xb)), accumulate)
    loss_sum = 0.0
    for i, rows in enumerate(micro):
        last = i == len(micro) - 1
        context = net.no_sync() if (mode == "ddp" and not last) else contextlib.nullcontext()
        with context:
            loss = F.cross_entropy(net(engine.tensor(xb[rows])), yb[rows]) * (len(rows) / len(xb))
            loss.backward()
        loss_sum += loss.item()
    backward_ends.append(time.perf_counter_ns())
    optimizer.step()
    losses.append(float(dist.all_reduce(np.array([loss_sum]), "mean")[0]))
    digest = np.frombuffer(hashlib.sha256(b"".join(p.numpy().tobytes() for p in model.parameters())).digest(),
                           dtype=np.uint8)
    digests.append(dist.all_gather(digest).tolist())
(out_dir / f"{mode}_rank{rank}.json").write_text(json.dumps({
    "losses": losses, "digests": digests, "seen": seen, "events": log.events, "backward_ends": backward_ends,
    "param_bytes": sum(p.numpy().nbytes for p in model.parameters()),
    "buckets": net.bucket_sizes_bytes if mode == "ddp" else []}))
