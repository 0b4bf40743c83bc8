"""Alert kinds and the evidence keys the board reads (LOGFORMAT.md's Alerts), each named once for both sides."""
from __future__ import annotations

# Kinds (an Alert's ``kind``; other kinds are allowed and shown as they are).
NONFINITE = "nonfinite"  # the first op that produced NaN/Inf
EXPLODING_GRADIENT = "exploding_gradient"
VANISHING_GRADIENT = "vanishing_gradient"
DEAD_UNITS = "dead_units"
LOSS_SPIKE = "loss_spike"
LEAK = "leak"
OOM = "oom"
FRAGMENTATION = "fragmentation"
INPUT_BOUND = "input_bound"
STRAGGLER = "straggler"  # a rank busier than the others (its subject: "rank<k>")
REPLICA_DIVERGENCE = "replica_divergence"  # a rank whose parameters differ from rank 0's (subject: "rank<k>")
KINDS = (NONFINITE, EXPLODING_GRADIENT, VANISHING_GRADIENT, DEAD_UNITS, LOSS_SPIKE, LEAK, OOM, FRAGMENTATION,
         INPUT_BOUND, STRAGGLER, REPLICA_DIVERGENCE)
DISTRIBUTED_KINDS = (STRAGGLER, REPLICA_DIVERGENCE)  # written by the rank monitor into the concerned rank's run
MEMORY_KINDS = (OOM, LEAK, FRAGMENTATION)  # their evidence is shown on the Memory page

# Evidence keys of memory alerts.
SNAPSHOT = "snapshot"  # capture id of the memory snapshot written with the alert (oom, leak)
DEVICE = "device"  # the allocator's device ("cpu", "cuda:0") or "host" (a leak of the process RSS)
STEPS = "steps"  # leak: the steps of the window the trend was found in
LIVE_BYTES = "live_bytes"  # leak on a device: live bytes at those steps (also a leak group's live bytes now)
RSS_BYTES = "rss_bytes"  # leak of the host: process RSS at those steps
BYTES_PER_STEP = "bytes_per_step"  # leak: the growth (also a leak group's)
GROUPS = "groups"  # leak: the block groups that accumulate, each a dict with the keys below

# Keys of one leak group.
SITE = "site"  # the innermost user frame, "file:line function"
STACK = "stack"
OP = "op"
MODULE = "module"
SHAPE = "shape"
DTYPE = "dtype"
CATEGORY = "category"  # one of memory_categories.CATEGORIES
COUNT_PER_STEP = "count_per_step"
LIVE_COUNT = "live_count"

# Evidence keys of a fragmentation alert (a pooled device allocator: instrumentation/memory/fragmentation.py).
FRAGMENTATION_BYTES = "fragmentation_bytes"  # free bytes the pool holds in chunks too small for the request size
FRAGMENTATION_SHARE = "fragmentation_share"  # fragmentation_bytes / reserved_bytes
RESERVED_BYTES = "reserved_bytes"
ALLOCATED_BYTES = "allocated_bytes"
REQUEST_BYTES = "request_bytes"  # the request size fragmentation was measured against (the last request's)
LARGEST_FREE_BLOCK = "largest_free_block"
THRESHOLD = "threshold"  # the share above which the alert fires
# Evidence keys of a nonfinite alert (instrumentation/dynamics/numerics.py) beside OP and MODULE: the phase the op ran
# in, and the per-tensor statistics of its inputs and outputs.
PHASE = "phase"
INPUTS, OUTPUTS = "inputs", "outputs"
FIRST_STEP, LAST_STEP = "first_step", "last_step"  # input_bound: the window of steps that waited for input

# Evidence keys of a straggler alert (instrumentation/distributed/straggler.py): the window's first and last step, the
# rank's median busy time (step time - allreduce wait - data wait - CPU wait) over the window, the median over the
# window of the other ranks' median busy time at each step, their ratio, the margin and the steps needed, and the steps
# over it.
RANK = "rank"
WORLD_SIZE = "world_size"
WINDOW_STEPS = "window_steps"  # [first, last]
BUSY_MS = "busy_ms"
OTHERS_BUSY_MS = "others_busy_ms"
RATIO = "ratio"
MARGIN = "margin"
MIN_STEPS = "min_steps"
STEPS_OVER = "steps_over"

# Evidence keys of a replica_divergence alert (instrumentation/distributed/checksum.py): the parameters whose bytes
# differ from the reference rank's, this rank's and the reference's 24-bit checksums of all parameters, and per
# differing parameter the two crc32s ({name: [this rank's, the reference's]}).
PARAMETERS = "parameters"
CHECKSUM = "checksum"
REFERENCE_CHECKSUM = "reference_checksum"
REFERENCE_RANK = "reference_rank"
PARAMETER_CHECKSUMS = "parameter_checksums"
