"""watch() for PyTorch models: the engine's observers fed from torch's module and optimizer hooks (docs/torch.md).

Nothing here imports torch at import time: ``is_torch_module`` looks at ``sys.modules`` only, and ``watch()`` imports
``instrumentation.torch.watch`` (which imports torch) for a model that is one."""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_torch_module"]


def is_torch_module(model: Any) -> bool:
    """Whether ``model`` is a ``torch.nn.Module`` (False, without importing torch, when torch is not loaded: a torch
    model cannot exist then)."""
    torch = sys.modules.get("torch")
    nn = getattr(torch, "nn", None)
    return nn is not None and isinstance(model, nn.Module)
