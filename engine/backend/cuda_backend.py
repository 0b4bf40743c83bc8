"""Optional CuPy backend, imported under a guard; the import error is kept for when a GPU is asked for."""
from __future__ import annotations

from typing import Any

cupy: Any = None
import_error: Exception | None = None
try:  # pragma: no cover - depends on the machine
    import cupy  # type: ignore[no-redef]
except Exception as error:  # noqa: BLE001 - any failure means "no GPU backend"
    cupy = None
    import_error = error


def require_cupy() -> Any:
    """Return the cupy module or raise a clear error saying why the CUDA backend is unavailable."""
    if cupy is None:
        raise RuntimeError(f"the CUDA backend needs CuPy (pip install 'flowscope[cuda]'): {import_error}")
    return cupy
