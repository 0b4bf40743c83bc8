"""Profile captures: Chrome-trace names, categories, arg keys, capture layout and the capture-request protocol."""
from __future__ import annotations

import gzip
import json
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from instrumentation.format.confined import open_regular, write_atomic
from instrumentation.format.gcpause import gc_paused

try:  # NOTE: orjson parses a 1M-event trace ~1.5x faster than json (bench/profiler_overhead.py); optional.
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _orjson = None

PROFILE_RELDIR = os.path.join("plugins", "profile")
TRACE_SUFFIX = ".trace.json.gz"
TORCH_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
FORMAT_VERSION = 1

# Event categories (`cat`) written by flowscope.
CAT_OP = "op"            # one host op execution
CAT_KERNEL = "kernel"    # device side (one tid per stream)
CAT_STEP = "step"        # one training step, name "step <n>"
CAT_MODULE = "module"    # one Module.__call__, name = dotted path ("" is the model itself: "<model>")
CAT_DATA = "data"        # waiting for input
CAT_OPTIMIZER = "optimizer"
CAT_LOG = "log"          # time spent in the instrumentation itself
CAT_USER = "user"        # instrumentation.span("name")
CAT_COMM = "comm"        # one collective (name "allreduce", "broadcast", "all_gather", "barrier") on the comm lane
CAT_COMM_WAIT = "comm_wait"  # the optimizer side waiting for outstanding gradient buckets (training thread)
COUNTER_MEMORY = "memory"  # "ph": "C" events, args {"<device>.allocated": bytes, "<device>.reserved": bytes}
SPAN_CATEGORIES = (CAT_STEP, CAT_MODULE, CAT_DATA, CAT_OPTIMIZER, CAT_LOG, CAT_USER, CAT_COMM, CAT_COMM_WAIT)
PHASES = ("forward", "backward", "optimizer", "data")  # "data": torch ops run by the DataLoader (input, not forward)

# `args` keys of op events.
ARG_STEP, ARG_MODULE, ARG_PHASE = "step", "module", "phase"
ARG_SHAPES, ARG_DTYPE, ARG_BYTES, ARG_FLOPS = "shapes", "dtype", "bytes", "flops"
ARG_NODE = "node"  # ops replayed by engine.function: the graph node id (plugins/graph/ files)
ARG_STACK = "stack"  # with_stack=True: ["file:line function", ...], innermost first
ARG_BUCKET = "bucket"  # comm events: the DDP bucket index (-1: not a bucket's); ARG_BYTES: bytes communicated
ARG_BUCKETS = "buckets"  # comm_wait spans: the buckets waited for

# Thread ids: ops and spans of the training thread share one tid; collectives have their own lane (thread name
# COMM_LANE_NAME), so their overlap with backward shows; counters have none.
TID_HOST = 1
TID_COMM = 2
COMM_LANE_NAME = "communication"

_CAPTURE_ID = re.compile(r"\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}(_\d+)?")


def format_shapes(shapes: tuple[tuple[int, ...], ...]) -> str:
    """Input shapes as one string, e.g. ``"64x784;10x784;10"`` (``()`` for a 0-d input): cheap to parse."""
    return ";".join("x".join(map(str, shape)) if shape else "()" for shape in shapes)


def parse_shapes(text: str) -> tuple[tuple[int, ...], ...]:
    if not text:
        return ()
    return tuple(() if part == "()" else tuple(int(n) for n in part.split("x")) for part in text.split(";"))


# --- capture layout ------------------------------------------------------------------------------------------

def is_capture_id(name: str) -> bool:
    return _CAPTURE_ID.fullmatch(name) is not None


