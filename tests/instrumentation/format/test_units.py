"""IEC byte text and chart ticks: powers of 1024, unit names KiB/MiB/GiB, round ticks covering the data."""
from __future__ import annotations

import math

import pytest

from instrumentation.format.units import IEC_UNITS, byte_ticks, bytes_axis, format_bytes


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
