"""Module: the base of layers — registers parameters, buffers and submodules, and marks its path for hooks."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from engine import backend as _backend
from engine import hooks as _hooks
from engine.nn.parameter import Parameter
from engine.tensor import Tensor, reads_allowed

# Bumped whenever any module gains or loses a submodule: the paths hooks see are recomputed lazily.
_structure_version = 0
_paths_root: Any = None  # weak reference to the root module that assigned the current paths
_paths_version = -1
_hooks_version = 0  # bumped whenever a forward hook is added or removed: engine-only answers are recomputed


class IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


class RemovableHandle:
    """Returned by ``register_forward_hook``; ``remove()`` detaches the hook."""

    def __init__(self, hooks: dict[int, Callable], key: int) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        global _hooks_version
        self._hooks.pop(self._key, None)
        _hooks_version += 1


class Module:
    """Base class of layers and models, with the API of ``torch.nn.Module``'s core."""

    _path = ""

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent"] = set()
        d["_modules"] = {}
        d["_forward_hooks"] = {}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        stack = _hooks.module_stack
        scoped = False
        if len(stack) == 1:
            if _paths_version != _structure_version or _paths_root is None or _paths_root() is not self:
                self._assign_paths()
            scoped = _hooks.allocation_site is not None and _hooks.site_scope is None and self._runs_engine_code_only()
        stack.append(self._path)
        if scoped or _hooks.module_observed:
            return self._call_observed(args, kwargs, scoped)
        try:
            out = self.forward(*args, **kwargs)
        finally:
            stack.pop()
        return self._apply_forward_hooks(args, out) if self._forward_hooks else out

    def _runs_engine_code_only(self) -> bool:
        """Whether this module and every submodule are the engine's own classes, with no forward hook and no
        ``forward`` set on the instance (kept until the structure or a forward hook changes)."""
        key = (_structure_version, _hooks_version)
        cached = self.__dict__.get("_engine_only")
        if cached is None or cached[0] != key:
            only = all(type(module).__module__.startswith("engine.") and not module._forward_hooks
                       and "forward" not in module.__dict__ for _, module in self.named_modules())
            cached = self.__dict__["_engine_only"] = (key, only)
        return cached[1]

    def _call_observed(self, args: tuple, kwargs: dict, scoped: bool) -> Any:
        """``__call__`` through the dispatch core (the path is already on the stack): ``module_begin``, the forward,
        ``module_end`` and ``module_call`` (``engine.function``'s tracer makes the call a graph node there), then the
        forward hooks — observers: a tensor read guard does not apply to them.

        ``scoped``: a top-level call of a model made only of the engine's modules, with no forward hook, while an
        ``allocation_site`` recorder records stacks: the stack is walked once, here (``hooks.enter_site_scope``), and
        every buffer the forward allocates gets that site — the caller's line, which each allocation's own walk
        would find, since only engine code runs inside (recorders run outside the scope)."""
        previous = _hooks.enter_site_scope() if scoped else None
        kind = type(self).__name__
        try:
            _hooks.record_module_begin(self._path, kind)
            try:
                out = self.forward(*args, **kwargs)
            finally:
                _hooks.module_stack.pop()
                _hooks.record_module_end(self._path, kind)
        finally:
            if scoped:
                _hooks.exit_site_scope(previous)
        if _hooks.module_call:
            _hooks.emit(_hooks.module_call, self, args, out)
        if self._forward_hooks:
            with reads_allowed():
                return self._apply_forward_hooks(args, out)
        return out

    def _apply_forward_hooks(self, args: tuple, out: Any) -> Any:
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, out)
            if result is not None:
                out = result
        return out

    def _assign_paths(self) -> None:
        global _paths_root, _paths_version
        for name, module in self.named_modules():
            module.__dict__["_path"] = name
        _paths_root, _paths_version = weakref.ref(self), _structure_version

    def register_forward_hook(self, hook: Callable[[Module, tuple, Any], Any]) -> RemovableHandle:
        """Call ``hook(module, inputs, output)`` after every forward; a non-None return replaces the output."""
        global _hooks_version
        key = max(self._forward_hooks, default=-1) + 1
        self._forward_hooks[key] = hook
        _hooks_version += 1
        return RemovableHandle(self._forward_hooks, key)

    # --- registration -------------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called in "
                                 f"{type(self).__name__}.__init__")
        params, modules, buffers = d["_parameters"], d["_modules"], d["_buffers"]
        if isinstance(value, Parameter):
            self._forget(name)
            params[name] = value
        elif isinstance(value, Module):
            self._forget(name)
            modules[name] = value
            _structure_changed()
        elif name in params:
            if value is not None and not isinstance(value, Parameter):
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} of "
                                f"{type(self).__name__} (use engine.nn.Parameter or None)")
            params[name] = value
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} of "
                                f"{type(self).__name__} (use a Module or None)")
            modules[name] = value
            _structure_changed()
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (use a Tensor or None)")
            buffers[name] = value
        elif name == "forward":  # a forward of the user's on this instance: no longer engine code only
            _structure_changed()
        d[name] = value

    def __delattr__(self, name: str) -> None:
        self._forget(name)
        object.__delattr__(self, name)

    def _forget(self, name: str) -> None:
        d = self.__dict__
        d["_parameters"].pop(name, None)
        d["_buffers"].pop(name, None)
        d["_non_persistent"].discard(name)
        if d["_modules"].pop(name, None) is not None:
            _structure_changed()

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._forget(name)
            self.__dict__["_parameters"][name] = None
            self.__dict__[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Model state that is not learned: saved in ``state_dict`` (unless ``persistent=False``)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"buffer {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        self._forget(name)
        self.__dict__["_buffers"][name] = tensor
        if not persistent:
            self.__dict__["_non_persistent"].add(name)
        self.__dict__[name] = tensor

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"module name must be a non-empty string without '.', got {name!r}")
        self._forget(name)
        self.__dict__["_modules"][name] = module
        self.__dict__[name] = module
        _structure_changed()

    register_module = add_module

    # --- traversal ----------------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", memo: set[int] | None = None) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, each once, with dotted paths (this one is ``prefix``)."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, kind: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for path, module in modules:
            for name, value in module.__dict__[kind].items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{path}.{name}" if path else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs such as ``("0.weight", ...)``; shared parameters appear once."""
        return self._named_members("_parameters", prefix, recurse)  # type: ignore[return-value]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> Module:
        module = self
        for part in target.split(".") if target else []:
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r} (looking up {target!r})")
            module = child
        return module

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # --- modes and gradients ------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        for module in self.modules():
            module.__dict__["training"] = bool(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad = bool(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad`` (to None by default, as PyTorch ≥ 2.0)."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad._data[...] = 0

    def to(self, *args: Any, device: Any = None, dtype: Any = None, non_blocking: bool = False) -> Module:
        """Move and/or cast every parameter and buffer in place, as ``torch.nn.Module.to``: ``model.to("cuda")``,
        ``model.to("float64")``, ``model.to("cuda:0", "float32")``. Casting applies to floating-point tensors only;
        a move keeps each parameter the same object (optimizers built before still hold it) and moves its
        ``.grad`` too. Returns ``self``. A CUDA device without CUDA is a RuntimeError saying why. ``non_blocking`` is
        accepted as PyTorch's (the copies are complete when this returns)."""
        device, dtype = _backend.to_arguments("Module.to()", args, device, dtype)
        target = None if device is None else _backend.resolve(device)
        dtype = None if dtype is None else np.dtype(dtype)
        for param in self.parameters():
            array = self._converted(param._data, target, dtype)
            if array is not param._data:
                cast = array.dtype != param._data.dtype
                param._replace(array)
                if param.grad is not None:
                    param.grad = None if cast else Tensor._wrap_array(_backend.to_device(param.grad._data, target),
                                                                      "gradient", "grad")
        for module in self.modules():
            for name, buf in list(module._buffers.items()):
                if buf is None:
                    continue
                array = self._converted(buf._data, target, dtype)
                if array is not buf._data:
                    module.register_buffer(name, Tensor._wrap_array(array, "parameter", "cast"),
                                           name not in module._non_persistent)
        return self

    @staticmethod
    def _converted(array: Any, device: Any, dtype: Any) -> Any:
        """``array`` cast to ``dtype`` (floating point only) and moved to ``device``; itself when neither applies."""
        if dtype is not None and array.dtype.kind == "f" and array.dtype != dtype:
            array = array.astype(dtype)
        if device is not None:
            array = _backend.to_device(array, device)
        return array

    def cuda(self, device: Any = None) -> Module:
        return self.to("cuda" if device is None else _backend.as_device(device))

    def cpu(self) -> Module:
        return self.to("cpu")

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    # --- state --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, as tensors sharing this module's memory."""
        state: dict[str, Tensor] = {}
        for path, module in self.named_modules():
            dot = path + "." if path else ""
            for name, param in module._parameters.items():
                if param is not None:
                    state[dot + name] = param.detach()
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent:
                    state[dot + name] = buf.detach()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values (Tensors or arrays) into this module's parameters and buffers, in place.

        Every key and shape is checked before anything is copied: with ``strict`` a missing or unexpected
        key is an error; a shape mismatch always is.
        """
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(repr(k) for k in missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        arrays = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value._data if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != target.shape:
                problems.append(f"shape mismatch for {key!r}: the checkpoint has {array.shape}, this model "
                                f"has {target.shape}")
            arrays[key] = array
        if problems:
            raise RuntimeError(f"error(s) in loading state_dict for {type(self).__name__}:\n  " + "\n  ".join(problems))
        for key, array in arrays.items():  # copied onto each target's device (host <-> GPU as needed)
            target = own[key]._data
            target[...] = _backend.to_device(array, _backend.array_device(target))
        return IncompatibleKeys(missing, unexpected)

    # --- description --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, module in self._modules.items():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (f"\n  {extra}" if extra else "")
        return head + "\n" + "\n".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()))

    def summary(self, input_shape: tuple[int, ...] | None = None, dtype: Any = None) -> str:
        """A table of every module: path, type, output shape (when ``input_shape`` is given) and parameters."""
        from engine.nn.summary import summarize
        return summarize(self, input_shape, dtype)


def _structure_changed() -> None:
    global _structure_version
    _structure_version += 1
