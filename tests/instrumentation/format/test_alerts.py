"""Alerts file: write/read round trip, tailing a half-written line, malformed lines, NaN evidence, I/O errors."""
from __future__ import annotations

import json
import os

import pytest

from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertReader, AlertWriter


def test_round_trip_and_incremental_reads(tmp_path):
    writer = AlertWriter(tmp_path)
    reader = AlertReader(tmp_path / ALERTS_RELPATH)
    assert reader.read() == []  # no file yet
    first = Alert("loss_spike", "warning", "loss", "loss jumped 12x", step=40, wall_time=1.5, evidence={"ratio": 12.0})
    writer.write(first)
    assert reader.read() == [first]
    second = Alert("nonfinite", "error", "fc1", "NaN from Log", step=41, wall_time=2.0, evidence={"nan_count": 3})
    writer.write(second)
    assert reader.read() == [second]
    assert reader.read() == []


def test_non_finite_evidence_is_written_as_strings(tmp_path):
    AlertWriter(tmp_path).write(Alert("nonfinite", "error", "x", "m", 1, 0.0,
                                      {"min": float("nan"), "max": float("inf")}))
    line = (tmp_path / ALERTS_RELPATH).read_text().strip()
    assert json.loads(line)["evidence"] == {"min": "nan", "max": "inf"}


def test_half_written_line_waits_and_malformed_line_is_counted(tmp_path):
    path = tmp_path / "alerts.jsonl"
    good = Alert("dead_units", "warning", "fc1", "m", 3, 0.0).to_json()
    path.write_text("not json\n" + good + "\n" + good[:10])
    reader = AlertReader(path)
    assert [a.kind for a in reader.read()] == ["dead_units"]
    assert reader.malformed_lines == 1
    with open(path, "a") as handle:
        handle.write(good[10:] + "\n")
    assert [a.step for a in reader.read()] == [3]


def test_unwritable_directory_is_reported_once_and_counted(tmp_path, capsys):
    blocker = tmp_path / "run"
    blocker.write_text("a file where the run directory should be")
    writer = AlertWriter(blocker)
    for _ in range(3):
        writer.write(Alert("leak", "warning", "s", "m", 0, 0.0))
    assert writer.dropped == 3
    assert capsys.readouterr().err.count("cannot write alerts") == 1


def test_bad_severity_names_it(tmp_path):
    with pytest.raises(ValueError, match="'fatal'"):
        AlertWriter(tmp_path).write(Alert("leak", "fatal", "s", "m", 0))
    assert not os.path.exists(tmp_path / ALERTS_RELPATH)
