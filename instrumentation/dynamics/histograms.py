"""Histograms bucketed on the calling thread and handed to the writer as buckets (``add_histogram_raw``).

``SummaryWriter.add_histogram`` buckets on the writer's thread: cheap for the caller, but a pacer timing the caller
then sees a copy, not the sort and bucket search that follow (on the digits MLP watch()'s histograms cost ~8 % of
step time while its histogram pacer saw a fraction of it). watch() buckets here, where its pacer times the work,
and the writer only encodes the buckets; the event is the one ``add_histogram`` writes (TensorFlow's buckets)."""
from __future__ import annotations

from typing import Any

from instrumentation.summary.bucketing import histogram_from_values
from instrumentation.summary.inputs import histogram_values


def write_histogram(writer: Any, tag: str, values: Any, step: int) -> None:
    """``writer.add_histogram(tag, values, step)``, bucketed now (a writer without ``add_histogram_raw``: as is)."""
    add_raw = getattr(writer, "add_histogram_raw", None)
    if add_raw is None:
        writer.add_histogram(tag, values, step)
        return
    data = histogram_from_values(histogram_values(tag, values), may_reorder=True)  # NOTE: a private copy, sorted
    add_raw(tag, data.minimum, data.maximum, data.num, data.sum, data.sum_squares, data.edges[1:], data.counts, step)
