"""Every op of the engine, one family per module; each op's forward and backward side by side."""
from __future__ import annotations

from engine.ops.activation import gelu, leaky_relu, relu, sigmoid, tanh
from engine.ops.arithmetic import add, div, matmul, mul, neg, pow, sub
from engine.ops.compare import equal, greater, greater_equal, less, less_equal, not_equal, where
from engine.ops.device import to_device
from engine.ops.math import abs, cast, clip, exp, log, sqrt
from engine.ops.reduction import argmax, max, mean, min, sum
from engine.ops.shape import concat, flatten, getitem, reshape, stack, transpose
from engine.ops.softmax import log_softmax, softmax

__all__ = ["abs", "add", "argmax", "cast", "clip", "concat", "div", "equal", "exp", "flatten", "gelu", "getitem",
           "greater", "greater_equal", "leaky_relu", "less", "less_equal", "log", "log_softmax", "matmul", "max",
           "mean", "min", "mul", "neg", "not_equal", "pow", "relu", "reshape", "sigmoid", "softmax", "sqrt",
           "stack", "sub", "sum", "tanh", "to_device", "transpose", "where"]
