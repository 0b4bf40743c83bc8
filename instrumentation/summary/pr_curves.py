"""Precision-recall curves in the pr_curves plugin's form: a (6, thresholds) float tensor, TensorBoard's arithmetic."""
from __future__ import annotations

from typing import Any

import numpy as np

from instrumentation.format import metadata, protos
from instrumentation.summary.inputs import to_numpy

MINIMUM_COUNT = 1e-7  # keeps precision and recall finite where nothing was counted (TensorBoard's constant)


def _real(tag: str, name: str, values: Any) -> np.ndarray:
    try:
        array = to_numpy(values)
    except Exception as error:
        raise ValueError(f"add_pr_curve({tag!r}): {name} is not an array ({error})") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"add_pr_curve({tag!r}): {name} must be real numbers, got dtype {array.dtype}")
    return np.array(array, dtype=np.float64, copy=True).reshape(-1)


def checked_inputs(tag: str, labels: Any, predictions: Any, num_thresholds: Any,
                   weights: Any) -> tuple[np.ndarray, np.ndarray, int, np.ndarray | float]:
    """Copies of the inputs; ValueError naming the tag for anything TensorBoard could not draw."""
    label_array, prediction_array = _real(tag, "labels", labels), _real(tag, "predictions", predictions)
    if label_array.size != prediction_array.size or label_array.size == 0:
        raise ValueError(f"add_pr_curve({tag!r}): {label_array.size} labels for {prediction_array.size} predictions "
                         "(need as many, and at least one)")
    if not np.all(np.isfinite(prediction_array)) or prediction_array.min() < 0 or prediction_array.max() > 1:
        raise ValueError(f"add_pr_curve({tag!r}): predictions must lie in [0, 1]")
    if not isinstance(num_thresholds, (int, np.integer)) or isinstance(num_thresholds, bool) or num_thresholds < 2:
        raise ValueError(f"add_pr_curve({tag!r}): num_thresholds must be an int >= 2, got {num_thresholds!r}")
    weight_values: np.ndarray | float = 1.0
    if weights is not None:
        weight_values = _real(tag, "weights", weights)
        if weight_values.size not in (1, label_array.size):
            raise ValueError(f"add_pr_curve({tag!r}): {weight_values.size} weights for {label_array.size} labels")
    return label_array, prediction_array, min(int(num_thresholds), metadata.MAX_PR_THRESHOLDS), weight_values


def compute_curve(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                  weights: np.ndarray | float = 1.0) -> np.ndarray:
    """Rows TP, FP, TN, FN, precision, recall at thresholds i / (num_thresholds - 1)."""
    bucket_indices = np.floor(predictions * (num_thresholds - 1)).astype(np.int32)
    bounds = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=bounds, weights=labels * weights)
    fp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=bounds, weights=(1.0 - labels) * weights)
    true_positives = np.cumsum(tp_buckets[::-1])[::-1]
    false_positives = np.cumsum(fp_buckets[::-1])[::-1]
    true_negatives = false_positives[0] - false_positives
    false_negatives = true_positives[0] - true_positives
    precision = true_positives / np.maximum(MINIMUM_COUNT, true_positives + false_positives)
    recall = true_positives / np.maximum(MINIMUM_COUNT, true_positives + false_negatives)
    return np.stack((true_positives, false_positives, true_negatives, false_negatives, precision, recall))


def pr_curve_value(tag: str, labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                   weights: np.ndarray | float) -> Any:
    data = compute_curve(labels, predictions, num_thresholds, weights).astype(np.float32)
    content = protos.PrCurvePluginData(version=metadata.PR_CURVES_DATA_VERSION,
                                       num_thresholds=num_thresholds).SerializeToString()
    plugin = protos.SummaryMetadata(plugin_data=protos.SummaryMetadata.PluginData(
        plugin_name=metadata.PR_CURVES_PLUGIN, content=content))
    tensor = protos.TensorProto(dtype=1, tensor_content=data.astype("<f4").tobytes(),  # DT_FLOAT
                                tensor_shape=protos.TensorShapeProto(dim=[protos.TensorShapeProto.Dim(size=size)
                                                                          for size in data.shape]))
    return protos.Summary.Value(tag=tag, metadata=plugin, tensor=tensor)
