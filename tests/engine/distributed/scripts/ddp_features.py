"""DDP details on N ranks: a parameter only rank 0 uses, dropout masks per rank, a second backward before the
step. Every rank saves what it saw. Usage: ddp_features.py OUT_DIR"""
import sys
from pathlib import Path

import numpy as np

import engine
import engine.distributed as dist
from engine import nn

dist.init()
rank, size = dist.rank(), dist.world_size()
out = {}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4, dtype="float64")
        self.extra = nn.Linear(4, 4, dtype="float64")

    def forward(self, x, use_extra):
        h = self.body(x)
        return self.extra(h) if use_extra else h


engine.manual_seed(0)
model = Net()
out["init_weight"] = model.body.weight.numpy().copy()  # before any broadcast: the shared seed alone
ddp = dist.DistributedDataParallel(model, bucket_cap_mb=0.0001)
optimizer = engine.optim.SGD(ddp.parameters(), lr=0.1)
x = engine.tensor(np.random.default_rng(rank).normal(size=(6, 4)))
loss = (ddp(x, use_extra=rank == 0) ** 2).mean()
local = engine.grad(loss, [model.extra.weight], retain_graph=True)[0].numpy() if rank == 0 else np.zeros((4, 4))
loss.backward()
optimizer.step()
out["extra_grad"] = model.extra.weight.grad.numpy().copy()
out["local_extra_grad"] = local
out["params"] = np.concatenate([p.numpy().ravel() for p in model.parameters()])  # (a copy)

out["dropout_mask"] = nn.functional.dropout(engine.tensor(np.ones(2000)), 0.5).numpy()

norm = nn.Sequential(nn.Linear(4, 3, dtype="float64"), nn.BatchNorm1d(3, dtype="float64"))
norm[1].running_mean.numpy()[...] = rank + 1.0  # rank-dependent buffers: the wrapper makes them rank 0's
with_buffers = dist.DistributedDataParallel(norm)
out["buffers_after_wrap"] = norm[1].running_mean.numpy().copy()
with_buffers(x)  # training mode: each rank updates its running statistics from its own batch
out["buffers_after_train_forward"] = norm[1].running_mean.numpy().copy()
with_buffers.eval()
with_buffers(x)  # broadcast first (rank 0's), and eval does not update them
out["buffers_after_eval_forward"] = norm[1].running_mean.numpy().copy()
with_buffers.finish_gradient_sync()

loss = (ddp(x, use_extra=True) ** 2).mean()
loss.backward(retain_graph=True)
try:
    loss.backward()
except RuntimeError as error:
    out["twice_error"] = np.array(str(error))
ddp.finish_gradient_sync()  # settles the launched buckets (every rank did the same)
dist.barrier()
np.savez(Path(sys.argv[1]) / f"rank{rank}.npz", **out)
