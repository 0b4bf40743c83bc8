"""Log directories with text, images, PR curves, hparams, a graph and an embedding: written by torch and by ours."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from instrumentation import SummaryWriter

HOSTILE_TEXT = "**bold** <script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> " \
               "[link](javascript:window.__pwned=3) [entity](&#106;avascript:window.__pwned=4) <javascript:alert(5)>"
STEPS = (0, 10, 20)


def _image(step: int, channel: int) -> np.ndarray:
    """A 3x16x24 float CHW image in [0, 1]: a bright band whose position depends on the step."""
    image = np.zeros((3, 16, 24), np.float32)
    image[channel, :, step // 10 * 8:(step // 10 + 1) * 8] = 1.0
    return image


def _log(writer, lr: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for step in STEPS:
        writer.add_scalar("loss", 1.0 / (step + 1) + lr, step)
        writer.add_text("notes", f"step {step}: **lr** {lr}\n\n| a | b |\n|---|---|\n| {step} | {seed} |", step)
        writer.add_image("samples", _image(step, seed % 3), step)
        labels, predictions = rng.integers(0, 2, 200), rng.random(200)
        writer.add_pr_curve("pr", labels, predictions, step, num_thresholds=21)
    writer.add_text("hostile", HOSTILE_TEXT, 0)


def write_torch_runs(logdir: Path) -> None:
    """torch.utils.tensorboard (the test oracle): two runs with hparams in torch's timestamp sub-runs, a graph and an
    embedding in one of them."""
    import torch
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    for index, lr in enumerate((0.1, 0.01)):
        writer = TorchWriter(str(logdir / f"torch_lr{lr}"))
        _log(writer, lr, index)
        writer.add_hparams({"lr": lr, "optimizer": "sgd" if index else "adam", "nesterov": bool(index)},
                           {"hparam/accuracy": 0.8 + index / 10, "hparam/loss": 0.5 - index / 10})
        if index == 0:
            model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
            writer.add_graph(model, torch.zeros(2, 4))
            writer.add_embedding(torch.arange(12.0).reshape(4, 3), metadata=["a", "b", "c", "d"], tag="points")
        writer.close()


def write_our_runs(logdir: Path) -> None:
    for index, lr in enumerate((0.3, 0.03)):
        with SummaryWriter(logdir / f"ours_lr{lr}") as writer:
            _log(writer, lr, index + 5)
            writer.add_hparams({"lr": lr, "optimizer": "sgd", "nesterov": False},
                               {"hparam/accuracy": 0.7 - index / 10, "hparam/loss": 0.6})
