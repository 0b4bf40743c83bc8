"""Each rank runs the collectives on its own deterministic data and saves what it got (the test holds the NumPy
oracle). Usage: collectives.py OUT_DIR"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/engine: the CUDA emulator
import cuda_emulator  # noqa: E402

import engine  # noqa: E402
import engine.distributed as dist  # noqa: E402
from engine.backend import cuda_backend  # noqa: E402


def rank_data(rank, dtype):
    return (np.random.default_rng(100 + rank).normal(size=(3, 4)) * 10).astype(dtype)


class Log:
    def __init__(self):
        self.events = []

    def communication(self, event):
        self.events.append((event.name, event.bucket, event.nbytes, event.end_ns >= event.start_ns))


dist.init()
rank, size = dist.rank(), dist.world_size()
log = engine.hooks.add_recorder(Log())
out = {f"input_{dtype.__name__}": rank_data(rank, dtype) for dtype in (np.float64, np.float32, np.int64)}
for op in ("sum", "mean", "max", "min"):
    out[f"{op}_f64"] = dist.all_reduce(rank_data(rank, np.float64), op)
    out[f"{op}_f32_tensor"] = dist.all_reduce(engine.tensor(rank_data(rank, np.float32)), op).numpy()
out["sum_i64"] = dist.all_reduce(rank_data(rank, np.int64), "sum")
base = rank_data(rank, np.float64)
view = base[:, ::2]  # not contiguous: reduced through a copy, written back in place
assert dist.all_reduce(view, "sum") is view
out["strided_base"] = base
out["broadcast"] = dist.broadcast(rank_data(rank, np.float64), root=size - 1)
out["broadcast_tensor"] = dist.broadcast(engine.tensor(rank_data(rank, np.float32)), root=0).numpy()
out["all_gather"] = dist.all_gather(rank_data(rank, np.float32))
try:
    dist.all_gather(np.zeros(rank + 1))
except ValueError as error:
    out["mismatch_error"] = np.array(str(error))
dist.barrier()
cuda_backend.cupy = cuda_emulator  # a "device" array: staged through host memory (MPI is not CUDA-aware here)
device = cuda_emulator.asarray(rank_data(rank, np.float32))
reduced = dist.all_reduce(device, "sum")
assert reduced is device and type(device) is cuda_emulator.ndarray
out["staged_device"] = np.asarray(device)
cuda_backend.cupy = None
out["events"] = np.array([f"{name}:{bucket}:{nbytes}:{ordered}" for name, bucket, nbytes, ordered in log.events])
np.savez(Path(sys.argv[1]) / f"rank{rank}.npz", **out)
