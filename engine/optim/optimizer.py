"""Optimizer base: parameter groups, per-parameter state, the step boundary and (de)serialisable state."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import numpy as np

from engine import hooks as _hooks
from engine.backend import get_array_module, is_device_array, to_device
from engine.op import enable_grad
from engine.tensor import Tensor


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()  # a default that a param group must set itself (SGD's lr)

_now = time.perf_counter_ns


class Optimizer:
    """Base class of the optimizers, with PyTorch's interface and semantics.

    ``params`` is an iterable of Tensors, or of dicts ``{"params": [...], <hyper-parameter>: value}`` that
    override the defaults for their group. ``state`` maps a parameter Tensor to its dict of state; state arrays
    are Tensors registered with the allocator as ``optimizer_state``. Subclasses implement ``_update_group``,
    which updates each parameter's ``_data`` in place. One ``step()`` is one training step: it runs in the
    ``optimizer`` phase and ends with ``engine.hooks.mark_step_end()``.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Tensor, dict[str, Any]] = {}
        # NOTE: scratch space for the update's temporaries: one flat buffer per dtype, cut into two views per
        # parameter, so a step allocates nothing once the first step has run.
        self._workspace: dict[tuple[np.dtype, Any], Tensor] = {}  # per (dtype, device)
        self._scratch: dict[Tensor, tuple[Any, Any]] = {}
        if isinstance(params, (Tensor, dict)):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            f"got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {value}" for key, value in sorted(group.items()) if key != "params")
        return "\n".join(lines + [")"])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (with its own hyper-parameters) to optimize."""
        if not isinstance(param_group, dict):
            raise TypeError(f"a param group must be a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if params is None:
            raise ValueError("a param group needs a 'params' entry")
        params = [params] if isinstance(params, Tensor) else list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but param {i} of group "
                                f"{len(self.param_groups)} is a {type(p).__name__}")
            if not p.requires_grad:
                raise ValueError(f"param {i} of group {len(self.param_groups)} (shape {p.shape}, name {p.name!r}) "
                                 "does not require grad; create it with requires_grad=True")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (param {i}, shape {p.shape})")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a param group contains the same parameter more than once")
        group = {key: value for key, value in param_group.items() if key != "params"}
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {key}")
            group.setdefault(key, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        self._validate_group(group)
        self.param_groups.append(group)

    def _validate_group(self, group: dict[str, Any]) -> None:
        """Raise ValueError for hyper-parameters outside their range (subclasses)."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: drop it (default) or fill it with zeros in place."""
        if _hooks.zero_grad:
            _hooks.emit(_hooks.zero_grad, self, set_to_none)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data.fill(0)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; close the training step. Returns ``closure()``'s loss.

        Recorders see ``optimizer_call`` first, then (after the closure) ``before_update`` — the optimizer hook
        where ``.grad`` may still change (DDP waits for its AllReduce there) — then ``optimizer_step_begin``/``_end``
        around the update."""
        if _hooks.optimizer_call:
            _hooks.emit(_hooks.optimizer_call, self, closure)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if _hooks.before_update:
            _hooks.emit(_hooks.before_update, self)
        if _hooks.optimizer_observed:
            self._update_observed()
        else:
            self._update()
        _hooks.mark_step_end()
        return loss

    def _update(self) -> None:
        """Update every parameter that has a gradient, in the ``optimizer`` phase."""
        previous = _hooks.set_phase("optimizer")
        try:
            self._update_groups()
        finally:
            _hooks.set_phase(previous)

    def _update_observed(self) -> None:
        """``_update`` between ``optimizer_step_begin`` (in the ``optimizer`` phase) and ``optimizer_step_end``
        recorders: the one observed path of the step (the end is not reported when the update raised)."""
        previous = _hooks.set_phase("optimizer")
        try:
            _hooks.emit(_hooks.optimizer_step_begin, _hooks.OptimizerEvent(self, _hooks._step, _now()))
            self._update_groups()
        finally:
            _hooks.set_phase(previous)
        _hooks.emit(_hooks.optimizer_step_end, _hooks.OptimizerEvent(self, _hooks._step, _now()))

    def _update_groups(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update_group(group, params)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        raise NotImplementedError

    # --- helpers for subclasses ---------------------------------------------------------------------
    def _state_array(self, p: Tensor) -> Tensor:
        """A zero-filled state buffer shaped like ``p``, registered as optimizer state."""
        return Tensor._wrap_array(get_array_module(p._data).zeros_like(p._data), "optimizer_state",
                                  type(self).__name__)

    def _scratch_for(self, p: Tensor) -> tuple[Any, Any]:
        """Two scratch arrays shaped like ``p`` (views into the optimizer's workspace); reused every step."""
        views = self._scratch.get(p)
        if views is None or type(views[0]) is not type(p._data):  # (new, or the parameter moved to another device)
            dtype, device = p._data.dtype, p.device
            largest = max(q._data.size for g in self.param_groups for q in g["params"]
                          if q._data.dtype == dtype and q.device == device)
            buffer = self._workspace.get((dtype, device))
            if buffer is None or buffer._data.size < 2 * largest:
                flat = get_array_module(p._data).zeros((2 * largest,), dtype=dtype)
                buffer = self._workspace[(dtype, device)] = Tensor._wrap_array(flat, "optimizer_state",
                                                                     type(self).__name__ + ".workspace")
                self._scratch.clear()
            flat, n = buffer._data, p._data.size
            views = self._scratch[p] = (flat[:n].reshape(p.shape), flat[largest:largest + n].reshape(p.shape))
        return views

    def _follow_device(self, p: Tensor, state: dict[str, Any]) -> None:
        """Move ``p``'s state arrays to ``p``'s device (the model was moved after the optimizer stepped)."""
        for key, value in state.items():
            if isinstance(value, Tensor) and type(value._data) is not type(p._data):
                state[key] = Tensor._wrap_array(to_device(value._data, p.device), "optimizer_state",
                                                type(self).__name__)

    # --- state dict ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index, ...]}]}`` as in PyTorch.

        Parameters are numbered in the order of ``param_groups``; the state's Tensors are the live buffers.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {index[id(p)]: dict(values) for p, values in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyper-parameters and state saved by :meth:`state_dict` (values are copied)."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("an optimizer state dict needs the keys 'state' and 'param_groups'")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, this optimizer has "
                             f"{len(self.param_groups)}")
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"loaded parameter group {i} has {len(saved['params'])} parameters, this "
                                 f"optimizer's has {len(group['params'])}")
        by_index = {int(key): value for key, value in state_dict["state"].items()}
        new_state: dict[Tensor, dict[str, Any]] = {}
        for saved, group in zip(saved_groups, self.param_groups):
            for index, p in zip(saved["params"], group["params"]):
                values = by_index.get(int(index))
                if values is not None:
                    new_state[p] = {key: self._restore_value(p, key, value) for key, value in values.items()}
        for saved, group in zip(saved_groups, self.param_groups):
            group.update({key: _plain(value) for key, value in saved.items() if key != "params"})
        self.state = new_state

    def _restore_value(self, p: Tensor, key: str, value: Any) -> Any:
        """A saved state entry as this optimizer's own copy; arrays go to the parameter's device (and dtype)."""
        if isinstance(value, (Tensor, np.ndarray)) or is_device_array(value):
            array = value._data if isinstance(value, Tensor) else value
            if array.shape != p.shape:
                raise ValueError(f"state '{key}' has shape {array.shape}, its parameter has shape {p.shape}")
            dtype = p.dtype if array.dtype.kind == "f" else array.dtype
            if type(p._data) is np.ndarray:
                host = array if type(array) is np.ndarray else array.get()
                copy = np.array(host, dtype=dtype, copy=True)
            else:
                copy = to_device(array, p.device).astype(dtype, copy=True)
            return Tensor._wrap_array(copy, "optimizer_state", type(self).__name__)
        return _plain(value)


def _plain(value: Any) -> Any:
    """A saved hyper-parameter or state entry as a Python value (0-d arrays become numbers)."""
    if isinstance(value, Tensor):
        value = value._data
    if (isinstance(value, np.ndarray) or is_device_array(value)) and value.ndim == 0:
        return value.item()
    return value
