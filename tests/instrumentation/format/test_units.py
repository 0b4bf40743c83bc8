"""IEC byte text and chart ticks: powers of 1024, unit names KiB/MiB/GiB, round ticks covering the data."""
from __future__ import annotations

import math

import pytest

from instrumentation.format.units import IEC_UNITS, TagUnit, byte_ticks, bytes_axis, format_bytes, tag_unit, unit_ticks


@pytest.mark.parametrize("count, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (704_460, "687.9 KiB"),
                                         (2_299_040, "2.2 MiB"), (3 * 1024 ** 3, "3.0 GiB"), (-2048, "-2.0 KiB"),
                                         (5 * 1024 ** 5, "5120.0 TiB")])
def test_format_bytes_uses_powers_of_1024(count: float, text: str) -> None:
    assert format_bytes(count) == text


def _parse(label: str) -> float:
    number, unit = label.split(" ")
    return float(number) * 1024 ** IEC_UNITS.index(unit)


@pytest.mark.parametrize("highest", [1, 7, 700, 1500, 704_460, 2_375_920, 2.5 * 1024 ** 3, 3e13])
def test_byte_ticks_are_round_iec_amounts_that_cover_the_data(highest: float) -> None:
    values, labels = byte_ticks(highest)
    assert values[0] == 0 and values[-1] >= highest and 2 <= len(values) <= 11
    assert values == sorted(values) and len({b - a for a, b in zip(values, values[1:])}) == 1
    for value, label in zip(values, labels):
        assert math.isclose(_parse(label), value)  # the label names the tick's own position
        assert label.split(" ")[1] in IEC_UNITS and "k" not in label and "M " not in label


def test_nothing_to_show_gets_one_zero_tick_and_an_axis_in_arrays() -> None:
    assert byte_ticks(0) == byte_ticks(float("nan")) == ([0.0], ["0 B"])
    axis = bytes_axis(3 * 1024 ** 2)
    assert axis["tickmode"] == "array" and axis["ticktext"][-1] == "3 MiB" and "exponentformat" not in axis


@pytest.mark.parametrize("count", [0, 1, 1023, 1024, 1536, 704_460, 2_299_040, 10 << 20, 3 * 1024 ** 3, -2048,
                                   1024 ** 4 - 1])
def test_the_engine_s_own_formatter_agrees_below_a_tebibyte(count: int) -> None:
    """The engine may not import instrumentation, so its OOM text has its own copy of the formatter; the copies
    must read alike (the engine's stops at GiB)."""
    from engine.memory import format_bytes as engine_format_bytes

    assert engine_format_bytes(count) == format_bytes(count)



def test_units_are_read_from_the_tag_suffix() -> None:
    assert tag_unit("mem/host/allocated_bytes") == TagUnit("bytes", 1.0)
    assert tag_unit("perf/step_time_ms") == TagUnit("s", 1e-3)
    assert tag_unit("latency_us") == TagUnit("s", 1e-6)
    assert tag_unit("epoch_s") == TagUnit("s", 1.0)
    for plain in ("perf/samples_per_sec", "sys/gpu0/power_w", "loss", "_ms", "train/acc_s2"):
        assert tag_unit(plain) is None


def test_byte_ticks_cover_the_range_in_iec_units() -> None:
    values, labels = unit_ticks(227_000, 229_000, tag_unit("x_bytes"))
    assert values[0] <= 227_000 and values[-1] >= 229_000
    assert all(label.endswith(" KiB") for label in labels)
    assert labels[1] == "222.0 KiB" and values[1] == 222 * 1024
    values, labels = unit_ticks(0, 3 * 2**30, tag_unit("x_bytes"))
    assert labels == ["0 GiB", "1 GiB", "2 GiB", "3 GiB"] and values[-1] == 3 * 2**30


def test_time_ticks_pick_the_si_unit_of_the_values() -> None:
    values, labels = unit_ticks(12.1, 12.6, tag_unit("perf/step_time_ms"))
    assert labels == ["12.0 ms", "12.2 ms", "12.4 ms", "12.6 ms"]
    assert values == pytest.approx([12.0, 12.2, 12.4, 12.6])
    _, labels = unit_ticks(0, 2500, tag_unit("perf/step_time_ms"))
    assert labels[-1].endswith(" s") and labels[0] == "0 s"
    _, labels = unit_ticks(0.0, 4e-4, tag_unit("t_s"))
    assert all(label.endswith(" µs") for label in labels)
    with pytest.raises(ValueError, match="finite and ordered"):
        unit_ticks(2.0, 1.0, tag_unit("t_s"))
