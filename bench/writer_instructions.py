"""Scalar logging cost in CPU instructions (valgrind callgrind), ours against torch.utils.tensorboard and tensorboardX.

Run ``python bench/writer_instructions.py [--root DIR] [--variants ours_add_scalar,torch_add_scalar,...]``. A step of
each variant logs ``STEP_TAGS`` (32 scalars, a training step's metrics) and one loss: one ``add_scalar`` per value
(``*_add_scalar``), or our batched entry point (``ours_rows``: the step's metrics as one row, the loss in batches of
64 steps as ``watch()`` hands it over). The writer is flushed after the warm-up and at the end, so the writer
thread's encoding and framing are counted (all threads). ``--root`` runs another checkout's writer (a copy of the
tree before a change) with this driver; there the batched variant uses what that tree has.
"""
from __future__ import annotations

import gc
import os
import sys
import tempfile

import callgrind

VARIANTS = ("ours_add_scalar", "ours_rows", "torch_add_scalar", "tensorboardX_add_scalar")
STEP_TAGS = tuple([f"{kind}/layer{i}.weight" for kind in ("grad_norm", "update_ratio") for i in range(12)]
                  + [f"act/layer{i}/mean_abs" for i in range(6)] + ["train/samples_per_sec", "train/learning_rate"])
LOSS_BATCH = 64


def _writer(variant: str, logdir: str):
    if variant.startswith("torch"):
        from torch.utils.tensorboard import SummaryWriter
    elif variant.startswith("tensorboardX"):
        from tensorboardX import SummaryWriter
    else:
        from instrumentation import SummaryWriter
    return SummaryWriter(logdir, flush_secs=3600.0)


def _batched(writer):
    """``log(step, values, loss)`` through the tree's batched entry points."""
    losses: list[float] = []
    steps: list[int] = []
    walls: list[float] = []
    add_rows = writer.add_scalar_rows
    add_dict = getattr(writer, "add_scalar_dict", None)  # NOTE: the tree before one batched entry point
    add_column = getattr(writer, "add_scalar_column", None)

    def log(step: int, values: list[float], loss: float, wall: float) -> None:
        if add_dict is not None:
            add_dict(dict(zip(STEP_TAGS, values)), step, walltime=wall)
        else:
            add_rows(STEP_TAGS, [values], [step], [wall])
        losses.append(loss)
        steps.append(step)
        walls.append(wall)
        if len(losses) == LOSS_BATCH:
            if add_column is not None:
                add_column("train/loss", losses, steps, walls)
            else:
                add_rows(("train/loss",), [[loss] for loss in losses], steps, walls)
            losses.clear(), steps.clear(), walls.clear()

    return log


def _per_value(writer):
    add_scalar = writer.add_scalar

    def log(step: int, values: list[float], loss: float, wall: float) -> None:
        for tag, value in zip(STEP_TAGS, values):
            add_scalar(tag, value, step, walltime=wall)
        add_scalar("train/loss", loss, step, walltime=wall)

    return log


def inner(variant: str, steps: int, warmup: int) -> None:
    """Runs inside valgrind: ``warmup`` steps, a flush, then ``steps`` steps and a flush."""
    sys.path.insert(0, os.getcwd())
    with tempfile.TemporaryDirectory() as logdir:
        writer = _writer(variant, logdir)
        log = _batched(writer) if variant == "ours_rows" else _per_value(writer)
        values = [[(step * 31 + index) * 1e-3 for index in range(len(STEP_TAGS))] for step in range(steps + warmup)]
        for step in range(warmup):
            log(step, values[step], 1.0 / (step + 1), 1.7e9 + step)
        writer.flush()
        gc.collect()
        gc.freeze()
        for step in range(warmup, warmup + steps):
            log(step, values[step], 1.0 / (step + 1), 1.7e9 + step)
        writer.flush()
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    sys.exit(callgrind.main(__file__, __doc__, VARIANTS, inner, warmup=128))
