"""The engine's input pipeline: ``Dataset.from_tensor_slices(...)`` and chainable tf.data-style transformations."""
from __future__ import annotations

from engine.data.buffers import frame_site, stage_of
from engine.data.dataset import AUTOTUNE, INFINITE, Dataset
from engine.data.device import prefetch_to_device
from engine.data.iterator import DatasetIterator

__all__ = ["AUTOTUNE", "INFINITE", "Dataset", "DatasetIterator", "frame_site", "prefetch_to_device", "stage_of"]
