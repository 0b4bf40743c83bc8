"""Module.summary(): a printable table of a model's layers, output shapes and parameter counts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.op import no_grad
from engine.backend import to_device
from engine.tensor import Tensor

if TYPE_CHECKING:
    from engine.nn.module import Module


def _shape_of(output: Any) -> str:
    if isinstance(output, Tensor):
        return str(list(output.shape))
    if isinstance(output, (tuple, list)):
        return ", ".join(_shape_of(o) for o in output)
    return type(output).__name__


def _output_shapes(model: Module, input_shape: tuple[int, ...], dtype: Any) -> dict[int, str]:
    """Run one forward pass (eval mode, no graph) on zeros and record each module's output shape."""
    shapes: dict[int, str] = {}
    handles = [m.register_forward_hook(lambda mod, args, out: shapes.__setitem__(id(mod), _shape_of(out)))
               for m in model.modules()]
    modes = {id(m): m.training for m in model.modules()}
    first = next(iter(model.parameters()), None)
    if dtype is None:
        dtype = np.float32 if first is None else first.dtype
    device = "cpu" if first is None else first.device  # the zeros go where the model is
    try:
        model.eval()
        with no_grad():
            zeros = to_device(np.zeros(tuple(input_shape), dtype=dtype), device)
            model(Tensor._wrap_array(zeros, "input", "summary"))
    finally:
        for handle in handles:
            handle.remove()
        for m in model.modules():
            m.__dict__["training"] = modes[id(m)]
    return shapes


def summarize(model: Module, input_shape: tuple[int, ...] | None, dtype: Any = None) -> str:
    shapes = _output_shapes(model, input_shape, dtype) if input_shape is not None else {}
    rows = []
    for path, module in model.named_modules():
        count = sum(p.size for p in module.parameters(recurse=False))
        name = "  " * path.count(".") + path if path else "(root)"
        row = [name, type(module).__name__]
        if input_shape is not None:
            row.append(shapes.get(id(module), "-"))
        rows.append(row + [f"{count:,}"])
    header = ["Layer", "Type"] + (["Output shape"] if input_shape is not None else []) + ["Params"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.rjust(w) if i == len(cells) - 1 else c.ljust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    rule = "-" * len(line(header))
    params = list(model.parameters())
    total = sum(p.size for p in params)
    trainable = sum(p.size for p in params if p.requires_grad)
    nbytes = sum(p._data.nbytes for p in params) + sum(b._data.nbytes for b in model.buffers())
    out = [line(header), rule] + [line(r) for r in rows] + [rule]
    out += [f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", f"Parameter and buffer memory: {nbytes / 2**20:.2f} MiB"]
    if input_shape is not None:
        out.insert(0, f"Input shape: {list(input_shape)}")
    return "\n".join(out)
