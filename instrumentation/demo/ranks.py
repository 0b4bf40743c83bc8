"""One rank of the demo's data-parallel job (``mpiexec -n 2 python instrumentation/demo/ranks.py --logdir RUN``): an
MLP under ``engine.distributed.DistributedDataParallel``, watched, each rank writing ``RUN/rank<k>``; a planted
straggler (``--slow-rank``: sleeps a share of each step's compute time), a planted drift (``--drift-rank``: one
weight changed after a step, bypassing the gradient averaging) and a planted failure (``--fail-rank``). The tests start
it with their own settings."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

import engine
from engine import distributed as dist
from engine import nn
from engine.nn import functional as F
from instrumentation.distributed import RankMonitor, rank_logdir
from instrumentation.monitor import watch
from instrumentation.profiler import profile, schedule
from instrumentation.summary import SummaryWriter

FEATURES, CLASSES = 256, 10


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", required=True, help="the job's run; each rank writes <logdir>/rank<k>")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--hidden", type=int, default=384, help="MLP width: sets the compute time of a step")
    parser.add_argument("--batch", type=int, default=64, help="per-rank batch")
    parser.add_argument("--bucket-mb", type=float, default=0.25, help="DDP bucket cap (small: several buckets)")
    parser.add_argument("--slow-rank", type=int, default=-1, help="this rank sleeps --slow-share of its compute")
    parser.add_argument("--slow-share", type=float, default=0.3)
    parser.add_argument("--drift-rank", type=int, default=-1, help="this rank changes a weight after --drift-step")
    parser.add_argument("--drift-step", type=int, default=10)
    parser.add_argument("--fail-rank", type=int, default=-1, help="this rank raises after --fail-step")
    parser.add_argument("--fail-step", type=int, default=30)
    parser.add_argument("--checksum-every", type=int, default=None, help="a RankMonitor with this interval (default: "
                        "the one watch() attaches)")
    parser.add_argument("--seed", type=int, default=0, help="the model's initialisation and the data")
    parser.add_argument("--profile", action="store_true", help="capture steps 7-9 of each rank (comm lane)")
    parser.add_argument("--light", action="store_true", help="no memory tracker, histograms or capture requests")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    dist.init()
    rank = dist.rank()
    engine.manual_seed(args.seed)  # the same initialisation everywhere (DDP also broadcasts rank 0's)
    net = nn.Sequential(nn.Linear(FEATURES, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                        nn.Linear(args.hidden, CLASSES))
    model = dist.DistributedDataParallel(net, bucket_cap_mb=args.bucket_mb)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng([args.seed, 1 + rank])  # each rank its own shard of a synthetic task
    teacher = np.random.default_rng(args.seed).standard_normal((FEATURES, CLASSES)).astype(np.float32)
    engine.hooks.reset_step(0)
    light = {"memory": False, "histograms_every": 0, "capture_requests": False} if args.light else {}
    with SummaryWriter(rank_logdir(args.logdir)) as writer:
        handle = watch(net, writer, ranks=args.checksum_every is None, **light)
        if args.checksum_every is not None:
            handle.attach(RankMonitor(writer, net, checksum_every=args.checksum_every))
        prof = profile(writer.log_dir, schedule=schedule(wait=5, warmup=2, active=3), input_bound=False) \
            if args.profile else None
        if prof is not None:
            prof.start()
        try:
            for step in range(args.steps):
                engine.hooks.mark_step_begin()  # a hand-written loop opens its steps (engine.fit would)
                x = rng.standard_normal((args.batch, FEATURES)).astype(np.float32)
                y = (x @ teacher).argmax(axis=1)
                optimizer.zero_grad()
                began = time.perf_counter()
                loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y))
                loss.backward()
                if rank == args.slow_rank:
                    time.sleep(args.slow_share * (time.perf_counter() - began))
                optimizer.step()
                handle.log_loss(loss.item(), step)
                if rank == args.fail_rank and step == args.fail_step:
                    raise RuntimeError(f"planted failure on rank {rank} after step {step}")
                if rank == args.drift_rank and step == args.drift_step:
                    weights = net[2].weight.numpy()  # a view: the replica's own copy changes, no other
                    weights[0, 0] += 1e-3
        finally:
            if prof is not None:
                prof.stop()
            handle.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
