"""flowscope's deep-learning engine: tensors, autodiff, layers, optimizers, data; observable through one list of
recorders (engine.hooks)."""
from __future__ import annotations

from engine import config, cuda, hooks, memory, memory_recording, op_log
from engine.backend import Device
from engine.backend import Device as device
from engine.memory import OutOfMemoryError
from engine.errors import NonFiniteError
from engine.tensor import Tensor, tensor
from engine.op import Function, enable_grad, is_grad_enabled, no_grad
from engine.autograd import grad
from engine.ops import concat, stack, where
from engine import autograd as _autograd, ops as _ops
from engine.tensor import bind as _bind_tensor
from engine.random import manual_seed
from engine import data, datasets
from engine import nn, optim
from engine import distributed
from engine.serialization import load, save
from engine.training import History, StopTraining, fit
from engine.graph.traced_function import function
from engine.graph.trace import TracingError
from engine import debug as _debug

_bind_tensor(_ops, _autograd)  # Tensor's operators and backward (they build on Tensor: no import back)
_debug.sync()  # FLOWSCOPE_DEBUG: the output check is a recorder like any other

__version__ = "0.1.0"

__all__ = ["Device", "Function", "History", "NonFiniteError", "OutOfMemoryError", "StopTraining", "Tensor",
           "TracingError", "__version__", "concat", "config", "cuda", "data", "datasets", "device", "distributed",
           "enable_grad", "fit", "function", "grad", "hooks", "is_grad_enabled", "load", "manual_seed", "memory",
           "memory_recording", "nn", "no_grad", "op_log", "optim", "save", "stack", "tensor", "where"]
