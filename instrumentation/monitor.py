"""watch(model, writer): one line that logs a model's training dynamics and raises alerts (docs/dynamics.md)."""
from __future__ import annotations

from typing import Any

from instrumentation.budget import DEFAULT_BUDGET, check_budget, check_every
from instrumentation.distributed import RankMonitor, rank_and_world_size
from instrumentation.dynamics import DynamicsThresholds, Watch
from instrumentation.memory import MemoryTracker
from instrumentation.profiler import OnDemandCapture
from instrumentation.torch import is_torch_module

__all__ = ["DynamicsThresholds", "Watch", "watch"]

MEMORY_SHARE = 0.3  # of watch()'s budget, for its memory tracker (the rest for the statistics and histograms)


def watch(model: Any, writer: Any, *, budget: float = DEFAULT_BUDGET, every: int | None = None,
          histograms_every: int = 100, optimizer: Any = None, check_numerics: bool = False,
          raise_on_nonfinite: bool = True, thresholds: DynamicsThresholds | None = None, memory: bool = True,
          memory_stacks: bool = False, capture_requests: bool = True, ranks: bool | None = None) -> Watch:
    """Observe ``model`` (an ``engine.nn.Module`` or a ``torch.nn.Module``: docs/torch.md) while it trains and write
    to ``writer`` (a ``SummaryWriter``).

    Every k steps: ``grad_norm/<param>``, ``update_ratio/<param>`` (‖Δw‖/‖w‖ of the update the optimizer
    applied), ``act/<layer>/<stat>``, ``perf/*``, the learning rate and, where not zero, the NaN/Inf counts
    ``nonfinite/<param>/<stat>``; at most every ``histograms_every`` steps (0:
    never) ``weight/<param>`` and ``grad/<param>`` histograms. ``budget``: the share of step time the handle and its
    memory tracker may cost: they measure their own work and the step time and choose k (and the histograms'
    interval, and which steps the tracker logs) to keep within it, the first 32 steps observed at every step; the
    chosen intervals and measured costs are logged as ``perf/interval/<observer>`` and
    ``perf/instrumentation_ms/<observer>``. ``every``: a fixed k instead (histograms then exactly every
    ``histograms_every`` steps). The loss, the alert rules' inputs, ``check_numerics`` and OOM capture are never
    thinned. The step after an alert (paced only), ``engine.fit``'s last step (from its second epoch on) and, at
    ``close()``, the last step's gradient norms and histograms are sampled too, so the charts reach the run's end.
    ``optimizer``: only that optimizer's steps count (default: any). ``check_numerics``: check every op output for
    NaN/Inf; the first one found is an alert, then ``engine.NonFiniteError`` is raised (or, with
    ``raise_on_nonfinite=False``, training goes on). Returns the handle: an ``engine.fit`` callback, with
    ``log_loss``, ``alerts`` and ``close()``.

    ``memory``: also start a ``MemoryTracker`` (``mem/<device>/*`` scalars, snapshots, OOM capture, leak
    alerts; ``memory_stacks`` records allocation stacks, which costs more). ``capture_requests``: answer the
    board's Capture button (a request file in the run directory, checked at the sampled steps' ends). Both are closed
    with the handle.

    ``ranks``: also attach a ``RankMonitor`` (per-step ``perf/allreduce_ms``, ``perf/allreduce_wait_ms``,
    ``perf/comm_bytes`` and step/data times, ``dist/param_checksum``, ``straggler`` and ``replica_divergence`` alerts);
    None (default): when ``engine.distributed`` is initialised with more than one rank. The monitor then writes
    ``perf/step_time_ms`` and ``perf/data_time_ms`` at every step (the same steps on every rank) and the handle does
    not.
    """
    budget = check_budget("watch", budget)
    every = check_every("watch", every)
    if isinstance(histograms_every, bool) or not isinstance(histograms_every, int) or histograms_every < 0:
        raise ValueError(f"watch: histograms_every must be an integer >= 0, got {histograms_every!r}")
    if not callable(getattr(model, "named_parameters", None)) or not callable(getattr(model, "register_forward_hook",
                                                                                     None)):
        raise TypeError(f"watch: model must be an engine.nn.Module or a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(getattr(writer, "log_dir", None), str) or not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"watch: writer must be a SummaryWriter (with log_dir and add_scalar), got "
                        f"{type(writer).__name__}")
    if ranks is not None and not isinstance(ranks, bool):
        raise TypeError(f"watch: ranks must be None (a RankMonitor when distributed with > 1 rank), True or False, "
                        f"got {ranks!r}")
    if thresholds is not None and not isinstance(thresholds, DynamicsThresholds):
        raise TypeError(f"watch: thresholds must be a DynamicsThresholds, got {type(thresholds).__name__}")
    if is_torch_module(model):  # NOTE: torch is imported only for a torch model (docs/torch.md)
        from instrumentation.torch.watch import watch_torch

        return watch_torch(model, writer, budget=budget, every=every, histograms_every=histograms_every,
                           optimizer=optimizer, check_numerics=check_numerics, raise_on_nonfinite=raise_on_nonfinite,
                           thresholds=thresholds, memory=memory, capture_requests=capture_requests, ranks=ranks)
    handle = Watch(model, writer, every=every, histograms_every=histograms_every, optimizer=optimizer,
                   check_numerics=check_numerics, raise_on_nonfinite=raise_on_nonfinite,
                   thresholds=thresholds or DynamicsThresholds(),
                   budget=budget * (1 - MEMORY_SHARE) if memory else budget)
    if memory:
        handle.attach(MemoryTracker(writer, model=model, stacks=memory_stacks, budget=budget * MEMORY_SHARE,
                                    every=None if every is None else 1))
    if ranks is None:
        ranks = rank_and_world_size()[1] > 1
    if ranks:
        handle.attach(RankMonitor(writer, model))
    if capture_requests:
        handle.serve_captures(OnDemandCapture(writer.log_dir))
    return handle
