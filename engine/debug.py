"""``FLOWSCOPE_DEBUG``: a built-in recorder that checks every op's output (and prints it at level 2).

``sync()`` puts ``NonFiniteCheck`` in the recorder list while ``config.DEBUG`` is set and takes it out when it is not;
``engine`` calls it at import and ``config.override`` after each change. It sees what every recorder sees — forward
ops, backward nodes (their input gradients) and replayed graph nodes — and stops the computation with a
``NonFiniteError`` (a ``FloatingPointError``) at the first NaN/Inf.
"""
from __future__ import annotations

from typing import Any

from engine import config as _config
from engine import hooks as _hooks
from engine.backend import get_array_module
from engine.errors import NonFiniteError


class NonFiniteCheck(_hooks.Recorder):
    recorder_order = 1  # after the other recorders: they see the op that produced the NaN/Inf

    def op(self, op: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        if _config.DEBUG >= 2:
            shapes = [(getattr(o, "shape", ()), str(getattr(o, "dtype", ""))) for o in outputs if o is not None]
            print(f"engine: {op} -> {shapes[0] if len(shapes) == 1 else shapes}")
        for out in outputs:
            if getattr(out, "dtype", None) is not None and out.dtype.kind in "fc" and not _isfinite_all(out):
                raise NonFiniteError(f"op '{op}' in module '{module}' produced NaN/Inf (FLOWSCOPE_DEBUG=1 checks "
                                     "every op output)", op=op, module=module, phase=_hooks.phase,
                                     step=_hooks.current_step())


def _isfinite_all(out: Any) -> bool:
    return bool(get_array_module(out).isfinite(out).all())  # one device-to-host read on a GPU


_check = NonFiniteCheck()


def sync() -> None:
    """The check attached exactly while ``config.DEBUG`` is set."""
    if _config.DEBUG:
        _hooks.add_recorder(_check)
    else:
        _hooks.remove_recorder(_check)
