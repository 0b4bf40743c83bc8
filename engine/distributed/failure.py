"""A rank failure is not a hang: an uncaught exception on one rank aborts the whole MPI job, after every rank ran
its ``at_abort`` callables (instrumentation flushes its event files there).

``install`` (called by ``init()``) sets ``sys.excepthook`` and ``threading.excepthook`` and starts one listener
thread per rank on a communicator of its own, polling a receive for an abort notice. The failing rank prints its
error (every line prefixed ``[rank k]``), runs its callables, sends the notice to every other rank, waits at most
``ACK_TIMEOUT_S`` for their acknowledgements (each listener runs its rank's callables, then acknowledges) and calls
``MPI.COMM_WORLD.Abort(1)``: mpiexec ends every process and exits nonzero.
"""
from __future__ import annotations

import atexit
import sys
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np

ACK_TIMEOUT_S = 5.0
POLL_S = 0.02
_ABORT_TAG, _ACK_TAG = 30_517, 30_518
_ABORT, _STOP = 1, 0  # the notice's value: another rank failed / this rank is exiting normally

_callbacks: list[Callable[[], Any]] = []
_ran = threading.Lock()  # held once the callables ran (they run once per process)
_state: dict[str, Any] = {}


def at_abort(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Have ``fn()`` run on this rank before the job is aborted because some rank failed; returns ``fn``."""
    if not callable(fn):
        raise TypeError(f"at_abort takes a callable, got {type(fn).__name__}")
    _callbacks.append(fn)
    return fn


def run_callbacks(rank: int) -> None:
    """Run the ``at_abort`` callables (once per process); one that raises is reported and the others still run."""
    if not _ran.acquire(blocking=False):
        return
    for fn in tuple(_callbacks):
        try:
            fn()
        except BaseException as error:  # noqa: BLE001 - the job is going down; the others must still flush
            _say(rank, f"at_abort callable {getattr(fn, '__qualname__', fn)!r} failed: {type(error).__name__}: "
                       f"{error}")


def _say(rank: int, text: str) -> None:
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip("\n").split("\n")))
    sys.stderr.flush()


def install(group: Any) -> None:
    """Set the excepthooks and start this rank's abort listener (collective: every rank calls it in ``init()``)."""
    comm = group.MPI.COMM_WORLD.Dup()
    _state.update(mpi=group.MPI, comm=comm, rank=group.rank, size=group.size)
    listener = threading.Thread(target=_listen, args=(comm, group.MPI, group.rank), name="engine-abort-listener",
                                daemon=True)
    _state["listener"] = listener
    listener.start()
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook
    atexit.register(_stop_listener)


def _listen(comm: Any, mpi: Any, rank: int) -> None:
    notice = np.zeros(1, dtype=np.int64)
    request = comm.Irecv(notice, source=mpi.ANY_SOURCE, tag=_ABORT_TAG)
    status = mpi.Status()
    while not request.Test(status):
        time.sleep(POLL_S)
    if notice[0] == _STOP:
        return
    source = status.Get_source()
    _say(rank, f"rank {source} failed: running this rank's at_abort callables before the job is aborted")
    run_callbacks(rank)
    comm.Send(np.ones(1, dtype=np.int64), dest=source, tag=_ACK_TAG)


def _stop_listener() -> None:
    """At a normal exit (before MPI is finalised): wake the listener with a stop notice to itself and join it."""
    listener = _state.get("listener")
    if listener is None or not listener.is_alive() or "aborting" in _state:
        return
    request = _state["comm"].Isend(np.array([_STOP], dtype=np.int64), dest=_state["rank"], tag=_ABORT_TAG)
    listener.join(timeout=10)
    if not listener.is_alive():
        request.Wait()


def _excepthook(exc_type: type, exc: BaseException, tb: Any) -> None:
    abort_job("".join(traceback.format_exception(exc_type, exc, tb)))


def _thread_excepthook(args: Any) -> None:
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread is not None else "?"
    abort_job(f"in thread {thread}:\n" + "".join(traceback.format_exception(args.exc_type, args.exc_value,
                                                                            args.exc_traceback)))


def abort_job(error_text: str) -> None:
    """Print ``error_text`` for this rank, run every rank's at_abort callables (acknowledged, at most
    ``ACK_TIMEOUT_S``), then abort the MPI job with exit code 1."""
    rank, size, comm, mpi = _state["rank"], _state["size"], _state["comm"], _state["mpi"]
    _state["aborting"] = True
    _say(rank, error_text)
    run_callbacks(rank)
    others = [r for r in range(size) if r != rank]
    notice = np.array([_ABORT], dtype=np.int64)
    sends = [comm.Isend(notice, dest=r, tag=_ABORT_TAG) for r in others]
    acks = {r: np.zeros(1, dtype=np.int64) for r in others}
    pending = {r: comm.Irecv(acks[r], source=r, tag=_ACK_TAG) for r in others}
    deadline = time.monotonic() + ACK_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        for r, request in tuple(pending.items()):
            if request.Test():
                del pending[r]
        time.sleep(POLL_S)
    acknowledged = (f"no acknowledgement from ranks {sorted(pending)} within {ACK_TIMEOUT_S:g} s" if pending
                    else "every rank ran its at_abort callables")
    _say(rank, f"aborting the MPI job ({acknowledged})")
    del sends
    mpi.COMM_WORLD.Abort(1)
