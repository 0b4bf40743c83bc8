"""Where NaN/Inf start: the first op whose output is not finite, with its inputs' statistics."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

import engine
from engine import hooks
from instrumentation.dynamics.parameters import ParameterStats
from instrumentation.format.alert_names import INPUTS, MODULE, NONFINITE, OP, OUTPUTS, PHASE
from instrumentation.format.alerts import Alert
from instrumentation.profiler.spans import log_end, recording

LOG_SPAN = "watch"  # the name of watch()'s own work (check_numerics included) in a profiler's trace, category "log"


_dot, _isfinite, _now = np.dot, math.isfinite, time.perf_counter_ns


def has_nonfinite(array: Any) -> bool:
    """Cheap test: the sum of squares (one BLAS dot) is finite when no element is NaN/Inf; when it is not — a
    NaN/Inf, or squares that overflow — the full element-wise check decides."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or dtype.kind not in "fc":
        return False
    flat = array.reshape(-1)
    if math.isfinite(abs(np.dot(flat, flat))):
        return False
    return not bool(np.isfinite(array).all())


def array_stats(array: Any) -> dict[str, Any]:
    """Shape, dtype, min/max of the finite values (None when there are none) and NaN/±Inf counts."""
    array = np.asarray(array)
    stats: dict[str, Any] = {"shape": list(array.shape), "dtype": str(array.dtype)}
    if array.dtype.kind not in "fc":
        stats.update(min=float(array.min()) if array.size else None, max=float(array.max()) if array.size else None,
                     nan_count=0, posinf_count=0, neginf_count=0)
        return stats
    finite = np.isfinite(array)
    values = array[finite]
    stats.update(min=float(values.min()) if values.size else None, max=float(values.max()) if values.size else None,
                 nan_count=int(np.count_nonzero(np.isnan(array))),
                 posinf_count=int(np.count_nonzero(np.isposinf(array))),
                 neginf_count=int(np.count_nonzero(np.isneginf(array))))
    return stats


def nonfinite_alert(op: str, module: str, phase: str, step: int, inputs: tuple[Any, ...],
                    outputs: tuple[Any, ...]) -> Alert:
    input_stats = [array_stats(a) for a in inputs]
    output_stats = [array_stats(a) for a in outputs if a is not None]
    bad = sum(s["nan_count"] for s in output_stats), sum(s["posinf_count"] + s["neginf_count"] for s in output_stats)
    where = f"in module '{module}'" if module else "outside any module"
    described = "; ".join(f"input {i}: min {s['min']}, max {s['max']}, {s['nan_count']} NaN, "
                          f"{s['posinf_count'] + s['neginf_count']} Inf" for i, s in enumerate(input_stats))
    message = (f"first non-finite value: op {op} {where} ({phase}, step {step}) produced {bad[0]} NaN and {bad[1]} "
               f"Inf; {described or 'no inputs'}")
    return Alert(kind=NONFINITE, severity="error", subject=module or op, message=message, step=step,
                 evidence={OP: op, MODULE: module, PHASE: phase, "step": step, INPUTS: input_stats,
                           OUTPUTS: output_stats})


class NumericsObserver:
    """Reports the first non-finite op output through ``report`` and then raises ``engine.NonFiniteError``
    (``raise_error``) or stops looking (the first origin is the one that matters).

    It is an engine recorder: ``op`` gets every op's output arrays (forward and backward, no event object);
    ``attach()`` adds it to the engine's recorders and ``detach()`` takes it out."""

    def __init__(self, report: Callable[[Alert], None], raise_error: bool = True) -> None:
        self.report, self.raise_error = report, raise_error
        self.found: Alert | None = None

    def attach(self) -> None:
        hooks.add_recorder(self)

    def detach(self) -> None:
        hooks.remove_recorder(self)

    def op(self, op: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        """The check: the common case (every output a finite float array) is one BLAS dot per output."""
        if self.found is not None:
            return
        start = _now() if recording else 0  # NOTE: per op: the test inline, not log_start()
        for output in outputs:
            if output is None:
                continue
            if output.dtype.kind == "f" and _isfinite(_dot(flat := output.reshape(-1), flat)):
                continue
            if has_nonfinite(output):
                if start:
                    log_end(LOG_SPAN, start)
                self.fail(nonfinite_alert(op, module, hooks.current_phase(), hooks.current_step(), tuple(inputs),
                                          tuple(o for o in outputs if o is not None)))
                return
        if start:
            log_end(LOG_SPAN, start)

    def check_parameters(self, optimizer: Any, step: int, named_parameters: list[tuple[str, Any]],
                         stats: ParameterStats | None = None) -> None:
        """After an optimizer step: a parameter the update made non-finite (its gradient was finite, or the ops
        that made the gradient would have been reported first). ``stats``: the step's norms, when measured; a
        parameter whose ‖w‖ before the step and ‖Δw‖ are finite is finite after it (w + Δw, every element of
        both finite), so only the others are read again."""
        if self.found is not None:
            return
        finite = () if stats is None else {name for name, weight, update in zip(
            stats.names, stats.weight_norms, stats.update_norms) if _isfinite(weight) and _isfinite(update)}
        for name, param in named_parameters:
            if name in finite:
                continue
            data = param.numpy()
            if has_nonfinite(data):
                grad = param.grad.numpy() if param.grad is not None else None
                op = f"{type(optimizer).__name__}.step"
                self.fail(nonfinite_alert(op, name, "optimizer", step, (grad,) if grad is not None else (), (data,)))
                return

    def fail(self, alert: Alert) -> None:
        self.found = alert
        self.report(alert)
        if self.raise_error:
            evidence = alert.evidence
            raise engine.NonFiniteError(alert.message, op=evidence[OP], module=evidence[MODULE],
                                        phase=evidence[PHASE], step=evidence["step"])
