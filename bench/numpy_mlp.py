"""A hand-written NumPy MLP training step (forward, backward, Adam): the no-framework peer of the engine."""
from __future__ import annotations

import numpy as np


class NumpyMLP:
    """in → hidden ReLU → classes with softmax cross-entropy and Adam (PyTorch's defaults), all by hand."""

    def __init__(self, in_features: int, hidden: int, classes: int, lr: float = 1e-3, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        bound1, bound2 = 1 / np.sqrt(in_features), 1 / np.sqrt(hidden)
        self.params = [rng.uniform(-bound1, bound1, (hidden, in_features)).astype(np.float32),
                       rng.uniform(-bound1, bound1, hidden).astype(np.float32),
                       rng.uniform(-bound2, bound2, (classes, hidden)).astype(np.float32),
                       rng.uniform(-bound2, bound2, classes).astype(np.float32)]
        self.exp_avg = [np.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [np.zeros_like(p) for p in self.params]
        self.scratch = [np.zeros_like(p) for p in self.params]
        self.lr, self.beta1, self.beta2, self.eps, self.step_count = lr, 0.9, 0.999, 1e-8, 0

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        w1, b1, w2, b2 = self.params
        n = x.shape[0]
        z1 = x @ w1.T
        z1 += b1
        a1 = np.maximum(z1, 0)
        logits = a1 @ w2.T
        logits += b2
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        sums = probs.sum(axis=1, keepdims=True)
        rows = np.arange(n)
        loss = float(np.mean(np.log(sums[:, 0]) - logits[rows, y]))
        probs /= sums
        probs[rows, y] -= 1
        probs /= n  # d loss / d logits
        grads = [None, None, probs.T @ a1, probs.sum(axis=0)]
        da1 = probs @ w2
        da1 *= z1 > 0
        grads[0], grads[1] = da1.T @ x, da1.sum(axis=0)
        self._adam(grads)
        return loss

    def _adam(self, grads: list[np.ndarray]) -> None:
        self.step_count += 1
        step_size = self.lr / (1 - self.beta1 ** self.step_count)
        correction2 = (1 - self.beta2 ** self.step_count) ** 0.5
        for p, g, m, v, tmp in zip(self.params, grads, self.exp_avg, self.exp_avg_sq, self.scratch):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - self.beta2
            v += tmp
            np.sqrt(v, out=tmp)
            tmp /= correction2
            tmp += self.eps
            np.divide(m, tmp, out=tmp)
            tmp *= -step_size
            p += tmp
