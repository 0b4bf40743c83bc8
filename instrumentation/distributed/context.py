"""Where this process stands in a data-parallel job: ``engine.distributed`` when it is initialised, its rank's run
directory, and flushes registered to run before the job is aborted."""
from __future__ import annotations

import os
import weakref
from typing import Any, Callable

import engine
from instrumentation.format.ranks import rank_name


def initialized() -> Any:
    """The ``engine.distributed`` module when ``init()`` was called in this process, else None (no such module, or a
    single process)."""
    module = getattr(engine, "distributed", None)
    try:
        return module if module is not None and module.is_initialized() else None
    except Exception:  # noqa: BLE001 - an engine without a working distributed layer: a single process
        return None


def rank_and_world_size() -> tuple[int, int]:
    """(rank, world size): (0, 1) when distributed is not initialised."""
    module = initialized()
    return (int(module.rank()), int(module.world_size())) if module is not None else (0, 1)


def rank_logdir(run_dir: str | os.PathLike[str]) -> str:
    """``<run_dir>/rank<k>`` in a data-parallel job of more than one rank (``engine.distributed`` initialised), else
    ``run_dir``: pass it to ``SummaryWriter`` so that each rank writes its own run, grouped by the board."""
    run_dir = os.fspath(run_dir)
    rank, world_size = rank_and_world_size()
    return os.path.join(run_dir, rank_name(rank)) if world_size > 1 else run_dir


def flush_at_abort(method: Callable[[], Any]) -> bool:
    """Have ``engine.distributed.at_abort`` call the bound ``method`` (a writer's ``flush``, a profiler's ``save``)
    before the job is aborted, if distributed is initialised; True when registered. The registration holds the object
    weakly: an object collected meanwhile is skipped, and registering does not keep it alive."""
    module = initialized()
    if module is None or not callable(getattr(module, "at_abort", None)):
        return False
    reference = weakref.WeakMethod(method)

    def flush() -> None:
        bound = reference()
        if bound is not None:
            bound()

    module.at_abort(flush)
    return True