def new_capture_dir(run_dir: str | os.PathLike[str], wall_time_s: float | None = None) -> str:
    """Create and return ``<run>/plugins/profile/<capture_id>``; the id is a UTC ``YYYY_MM_DD_HH_MM_SS``
    timestamp, with ``_<n>`` appended when that second already has a capture."""
    base = os.path.join(os.fspath(run_dir), PROFILE_RELDIR)
    os.makedirs(base, exist_ok=True)
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(time.time() if wall_time_s is None else wall_time_s))
    for n in range(10_000):
        path = os.path.join(base, stamp if n == 0 else f"{stamp}_{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"no free capture id for {stamp} under {base}")


def trace_file_name(host: str | None = None, pid: int | None = None) -> str:
    """``<host>.<pid>.trace.json.gz``, one file per process of a capture."""
    return f"{host or socket.gethostname()}.{os.getpid() if pid is None else pid}{TRACE_SUFFIX}"


def is_trace_file(name: str) -> bool:
    """A flowscope capture file or a torch.profiler export (``*.pt.trace.json[.gz]``)."""
    base = os.path.basename(name)
    return base.endswith(TRACE_SUFFIX) or base.endswith(TORCH_TRACE_SUFFIXES)


def encode_trace(trace: dict[str, Any]) -> bytes:
    """``trace`` as the bytes of a trace file (gzip JSON)."""
    return gzip.compress(_dumps(trace), compresslevel=1)


def write_trace(path: str | os.PathLike[str], trace: dict[str, Any] | bytes) -> int:
    """Write ``trace`` (or its ``encode_trace`` bytes) atomically (a reader never sees half a file); returns the
    bytes written."""
    path = os.fspath(path)
    data = trace if isinstance(trace, bytes) else encode_trace(trace)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
    return len(data)


def read_trace(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A Chrome trace (gzip or plain JSON, object or bare event list) as ``{"traceEvents": [...], ...}``.

    Only a regular file is read; with ``root``, only one not reached through a link leading outside ``root``."""
    path = os.fspath(path)
    with open_regular(path, root) as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        with gc_paused():
            loaded = _orjson.loads(data) if _orjson is not None else json.loads(data)
    except ValueError as error:
        raise ValueError(f"{path} is not a Chrome trace (invalid JSON: {error})") from None
    if isinstance(loaded, list):
        return {"traceEvents": loaded}
    if not isinstance(loaded, dict) or not isinstance(loaded.get("traceEvents", []), list):
        raise ValueError(f"{path} is not a Chrome trace (expected an object with a 'traceEvents' list)")
    return loaded


def _dumps(trace: dict[str, Any]) -> bytes:
    if _orjson is not None:
        return _orjson.dumps(trace)
    return json.dumps(trace, separators=(",", ":")).encode()


# --- capture requests: the board asks a running training process for a capture --------------------------------

CAPTURE_REQUEST_NAME = "capture_request.json"        # written by the board (pending)
CAPTURE_RUNNING_NAME = "capture_request.running.json"  # the training process took it
CAPTURE_DONE_NAME = "capture_request.done.json"        # the outcome, with the capture id
MAX_REQUEST_STEPS = 1000


@dataclass(frozen=True, slots=True)
class CaptureRequest:
    """``{"version", "request_id", "steps", "requested_at"}``: record ``steps`` training steps."""

    request_id: str
    steps: int
    requested_at: float

    def to_json(self) -> str:
        return json.dumps({"version": FORMAT_VERSION, "request_id": self.request_id, "steps": self.steps,
                           "requested_at": self.requested_at})

    @classmethod
    def from_json(cls, text: str | bytes) -> CaptureRequest:
        record = json.loads(text)
        steps = record.get("steps")
        if not isinstance(steps, int) or not 1 <= steps <= MAX_REQUEST_STEPS:
            raise ValueError(f"capture request: 'steps' must be an integer in 1..{MAX_REQUEST_STEPS}, got {steps!r}")
        return cls(str(record.get("request_id", "")), steps, float(record.get("requested_at", 0.0)))


@dataclass(frozen=True, slots=True)
class CaptureStatus:
    """Where a run's latest request stands: ``none``, ``pending``, ``running``, ``done`` or ``failed``."""

    state: str
    request_id: str = ""
    steps: int = 0
    capture_id: str = ""
    message: str = ""


def request_path(run_dir: str | os.PathLike[str], name: str = CAPTURE_REQUEST_NAME) -> str:
    return os.path.join(os.fspath(run_dir), PROFILE_RELDIR, name)


def write_capture_request(run_dir: str | os.PathLike[str], steps: int,
                          root: str | os.PathLike[str] | None = None) -> CaptureRequest:
    """Ask the training process writing ``run_dir`` (an existing directory) to record ``steps`` steps.

    Writes only ``<run>/plugins/profile/capture_request.json`` (through a temporary file in the same folder,
    renamed into place), creating ``plugins/profile`` when missing. Nothing is written through a link that leads
    outside ``root`` (default: ``run_dir``), and a link at the request's own name is replaced, not followed."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"capture request: run directory {run_dir} does not exist")
    if not isinstance(steps, int) or not 1 <= steps <= MAX_REQUEST_STEPS:
        raise ValueError(f"capture request: steps must be an integer in 1..{MAX_REQUEST_STEPS}, got {steps!r}")
    request = CaptureRequest(uuid.uuid4().hex, steps, time.time())
    write_atomic(request_path(run_dir), request.to_json().encode(), run_dir if root is None else root)
    return request


def write_capture_outcome(run_dir: str | os.PathLike[str], request: CaptureRequest, capture_id: str,
                          message: str = "") -> None:
    """The training side's answer: ``done`` with the capture id, or ``failed`` (no capture id) with a message."""
    record = {"version": FORMAT_VERSION, "request_id": request.request_id, "steps": request.steps,
              "state": "done" if capture_id else "failed", "capture_id": capture_id, "message": message,
              "finished_at": time.time()}
    path = request_path(run_dir, CAPTURE_DONE_NAME)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(temporary, path)


def read_capture_status(run_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> CaptureStatus:
    """The newest of pending / running / finished for ``run_dir``; unreadable files count as absent (as do files
    that are not regular, or with ``root`` are reached through a link leading outside it)."""
    for name, state in ((CAPTURE_REQUEST_NAME, "pending"), (CAPTURE_RUNNING_NAME, "running")):
        try:
            with open_regular(request_path(run_dir, name), root) as handle:
                request = CaptureRequest.from_json(handle.read())
            return CaptureStatus(state, request.request_id, request.steps)
        except (OSError, ValueError):
            continue
    try:
        with open_regular(request_path(run_dir, CAPTURE_DONE_NAME), root) as handle:
            record = json.load(handle)
        return CaptureStatus(str(record.get("state", "done")), str(record.get("request_id", "")),
                             int(record.get("steps", 0)), str(record.get("capture_id", "")),
                             str(record.get("message", "")))
    except (OSError, ValueError, TypeError, AttributeError):
        return CaptureStatus("none")
