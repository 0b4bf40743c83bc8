"""Tensor: an array, its gradient and the graph node that produced it.

Its operators and ``backward`` call ``engine.ops`` and ``engine.autograd``, which build on Tensor: ``engine`` binds
them here once both are imported (``bind``), so no module imports back into this one.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from engine import config as _config
from engine import memory as _memory
from engine import backend as _backend
from engine.backend import cuda_backend as _cuda

_FLOAT_KINDS = "f"
_read_guard: Any = None  # set by engine.function while tracing: refuses reading a traced value
_ops: Any = None  # engine.ops, bound by ``bind``
_autograd: Any = None  # engine.autograd, bound by ``bind``


def bind(ops: Any, autograd: Any) -> None:
    """Give Tensor's operators and ``backward`` the modules that implement them (``engine/__init__`` calls this)."""
    global _ops, _autograd
    _ops, _autograd = ops, autograd


def set_read_guard(guard: Any) -> Any:
    """``guard(tensor, what)`` is called before any read of a tensor's value (None: reads are free); returns the
    previous guard. ``engine.function``'s tracer refuses reads of traced values with it."""
    global _read_guard
    previous, _read_guard = _read_guard, guard
    return previous


@contextlib.contextmanager
def reads_allowed() -> Iterator[None]:
    """Tensor values may be read inside, even while ``engine.function`` traces (forward hooks are observers, not the
    traced function's code)."""
    previous = set_read_guard(None)
    try:
        yield
    finally:
        set_read_guard(previous)


def _as_dtype(dtype: Any) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError as error:
        raise TypeError(f"unknown dtype {dtype!r}: pass a NumPy dtype or its name such as 'float32'") from error


