"""Inverted dropout: zero each element with probability p and scale the rest by 1/(1-p)."""
from __future__ import annotations

import numpy as np

from engine import random as _random
from engine.op import Function
from engine.ops._util import elementwise_nbytes


class Dropout(Function):
    """The mask comes from ``engine.random.dropout_generator_for`` (the shared generator, or per rank in a
    distributed job), so ``engine.manual_seed`` fixes it."""

    output_nbytes = elementwise_nbytes
    random = True

    def __init__(self, p: float) -> None:
        self.p = p

    def forward(self, x):
        draw_dtype = x.dtype if x.dtype in (np.float32, np.float64) else np.float64
        keep = _random.dropout_generator_for(x).random(x.shape, dtype=draw_dtype) >= self.p
        self.mask = keep.astype(x.dtype)
        if self.p < 1:
            self.mask *= x.dtype.type(1.0 / (1.0 - self.p))
        return x * self.mask

    def backward(self, grad):
        return (grad * self.mask,)
