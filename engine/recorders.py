"""The recorder interface (``Recorder``: every method the engine may call, each optional) and the event types its
non-per-op methods and users' observers get. ``engine.hooks`` keeps the list of recorders and calls them."""
from __future__ import annotations

from typing import Any, NamedTuple

# What a recorder may implement (``Recorder`` documents each).
RECORDER_METHODS = ("op_begin", "op", "call_begin", "call", "backward_begin", "backward_node", "gradient_sum",
                    "leaf_grad", "buffer_alloc", "buffer_free", "buffer_history", "allocation_site", "at_peak",
                    "oom", "step_begin", "step_end", "data_wait", "module_begin", "module_end", "module_call",
                    "optimizer_call", "zero_grad", "before_update", "optimizer_step_begin", "optimizer_step_end",
                    "communication", "comm_wait")


class OpEvent(NamedTuple):
    """One op execution. ``outputs`` and ``output_bytes`` are empty/0 in ``op_start``."""

    op: str
    phase: str
    module: str
    step: int
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...] = ()
    output_bytes: int = 0
    time_ns: int = 0


class MemoryEvent(NamedTuple):
    """An allocation or a free seen by the allocator chokepoint (``engine.memory``)."""

    action: str  # "alloc" | "free"
    bytes: int
    device: str
    buffer_id: int
    category: str  # parameter | gradient | optimizer_state | activation | temporary | input
    op: str
    module: str
    phase: str
    step: int
    shape: tuple[int, ...]
    dtype: str
    time_ns: int


class OomEvent(NamedTuple):
    """An allocation the allocator refused; emitted before ``OutOfMemoryError`` is raised (it still is). The limit
    is None when NumPy itself could not allocate inside an op with no limit set."""

    requested_bytes: int
    allocated_bytes: int
    limit_bytes: int | None
    device: str
    op: str
    module: str
    phase: str
    step: int
    time_ns: int


class ModuleEvent(NamedTuple):
    """A ``Module.__call__`` entered (``module_begin``) or left (``module_end``); ``path`` is its dotted name."""

    path: str
    module_type: str
    step: int
    time_ns: int


class OptimizerEvent(NamedTuple):
    """Around the parameter updates of one ``optimizer.step()`` (before ``step_end``)."""

    optimizer: Any
    step: int
    time_ns: int


class StepEvent(NamedTuple):
    step: int
    time_ns: int
    duration_ns: int = 0  # step_end only: time since the matching step_begin


class DataWaitEvent(NamedTuple):
    step: int
    wait_ns: int
    time_ns: int


class CommEvent(NamedTuple):
    """One completed collective (``engine.distributed``): ``name`` is "allreduce" | "broadcast" | "all_gather" |
    "barrier"; ``bucket`` the DDP bucket index or -1; ``start_ns`` the clock at launch, ``end_ns`` when its completion
    was observed (``time.perf_counter_ns``)."""

    name: str
    bucket: int
    nbytes: int
    start_ns: int
    end_ns: int
    step: int


class CommWaitEvent(NamedTuple):
    """Once per DDP step: the optimizer side waited ``duration_ns`` for the outstanding gradient buckets."""

    step: int
    start_ns: int
    duration_ns: int
    nbytes: int
    buckets: int


