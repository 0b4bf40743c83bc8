"""Series as JSON-ready dicts and CSV text (every point; non-finite values spelled out)."""
from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import orjson

from board.data.histograms import HistogramPoint
from board.data.series import ScalarColumns

CSV_HEADER = "run,tag,step,wall_time,value\n"


def json_float(value: float) -> float | str:
    """A finite number as it is; NaN/±Inf as the strings "NaN", "Infinity", "-Infinity" (strict JSON has no such
    numbers)."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def json_floats(values: np.ndarray) -> list[float | str]:
    """`json_float` of every value."""
    listed = values.tolist()
    if np.isfinite(values).all():
        return listed
    return [json_float(v) for v in listed]


def strict_json_value(value: Any) -> Any:
    """`value` with every non-finite float (at any depth of dicts, lists and tuples) spelled by `json_float`."""
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, dict):
        return {key: strict_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json_value(item) for item in value]
    return value


def scalars_json(run: str, tag: str, columns: ScalarColumns, revision: int, start: int = 0) -> dict[str, Any]:
    part = columns.since(start)
    return {
        "run": run,
        "tag": tag,
        "revision": revision,
        "length": len(columns),
        "start": start,
        "steps": part.steps.tolist(),
        "wall_times": part.wall_times.tolist(),
        "values": json_floats(part.values),
    }


def json_float_column(values: np.ndarray) -> np.ndarray | list[float | str]:
    """A float column ready for orjson: the array itself when every value is finite (orjson writes it natively,
    shortest round-trip form), else `json_floats` (NaN/±Inf as strings, as the API documents)."""
    values = np.ascontiguousarray(values, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        all_finite = bool(np.isfinite(values.sum())) or bool(np.isfinite(values).all())  # one sum is the usual test
    return values if all_finite else json_floats(values)


def scalars_json_bytes(run: str, tag: str, columns: ScalarColumns, revision: int, start: int = 0) -> bytes:
    """`scalars_json` serialised: the same document, written from the numpy columns by orjson (no Python lists)."""
    part = columns.since(start)
    return orjson.dumps({
        "run": run,
        "tag": tag,
        "revision": revision,
        "length": len(columns),
        "start": start,
        "steps": np.ascontiguousarray(part.steps, np.int64),
        "wall_times": json_float_column(part.wall_times),
        "values": json_float_column(part.values),
    }, option=orjson.OPT_SERIALIZE_NUMPY)


def scalars_csv(series: list[tuple[str, str, ScalarColumns]]) -> str:
    """One CSV for any number of (run, tag, columns); `repr` keeps every float exactly."""
    out = io.StringIO()
    out.write(CSV_HEADER)
    for run, tag, columns in series:
        prefix = f"{_csv_field(run)},{_csv_field(tag)},"
        for step, wall_time, value in zip(columns.steps.tolist(), columns.wall_times.tolist(), columns.values.tolist()):
            out.write(f"{prefix}{step},{wall_time!r},{value!r}\n")
    return out.getvalue()


def histograms_json(run: str, tag: str, points: list[HistogramPoint]) -> dict[str, Any]:
    return {
        "run": run,
        "tag": tag,
        "histograms": [
            {
                "step": p.step,
                "wall_time": json_float(p.wall_time),
                "min": json_float(p.min),
                "max": json_float(p.max),
                "num": json_float(p.num),
                "sum": json_float(p.sum),
                "sum_squares": json_float(p.sum_squares),
                "edges": json_floats(np.asarray(p.edges, np.float64)),
                "counts": json_floats(np.asarray(p.counts, np.float64)),
            }
            for p in points
        ],
    }


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text
