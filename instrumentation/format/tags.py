"""The tag namespaces the instrumentation writes and the board reads (LOGFORMAT.md's table), each named once."""
from __future__ import annotations

import re

# Prefixes: `<prefix><param>`, `nonfinite/<param>/<stat>`, `act/<layer>/<stat>`, `perf/<name>`, `mem/<device>/<stat>`,
# `sys/<name>`.
GRAD = "grad/"  # histogram of a parameter's gradient
WEIGHT = "weight/"  # histogram of a parameter's values
GRAD_NORM = "grad_norm/"
UPDATE_RATIO = "update_ratio/"
NONFINITE = "nonfinite/"  # NaN/Inf counts of a parameter and its gradient, written at the steps where one is not 0
ACTIVATION = "act/"
PERF = "perf/"
MEMORY = "mem/"
SYSTEM = "sys/"
DIST = "dist/"  # data-parallel replicas (instrumentation/distributed)
PREFIXES = (GRAD, WEIGHT, GRAD_NORM, UPDATE_RATIO, NONFINITE, ACTIVATION, PERF, MEMORY, SYSTEM, DIST)

# act/<layer>/<stat>
MEAN_ABS, DEAD_FRACTION, SATURATED_FRACTION = "mean_abs", "dead_fraction", "saturated_fraction"
ACTIVATION_STATS = (MEAN_ABS, DEAD_FRACTION, SATURATED_FRACTION)

# nonfinite/<param>/<stat>: counts in the gradient and in the weights before the optimizer step
GRAD_NAN_COUNT, GRAD_INF_COUNT = "grad_nan_count", "grad_inf_count"
WEIGHT_NAN_COUNT, WEIGHT_INF_COUNT = "weight_nan_count", "weight_inf_count"
NONFINITE_STATS = (GRAD_NAN_COUNT, GRAD_INF_COUNT, WEIGHT_NAN_COUNT, WEIGHT_INF_COUNT)

# perf/<name>
STEP_TIME_MS, DATA_TIME_MS, SAMPLES_PER_SEC = PERF + "step_time_ms", PERF + "data_time_ms", PERF + "samples_per_sec"
# Data-parallel, per step of each rank (instrumentation/distributed/monitor.py): time with a collective in flight (the
# union of the step's collective intervals), time the optimizer side waited for outstanding buckets, bytes sent.
ALLREDUCE_MS, ALLREDUCE_WAIT_MS, COMM_BYTES = PERF + "allreduce_ms", PERF + "allreduce_wait_ms", PERF + "comm_bytes"
# ... and, outside the allreduce wait, the time the training thread was ready to run but waited for a CPU (cores
# shared with other processes); a rank's busy time is step_time - allreduce_wait - data_time - cpu_wait
CPU_WAIT_MS = PERF + "cpu_wait_ms"
RANK_STEP_TAGS = (STEP_TIME_MS, DATA_TIME_MS, ALLREDUCE_MS, ALLREDUCE_WAIT_MS, COMM_BYTES, CPU_WAIT_MS)  # a row
# dist/<name>: every checksum interval, a 24-bit checksum of all parameter bytes (an integer, exact as a float32)
PARAM_CHECKSUM = DIST + "param_checksum"
# perf/instrumentation_ms/<observer> (its measured cost per step), perf/instrumentation_share/<observer> (that cost over
# the step time without it) and perf/interval/<observer> (steps between two runs of its periodic work), written by the
# observers paced by an overhead budget (instrumentation/budget.py); the system sampler's "step" is its wake-up interval
INSTRUMENTATION_MS, INSTRUMENTATION_SHARE = PERF + "instrumentation_ms", PERF + "instrumentation_share"
INTERVAL = PERF + "interval"
PACE_STATS = (INSTRUMENTATION_MS, INSTRUMENTATION_SHARE, INTERVAL)
WATCH_OBSERVER, HISTOGRAMS_OBSERVER, MEMORY_OBSERVER, SYSTEM_OBSERVER = "watch", "watch_histograms", "memory", "system"
RANK_MONITOR_OBSERVER = "rank_monitor"  # its "interval": the straggler window (its own cost is every step's)

# mem/<device>/<stat>, and mem/<device>/<category>_bytes (memory_categories.CATEGORIES): each one's bytes at the step's
# peak.
ALLOCATED_BYTES, RESERVED_BYTES, PEAK_BYTES = "allocated_bytes", "reserved_bytes", "peak_bytes"
LIVE_TENSORS = "live_tensors"
MEMORY_STATS = (ALLOCATED_BYTES, RESERVED_BYTES, PEAK_BYTES, LIVE_TENSORS)
LIMIT_BYTES = "limit_bytes"  # mem/<device>/limit_bytes: the allocator's limit, logged when it changes (NaN: none)
HOST_DEVICE = "host"  # mem/host/rss_bytes: the process RSS, read with the engine's figures

# sys/<name> and sys/gpu<i>/<metric>
CPU_PERCENT, RSS_BYTES = "cpu_percent", "rss_bytes"
HOST_METRICS = (CPU_PERCENT, RSS_BYTES)
MEM_USED_BYTES, MEM_TOTAL_BYTES, PROCESS_MEM_BYTES = "mem_used_bytes", "mem_total_bytes", "process_mem_bytes"
UTIL_PERCENT, POWER_W, TEMPERATURE_C = "util_percent", "power_w", "temperature_c"
GPU_METRICS = (MEM_USED_BYTES, MEM_TOTAL_BYTES, PROCESS_MEM_BYTES, UTIL_PERCENT, POWER_W, TEMPERATURE_C)
RATE_METRICS = (CPU_PERCENT, UTIL_PERCENT, POWER_W)  # averaged over a step's samples; the others take the maximum
_GPU_TAG = re.compile(r"^" + re.escape(SYSTEM) + r"gpu(\d+)/(.+)$")


def activation_tag(layer: str, stat: str) -> str:
    return f"{ACTIVATION}{layer}/{stat}"


def nonfinite_tag(param: str, stat: str) -> str:
    return f"{NONFINITE}{param}/{stat}"


def memory_tag(device: str, stat: str) -> str:
    return f"{MEMORY}{device}/{stat}"


def category_tag(device: str, category: str) -> str:
    return memory_tag(device, f"{category}_bytes")


def memory_device(tag: str) -> str | None:
    """The device of a `mem/<device>/allocated_bytes` tag (the tag each device's timeline has), else None."""
    parts = tag.split("/")
    return parts[1] if len(parts) == 3 and tag.startswith(MEMORY) and parts[2] == ALLOCATED_BYTES else None


def system_tag(name: str) -> str:
    return SYSTEM + name


def gpu_tag(index: int, metric: str) -> str:
    return f"{SYSTEM}gpu{index}/{metric}"


def gpu_of(tag: str) -> tuple[int, str] | None:
    """(GPU index, metric) of a `sys/gpu<i>/<metric>` tag, else None."""
    match = _GPU_TAG.match(tag)
    return (int(match.group(1)), match.group(2)) if match else None


def pace_tag(stat: str, observer: str) -> str:
    """``<stat>/<observer>`` for a stat of PACE_STATS."""
    return f"{stat}/{observer}"


def paced_observer(tag: str) -> tuple[str, str] | None:
    """(stat of PACE_STATS, observer) of a ``perf/instrumentation_ms|instrumentation_share|interval/<observer>`` tag,
    else None."""
    for stat in PACE_STATS:
        if tag.startswith(stat + "/") and len(tag) > len(stat) + 1:
            return stat, tag[len(stat) + 1:]
    return None
