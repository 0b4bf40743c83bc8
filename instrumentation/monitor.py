"""watch(model, writer): one line that logs a model's training dynamics and raises alerts (docs/dynamics.md)."""
from __future__ import annotations

from typing import Any

from instrumentation.dynamics import DynamicsThresholds, Watch
from instrumentation.memory import MemoryTracker
from instrumentation.profiler import OnDemandCapture

__all__ = ["DynamicsThresholds", "Watch", "watch"]


def watch(model: Any, writer: Any, *, every: int = 1, histograms_every: int = 100, optimizer: Any = None,
          check_numerics: bool = False, raise_on_nonfinite: bool = True,
          thresholds: DynamicsThresholds | None = None, memory: bool = True, memory_stacks: bool = False,
          capture_requests: bool = True) -> Watch:
    """Observe ``model`` (an ``engine.nn.Module``) while it trains and write to ``writer`` (a ``SummaryWriter``).

    Every ``every`` steps: ``grad_norm/<param>``, ``update_ratio/<param>`` (‖Δw‖/‖w‖ of the update the optimizer
    applied), ``act/<layer>/<stat>``, ``perf/*``, the learning rate and, where not zero, the NaN/Inf counts
    ``nonfinite/<param>/<stat>``; every ``histograms_every`` steps (0: never)
    ``weight/<param>`` and ``grad/<param>`` histograms. ``optimizer``: only that optimizer's steps count (default:
    any). ``check_numerics``: check every op output for NaN/Inf; the first one found is an alert, then
    ``engine.NonFiniteError`` is raised (or, with ``raise_on_nonfinite=False``, training goes on). Returns the
    handle: an ``engine.fit`` callback, with ``log_loss``, ``alerts`` and ``close()``.

    ``memory``: also start a ``MemoryTracker`` (``mem/<device>/*`` scalars, snapshots, OOM capture, leak
    alerts; ``memory_stacks`` records allocation stacks, which costs more). ``capture_requests``: answer the
    board's Capture button (a request file in the run directory, checked at step boundaries). Both are closed
    with the handle.
    """
    for name, value, least in (("every", every, 1), ("histograms_every", histograms_every, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"watch: {name} must be an integer >= {least}, got {value!r}")
    if not callable(getattr(model, "named_parameters", None)) or not callable(getattr(model, "register_forward_hook",
                                                                                     None)):
        raise TypeError(f"watch: model must be an engine.nn.Module, got {type(model).__name__}")
    if not isinstance(getattr(writer, "log_dir", None), str) or not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"watch: writer must be a SummaryWriter (with log_dir and add_scalar), got "
                        f"{type(writer).__name__}")
    if thresholds is not None and not isinstance(thresholds, DynamicsThresholds):
        raise TypeError(f"watch: thresholds must be a DynamicsThresholds, got {type(thresholds).__name__}")
    handle = Watch(model, writer, every=every, histograms_every=histograms_every, optimizer=optimizer,
                   check_numerics=check_numerics, raise_on_nonfinite=raise_on_nonfinite,
                   thresholds=thresholds or DynamicsThresholds())
    if memory:
        handle.attach(MemoryTracker(writer, model=model, stacks=memory_stacks))
    if capture_requests:
        handle.attach(OnDemandCapture(writer.log_dir).start())
    return handle