class Recorder:
    """The recorder interface: the methods the engine calls, each optional. Subclass it and override what you need
    (the engine calls only overridden methods), or write any object with some of these methods. Op and allocator
    methods get plain arguments (they run per op and per allocation: no event object); the others get the events
    users' observers get. ``recorder_order`` (class attribute, default 0) orders the calls: lower first."""

    recorder_order = 0

    def op_begin(self, op: str, module: str, inputs: Any) -> None:
        """Before an op computes: its name (a backward op's is ``<Op>Backward``), the module it runs in and its input
        arrays (a backward op's: the gradient of its output). ``phase`` and ``current_step()`` are the op's."""

    def op(self, op: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        """After an op: ``outputs`` its result arrays (a backward op's: one input gradient per input, None where none
        is computed), ``output_bytes`` their size, ``start_ns`` the clock right before it computed. May raise a
        ``PropagatingError`` to stop the computation."""

    def call_begin(self, function: Any, inputs: tuple) -> None:
        """Before a forward op computes: the ``engine.op.Function`` instance (its constructor's attributes set, its
        ``forward`` not run yet) and its input Tensors. (``engine.function``'s tracer records graph nodes here.)"""

    def call(self, function: Any, inputs: tuple, result: Any) -> None:
        """After a forward op: the instance (its saved state set), its input Tensors and its result Tensor."""

    def backward_begin(self, output: Any, grad: Any, seed: Any, inputs: Any) -> None:
        """A backward walk begins from ``output`` (``grad``: what the caller passed, ``seed``: the gradient array it
        starts with); ``inputs`` is None for ``backward()``, the tensors asked for by ``engine.grad``."""

    def backward_node(self, function: Any, grad: Any, input_grads: tuple) -> None:
        """One node of the walk ran its backward: ``grad`` the gradient of its output, ``input_grads`` one array (or
        None) per input, in the order the walk uses them."""

    def gradient_sum(self, previous: Any, new: Any, total: Any, module: str) -> None:
        """The walk added two gradients of one value: ``total`` is ``previous + new`` (a new array)."""

    def leaf_grad(self, leaf: Any, array: Any, owned: bool) -> None:
        """``array``, a leaf's final gradient of this walk, is about to become (``leaf.grad`` is None: as it is when
        ``owned``, else a copy — ``engine.autograd``'s ownership rule) or be added to the leaf's ``.grad``."""

    def buffer_alloc(self, buffer_id: int, nbytes: int, device: str, category: str, op: str, shape: Any,
                     dtype: Any) -> None:
        """The allocator registered a new buffer (module, phase and step: the hooks' now)."""

    def buffer_free(self, buffer_id: int, nbytes: int, device: str, category: str, op: str) -> None:
        """The allocator freed a buffer (``op``: the one that allocated it)."""

    def buffer_history(self, record: tuple) -> None:
        """Per allocation and per free, one ``(time_ns, "alloc" | "free", bytes, op, step, device)`` tuple (a free's
        op: the one that allocated the buffer), the same object for every recorder. Meant to be a C callable such as
        a ``deque``'s bound ``append`` (``engine.memory_recording.HistoryRing``): no Python frame per allocation."""

    def allocation_site(self) -> Any:
        """What to keep as a new buffer's ``LiveBlock.site`` (only the first recorder that has this is asked)."""

    def at_peak(self, device: str, allocated_bytes: int) -> None:
        """The first free after a new step-peak high on ``device``: the buffers live now are the peak's."""

    def oom(self, event: OomEvent) -> None:
        """An allocation was refused; ``OutOfMemoryError`` is raised after this."""

    def step_begin(self, event: StepEvent) -> None: ...
    def step_end(self, event: StepEvent) -> None: ...
    def data_wait(self, event: DataWaitEvent) -> None: ...
    def module_begin(self, event: ModuleEvent) -> None: ...
    def module_end(self, event: ModuleEvent) -> None: ...

    def module_call(self, module: Any, args: tuple, output: Any) -> None:
        """A module's ``forward`` returned ``output`` for ``args`` (after ``module_end``, before its forward hooks)."""

    def optimizer_call(self, optimizer: Any, closure: Any) -> None:
        """``optimizer.step(closure)`` was called (before the closure runs and anything is updated)."""

    def zero_grad(self, optimizer: Any, set_to_none: bool) -> None:
        """``optimizer.zero_grad(set_to_none)`` was called (before any gradient is reset)."""

    def before_update(self, optimizer: Any) -> None:
        """``optimizer.step()`` is about to update parameters (after its closure, before ``optimizer_step_begin``):
        the last moment to change ``.grad`` (``engine.distributed``'s DDP waits for its gradient AllReduce here)."""

    def optimizer_step_begin(self, event: OptimizerEvent) -> None: ...
    def optimizer_step_end(self, event: OptimizerEvent) -> None: ...

    def communication(self, event: CommEvent) -> None:
        """A collective completed (from the training thread, before the step's ``optimizer_step_begin``)."""

    def comm_wait(self, event: CommWaitEvent) -> None:
        """DDP waited for its outstanding buckets before the optimizer step (training thread)."""
