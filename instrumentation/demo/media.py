"""What the demo's media run logs besides scalars: a markdown report, images of digits, precision-recall curves."""
from __future__ import annotations

import numpy as np

from instrumentation.summary import SummaryWriter

IMAGES_SHOWN = 16


def digit_images(x: np.ndarray) -> np.ndarray:
    """(n, 64) pixels in [0, 1] → (n, 1, 8, 8) images, upscaled 4× (nearest) so they can be seen."""
    return np.repeat(np.repeat(x.reshape(-1, 1, 8, 8), 4, axis=2), 4, axis=3)


def log_epoch(writer: SummaryWriter, step: int, epoch: int, x_test: np.ndarray, y_test: np.ndarray,
              probabilities: np.ndarray) -> None:
    """The test digits the model gets wrong (up to 16, as one grid), a markdown report with the per-digit accuracy,
    and one precision-recall curve per digit (that digit against the others)."""
    predicted = probabilities.argmax(axis=1)
    wrong = np.flatnonzero(predicted != y_test)[:IMAGES_SHOWN]
    if len(wrong):
        writer.add_images("test/misclassified", digit_images(x_test[wrong]), step)
    rows = "\n".join(f"| {digit} | {(y_test == digit).sum()} | {(predicted[y_test == digit] == digit).mean():.1%} |"
                     for digit in range(10))
    mistakes = ", ".join(f"{y_test[i]}→{predicted[i]}" for i in wrong) or "none"
    writer.add_text("report", f"### Epoch {epoch}\n\nTest accuracy **{(predicted == y_test).mean():.1%}**.\n\n"
                              f"| digit | images | accuracy |\n| --- | --- | --- |\n{rows}\n\n"
                              f"First mistakes (true→predicted): {mistakes}", step)
    for digit in range(10):
        writer.add_pr_curve(f"pr/digit_{digit}", (y_test == digit).astype(np.int64), probabilities[:, digit], step)
