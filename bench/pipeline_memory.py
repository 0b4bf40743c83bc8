"""Cost of accounting the input pipeline's buffers in the allocator, as ratios to the same pipelines without it.

`python bench/pipeline_memory.py [--pairs 15]`. One process. Each row times one full pass of a pipeline over the
digits training split (1437 rows of 64 float32) with the accounting (``engine.data.buffers``: every element a
holding stage keeps is registered with the allocator and released when it leaves) and without it (the stages'
``hold``/``leave``/``close`` replaced by no-ops), in alternating order, ``--pairs`` times; a ratio is (pass time
with) / (pass time without), the table gives the median over pairs and the quartiles. The last row is a training
step of the digits MLP fed by ``batch(64).map(...).prefetch(2)``: what a training loop pays.
"""
from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # see bench/memory_overhead.py
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402

import numpy as np  # noqa: E402

import engine  # noqa: E402
from engine import nn  # noqa: E402
from engine.data import Dataset, buffers  # noqa: E402
from engine.nn import functional as F  # noqa: E402


@contextlib.contextmanager
def accounting(on: bool) -> Iterator[None]:
    """The pipeline's accounting as it is (``on``) or with every stage's hold/leave/close a no-op."""
    if on:
        yield
        return
    saved = buffers.Holding.hold, buffers.Holding.leave, buffers.Holding.close
    buffers.Holding.hold = lambda self, element: None  # type: ignore[method-assign]
    buffers.Holding.leave = lambda self, held: None  # type: ignore[method-assign]
    buffers.Holding.close = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        buffers.Holding.hold, buffers.Holding.leave, buffers.Holding.close = saved


def doubled(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a * 2, b


def passes(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], Dataset]]:
    """Each row's pipeline, built anew for every pass (a cache's first pass is the one that records)."""
    source = Dataset.from_tensor_slices((x, y))
    return {
        "map -> cache(), first pass (rows)": lambda: source.map(doubled).cache(),
        "map -> shuffle(256) -> batch(32)": lambda: source.map(doubled).shuffle(256, seed=0).batch(32),
        "map(parallel 4) -> batch(32)": lambda: source.map(doubled, num_parallel_calls=4).batch(32),
        "batch(32) -> map -> prefetch(2)": lambda: source.batch(32).map(doubled).prefetch(2),
        "map -> prefetch(8) (rows)": lambda: source.map(doubled).prefetch(8),
    }


def time_pass(build: Callable[[], Dataset]) -> float:
    dataset = build()
    start = time.perf_counter()
    for _ in dataset:
        pass
    return time.perf_counter() - start


def training(x: np.ndarray, y: np.ndarray) -> Callable[[], Dataset]:
    """A pass of digits MLP steps (64-128-10, Adam) fed by batch(64).map(...).prefetch(2), as a row's pass."""
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    dataset = Dataset.from_tensor_slices((x, y)).batch(64).map(doubled).prefetch(2)

    class Steps:
        def __iter__(self) -> Iterator[None]:
            for xb, yb in dataset:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(engine.tensor(xb)), engine.tensor(yb))
                loss.backward()
                optimizer.step()
                yield None

    return lambda: Steps()  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="alternating with/without passes per row")
    args = parser.parse_args()
    (x, y), _ = engine.datasets.load_digits(seed=0)
    rows = {**passes(x, y), "digits MLP steps, batch(64).map.prefetch(2)": training(x, y)}
    print(f"{'pipeline (one pass of 1437 rows)':44s} {'without ms':>10s} {'with ms':>8s} {'ratio':>7s}  quartiles")
    for name, build in rows.items():
        time_pass(build)  # warm up
        without, ratios = [], []
        for pair in range(args.pairs):
            timed = {}
            for on in ((True, False) if pair % 2 else (False, True)):
                with accounting(on):
                    timed[on] = time_pass(build)
            without.append(timed[False])
            ratios.append(timed[True] / timed[False])
        quartiles = statistics.quantiles(ratios, n=4)
        without_ms, ratio = statistics.median(without) * 1e3, statistics.median(ratios)
        print(f"{name:44s} {without_ms:10.2f} {without_ms * ratio:8.2f} {ratio:6.3f}x  "
              f"{quartiles[0]:.3f}-{quartiles[2]:.3f}")


if __name__ == "__main__":
    main()