class Tensor:
    """An n-dimensional array with reverse-mode autodiff; create with :func:`engine.tensor`."""

    __slots__ = ("_data", "_mem_key", "_ctx", "requires_grad", "grad", "name", "_post_accumulate_grad_hooks",
                 "__weakref__")
    __array_priority__ = 1000  # numpy scalars/arrays on the left defer to Tensor's reflected operators

    def __init__(self, data: Any, dtype: Any = None, requires_grad: bool = False, name: str | None = None,
                 _category: str = "input", device: Any = None) -> None:
        if isinstance(data, Tensor):
            data = data._data
        if _backend.is_device_array(data):  # a CuPy array stays on its GPU (copied, as NumPy data is)
            array = _cuda.adopt(data.astype(_as_dtype(dtype)) if dtype is not None else data.copy())
        elif dtype is not None:
            array = np.array(data, dtype=_as_dtype(dtype))
        else:
            array = np.array(data)
            if array.dtype == np.float64 and not _is_float64_source(data):
                array = array.astype(_config.DEFAULT_DTYPE)
            elif array.dtype.kind not in "fiub":
                raise TypeError(f"cannot make a tensor from {type(data).__name__} of dtype {array.dtype}; "
                                "supported: float32, float64, int32, int64, bool")
        if requires_grad and array.dtype.kind not in _FLOAT_KINDS:
            raise TypeError(f"only floating-point tensors can require gradients, got dtype {array.dtype} "
                            f"(name={name!r}, shape={array.shape})")
        if device is not None:
            array = _backend.to_device(array, device)
        self._mem_key = _memory.register(array, _category, "tensor")
        self._data = array
        self._ctx = None
        self.requires_grad = bool(requires_grad)
        self.grad: Tensor | None = None
        self.name = name

    @classmethod
    def _wrap_array(cls, array: Any, category: str, op: str = "", requires_grad: bool = False) -> Tensor:
        """A tensor around an array the engine made (no copy)."""
        key = _memory.register(array, category, op)
        t = cls.__new__(cls)
        t._data, t._mem_key, t._ctx, t.requires_grad, t.grad, t.name = array, key, None, requires_grad, None, None
        return t

    def __del__(self) -> None:
        try:
            _memory.release(self._mem_key)
        except (AttributeError, TypeError):  # half-built tensor, or interpreter shutdown
            pass

    # --- attributes ---------------------------------------------------------------------------------
    @property
    def data(self) -> Any:
        """The underlying array; writable in place under ``engine.no_grad()``."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        array = value._data if isinstance(value, Tensor) else value
        if not _backend.is_device_array(array):
            array = np.asarray(array)
        if array.shape != self._data.shape:
            raise ValueError(f"cannot assign data of shape {array.shape} to a tensor of shape {self._data.shape}")
        key = _memory.register(array, "input", "data")
        _memory.release(self._mem_key)
        self._data, self._mem_key = array, key

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def device(self) -> _backend.Device:
        """Where the data lives: ``device(type='cpu')`` or ``device(type='cuda', index=N)``; equal to "cpu"/"cuda:N"."""
        return _backend.array_device(self._data)

    @property
    def is_cuda(self) -> bool:
        return type(self._data) is not np.ndarray and _backend.is_device_array(self._data)

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self) -> Any:
        return self._ctx

    def __len__(self) -> int:
        if not self._data.ndim:
            raise TypeError("len() of a 0-d tensor")
        return len(self._data)

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        extra = ", requires_grad=True" if self.requires_grad else ""
        extra += f", grad_fn={self._ctx.name}" if self._ctx is not None else ""
        extra += f", name={self.name!r}" if self.name else ""
        body = np.array2string(self._host(), separator=", ", prefix="tensor(", threshold=200)
        if type(self._data) is not np.ndarray:
            extra = f", device='{self.device}'" + extra
        return f"tensor({body}, dtype={self._data.dtype}{extra})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if _read_guard is not None:
            _read_guard(self, "bool()")
        return bool(self._data)

    def __float__(self) -> float:
        if _read_guard is not None:
            _read_guard(self, "float()")
        return float(self.item())

    def __int__(self) -> int:
        if _read_guard is not None:
            _read_guard(self, "int()")
        return int(self.item())

    # --- conversion ---------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (a view on the CPU; a copy from a GPU)."""
        if _read_guard is not None:
            _read_guard(self, ".numpy()")
        return self._host()

    def _host(self) -> np.ndarray:
        data = self._data
        if type(data) is np.ndarray:
            return data
        return _cuda.to_host(data) if _backend.is_device_array(data) else np.asarray(data)

    def to(self, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False) -> Tensor:
        """This tensor on ``device`` and/or in ``dtype``, as ``torch.Tensor.to``: ``t.to("cuda")``,
        ``t.to("float64")``, ``t.to("cuda:0", "float16")``, ``t.to(other_tensor)``. Returns ``self`` when nothing
        changes; a move is part of the graph (the gradient goes back to the source device). ``non_blocking`` is
        accepted as PyTorch's; the copy is complete when this returns (overlap copies with ``prefetch_to_device``).
        A CUDA device without CUDA is a RuntimeError saying why (CuPy missing, no device, driver too old)."""
        if len(args) == 1 and isinstance(args[0], Tensor):
            args = (args[0].device, args[0].dtype)
        device, dtype = _backend.to_arguments("to()", args, device, dtype)
        out = self
        if dtype is not None and _as_dtype(dtype) != self._data.dtype:
            out = _ops.cast(out, dtype)
        if device is not None:
            target = _backend.resolve(device)
            if target != out.device:
                out = _ops.to_device(out, target)
        return out

    def cuda(self, device: Any = None) -> Tensor:
        """This tensor on CUDA device ``device`` (the current one by default)."""
        return self.to("cuda" if device is None else _backend.as_device(device))

    def cpu(self) -> Tensor:
        """This tensor in host memory (itself when it is there already)."""
        return self.to("cpu")

    def item(self) -> Any:
        if self._data.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self._data.shape}")
        if _read_guard is not None:
            _read_guard(self, ".item()")
        return self._data.item()  # NOTE: a size-1 array of any shape (NumPy and CuPy alike)

    def tolist(self) -> Any:
        if _read_guard is not None:
            _read_guard(self, ".tolist()")
        return self.numpy().tolist()

    def detach(self) -> Tensor:
        """A tensor sharing this one's data, outside the graph."""
        return Tensor._wrap_array(self._data.view(), "activation", "detach")

    def astype(self, dtype: Any) -> Tensor:
        return _ops.cast(self, dtype)

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A leaf copy with its own buffer (registered with the allocator) and a copy of ``.grad``."""
        if self._ctx is not None:
            raise RuntimeError("only leaf tensors support deepcopy; detach() first")
        copied = Tensor._wrap_array(self._data.copy(), "input", "deepcopy", self.requires_grad)
        copied.name = self.name
        if self.grad is not None:
            copied.grad = Tensor._wrap_array(self.grad._data.copy(), "gradient", "grad")
        memo[id(self)] = copied
        return copied

    def zero_(self) -> Tensor:
        self._data[...] = 0
        return self

    def requires_grad_(self, flag: bool = True) -> Tensor:
        if flag and self._data.dtype.kind not in _FLOAT_KINDS:
            raise TypeError(f"only floating-point tensors can require gradients, got dtype {self._data.dtype}")
        if not self.is_leaf:
            raise RuntimeError("requires_grad_ can only change leaf tensors; use detach() first")
        self.requires_grad = bool(flag)
        return self

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """Call ``hook(self)`` during ``backward()`` as soon as this leaf's ``.grad`` is final (accumulated); as in
        PyTorch. Returns a handle whose ``remove()`` takes the hook out."""
        from engine import grad_hooks
        return grad_hooks.register(self, hook)

    def backward(self, grad: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``; the graph is freed unless ``retain_graph``."""
        _autograd.backward(self, grad, retain_graph)

    # --- operators ----------------------------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor: return _ops.add(self, other)
    def __radd__(self, other: Any) -> Tensor: return _ops.add(other, self)
    def __sub__(self, other: Any) -> Tensor: return _ops.sub(self, other)
    def __rsub__(self, other: Any) -> Tensor: return _ops.sub(other, self)
    def __mul__(self, other: Any) -> Tensor: return _ops.mul(self, other)
    def __rmul__(self, other: Any) -> Tensor: return _ops.mul(other, self)
    def __truediv__(self, other: Any) -> Tensor: return _ops.div(self, other)
    def __rtruediv__(self, other: Any) -> Tensor: return _ops.div(other, self)
    def __matmul__(self, other: Any) -> Tensor: return _ops.matmul(self, other)
    def __rmatmul__(self, other: Any) -> Tensor: return _ops.matmul(other, self)
    def __pow__(self, other: Any) -> Tensor: return _ops.pow(self, other)
    def __rpow__(self, other: Any) -> Tensor: return _ops.pow(other, self)
    def __neg__(self) -> Tensor: return _ops.neg(self)
    def __abs__(self) -> Tensor: return _ops.abs(self)
    def __lt__(self, other: Any) -> Tensor: return _ops.less(self, other)
    def __le__(self, other: Any) -> Tensor: return _ops.less_equal(self, other)
    def __gt__(self, other: Any) -> Tensor: return _ops.greater(self, other)
    def __ge__(self, other: Any) -> Tensor: return _ops.greater_equal(self, other)
    def __eq__(self, other: Any) -> Tensor: return _ops.equal(self, other)  # type: ignore[override]
    def __ne__(self, other: Any) -> Tensor: return _ops.not_equal(self, other)  # type: ignore[override]
    def __getitem__(self, index: Any) -> Tensor: return _ops.getitem(self, index)

    # --- methods --------------------------------------------------------------------------------------
    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor: return _ops.sum(self, axis, keepdims)
    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor: return _ops.mean(self, axis, keepdims)
    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor: return _ops.max(self, axis, keepdims)
    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor: return _ops.min(self, axis, keepdims)
    def argmax(self, axis: Any = None) -> Tensor: return _ops.argmax(self, axis)
    def reshape(self, *shape: Any) -> Tensor: return _ops.reshape(self, *shape)
    def transpose(self, *axes: Any) -> Tensor: return _ops.transpose(self, *axes)
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor: return _ops.flatten(self, start_dim, end_dim)
    def exp(self) -> Tensor: return _ops.exp(self)
    def log(self) -> Tensor: return _ops.log(self)
    def sqrt(self) -> Tensor: return _ops.sqrt(self)
    def abs(self) -> Tensor: return _ops.abs(self)
    def clip(self, min: Any = None, max: Any = None) -> Tensor: return _ops.clip(self, min, max)
    def tanh(self) -> Tensor: return _ops.tanh(self)
    def sigmoid(self) -> Tensor: return _ops.sigmoid(self)
    def relu(self) -> Tensor: return _ops.relu(self)
    def leaky_relu(self, negative_slope: float = 0.01) -> Tensor: return _ops.leaky_relu(self, negative_slope)
    def gelu(self) -> Tensor: return _ops.gelu(self)
    def softmax(self, axis: int = -1) -> Tensor: return _ops.softmax(self, axis)
    def log_softmax(self, axis: int = -1) -> Tensor: return _ops.log_softmax(self, axis)

    @property
    def T(self) -> Tensor:
        return _ops.transpose(self)


def _is_float64_source(data: Any) -> bool:
    """True when the caller handed over float64 arrays on purpose (NumPy float64), not Python floats."""
    if isinstance(data, np.ndarray):
        return data.dtype == np.float64
    return isinstance(data, np.floating) and data.dtype == np.float64


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, name: str | None = None,
           device: Any = None) -> Tensor:
    """Make a tensor from array-like ``data`` (copied). Python floats become float32, NumPy arrays keep
    their dtype; ``dtype`` takes NumPy dtypes or names such as ``"float64"``; ``device`` is "cpu", "cuda" or
    "cuda:N" (default: where ``data`` is — the host, or the GPU of a CuPy array)."""
    return Tensor(data, dtype=dtype, requires_grad=requires_grad, name=name, device=device)

