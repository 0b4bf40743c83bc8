"""The names both sides of the event-file contract agree on: file names, version string, plugin names, tags."""
from __future__ import annotations

import os
import re
import socket
import time

FILE_VERSION = "brain.Event:2"
EVENT_FILE_PREFIX = "events.out.tfevents."
_EVENT_FILE_NAME = re.compile(r"events\.out\.tfevents\.")

# SummaryMetadata.plugin_data.plugin_name values.
SCALARS_PLUGIN = "scalars"
HISTOGRAMS_PLUGIN = "histograms"
TEXT_PLUGIN = "text"
HPARAMS_PLUGIN = "hparams"
IMAGES_PLUGIN = "images"
AUDIO_PLUGIN = "audio"
PR_CURVES_PLUGIN = "pr_curves"
GRAPHS_PLUGIN = "graphs"
PROJECTOR_PLUGIN = "projector"

# Tags under which the reader files run-level data that TensorBoard keeps outside summaries (Event.graph_def...).
GRAPH_TAG = "__graph__"
META_GRAPH_TAG = "__meta_graph__"
RUN_METADATA_TAG_PREFIX = "__run_metadata__/"
PROJECTOR_CONFIG_FILE = "projector_config.pbtxt"  # the projector's data is kept beside the event files
PR_CURVE_ROWS = ("true_positives", "false_positives", "true_negatives", "false_negatives", "precision", "recall")
PR_CURVES_DATA_VERSION = 0
MAX_PR_THRESHOLDS = 127  # torch's limit (larger counts were reported to break its protobuf)

# HParams plugin tags and content version (tensorboard/plugins/hparams/metadata.py).
HPARAMS_EXPERIMENT_TAG = "_hparams_/experiment"
HPARAMS_SESSION_START_TAG = "_hparams_/session_start_info"
HPARAMS_SESSION_END_TAG = "_hparams_/session_end_info"
HPARAMS_DATA_VERSION = 0

TEXT_TAG_SUFFIX = "/text_summary"  # torch and tensorboardX append it to text tags


def is_event_file(name: str) -> bool:
    """True for an event file's name or path (`events.out.tfevents.*`), as used for run discovery."""
    return _EVENT_FILE_NAME.match(os.path.basename(name)) is not None


def event_file_name(sequence_number: int, suffix: str = "", *, wall_time_s: float | None = None) -> str:
    """`events.out.tfevents.<unix_ts>.<host>.<pid>.<n><suffix>`, the name TensorBoard and torch use."""
    wall_time_s = time.time() if wall_time_s is None else wall_time_s
    return f"{EVENT_FILE_PREFIX}{int(wall_time_s):010d}.{socket.gethostname()}.{os.getpid()}.{sequence_number}{suffix}"
