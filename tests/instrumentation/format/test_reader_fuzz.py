"""Fuzz: seeded random damage to real event files (ours, tensorboardX's, torch's) never makes the reader raise,
never loses an intact record before the damage, and keeps memory bounded; TensorBoard's own loader is the oracle
for what comes before the first damaged byte."""
from __future__ import annotations

import random
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from instrumentation.format import EventFileReader, iter_records
from instrumentation.format.decode import decode_event, parse_event
from instrumentation.format.record_headers import MAX_RECORD_BYTES

CASES_PER_WRITER = 100


def _write_ours(directory: Path) -> None:
    from instrumentation.summary.writer import SummaryWriter

    writer = SummaryWriter(directory)
    rng = np.random.default_rng(0)
    for step in range(1, 41):
        writer.add_scalar("loss", 1.0 / step, step)
        writer.add_scalar_rows(("a", "b"), [[step, -step]], [step])
        if step % 10 == 0:
            writer.add_histogram("weights", rng.normal(size=200), step)
            writer.add_text("note", f"step {step}", step)
    writer.close()


def _write_foreign(directory: Path, module: str) -> None:
    """tensorboardX's or torch's SummaryWriter: their own scalar, histogram (and text) records."""
    import importlib

    writer = importlib.import_module(module).SummaryWriter(str(directory))
    for step in range(1, 41):
        writer.add_scalar("loss", 1.0 / step, step)
        if step % 10 == 0:
            writer.add_histogram("weights", np.arange(100.0) * step, step)
            writer.add_text("note", f"step {step}", step)
    writer.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, bytes]:
    files = {}
    for name, module in (("ours", None), ("tensorboardX", "tensorboardX"), ("torch", "torch.utils.tensorboard")):
        directory = tmp_path_factory.mktemp(name)
        _write_ours(directory) if module is None else _write_foreign(directory, module)
        [path] = [p for p in directory.rglob("events.out.tfevents.*")]
        files[name] = path.read_bytes()
    return files


def _spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record of an undamaged file, by a plain sequential reading of the framing."""
    spans, offset = [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        end = offset + 12 + length + 4
        assert end <= len(data)
        spans.append((offset, end))
        offset = end
    assert offset == len(data)
    return spans


def _header(length: int) -> bytes:
    from tensorboard.summary.writer.record_writer import masked_crc32c as tb_masked_crc32c  # an independent CRC

    encoded = struct.pack("<Q", length)
    return encoded + struct.pack("<I", tb_masked_crc32c(encoded))


def _mutate(data: bytes, spans: list[tuple[int, int]], rng: random.Random) -> tuple[bytes, int, str]:
    """(damaged bytes, offset of the first damaged byte, what was done)."""
    start, end = spans[rng.randrange(1, len(spans))]
    kind = rng.choice(["absurd_length", "wrong_length", "header_crc", "data_byte", "byte_flips", "truncate",
                       "zero_tail", "random_tail", "insert_garbage", "delete_span"])
    damaged = bytearray(data)
    if kind == "absurd_length":
        length = rng.choice([2**64 - 1, 2**63, MAX_RECORD_BYTES + 1, rng.randrange(MAX_RECORD_BYTES + 1, 2**64)])
        damaged[start:start + 12] = _header(length)
    elif kind == "wrong_length":
        damaged[start:start + 12] = _header(rng.randrange(0, 4 * (end - start)))
    elif kind == "header_crc":
        damaged[start + 8 + rng.randrange(4)] ^= 1 << rng.randrange(8)
    elif kind == "data_byte":
        damaged[rng.randrange(start + 12, end)] ^= 1 << rng.randrange(8)
    elif kind == "byte_flips":
        positions = [rng.randrange(start, len(data)) for _ in range(rng.randrange(1, 20))]
        for position in positions:
            damaged[position] ^= rng.randrange(1, 256)
        start = min(positions)
    elif kind == "truncate":
        start = rng.randrange(start, len(data))
        del damaged[start:]
    elif kind == "zero_tail":
        start = len(data)
        damaged += bytes(rng.randrange(1, 70_000))
    elif kind == "random_tail":
        start = len(data)
        damaged += rng.randbytes(rng.randrange(1, 70_000))
    elif kind == "insert_garbage":
        damaged[start:start] = rng.randbytes(rng.randrange(1, 5_000))
    else:
        del damaged[rng.randrange(start, end):rng.randrange(end, len(data) + 1)]
    return bytes(damaged), start, kind


def _tensorboard_prefix(path: Path) -> list[bytes]:
    """What TensorBoard's own loader returns before it stops (it stops, or raises, at the first damage)."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    records = []
    try:
        for record in RawEventFileLoader(str(path)).Load():
            records.append(record)
    except Exception:  # NOTE: TensorBoard's python reader raises on some damage (e.g. an absurd length)
        pass
    return records


@pytest.mark.parametrize("writer", ["ours", "tensorboardX", "torch"])
def test_random_damage_never_raises_and_keeps_every_record_before_it(pristine, tmp_path, writer):
    data = pristine[writer]
    spans = _spans(data)
    payloads = [data[start + 12:end - 4] for start, end in spans]
    rng = random.Random(f"flowscope-fuzz-{writer}")
    path = tmp_path / "events.out.tfevents.fuzz"
    kinds = set()
    for case in range(CASES_PER_WRITER):
        damaged, first_damage, kind = _mutate(data, spans, rng)
        kinds.add(kind)
        path.write_bytes(damaged)
        chunk_bytes = rng.choice([700, 4096, 1 << 24])  # small chunks: spans and records across chunk edges
        intact = [payload for payload, (_, end) in zip(payloads, spans) if end <= first_damage]
        context = f"case {case}: {kind} at {first_damage}, chunk {chunk_bytes}"

        tracemalloc.start()
        try:
            reader = EventFileReader(path, chunk_bytes=chunk_bytes)
            events = reader.read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 * len(damaged) + (1 << 20), context
        records = list(iter_records(str(path), chunk_bytes=chunk_bytes))
        assert records[:len(intact)] == intact, context
        expected_events = [decode_event(parse_event(payload)) for payload in intact]
        assert [(e.step, e.wall_time, [v.tag for v in e.values]) for e in events[:len(intact)]] == \
            [(e.step, e.wall_time, [v.tag for v in e.values]) for e in expected_events], context
        if kind in ("zero_tail", "random_tail"):  # damage after the last record: everything, and a problem named
            assert records[:len(payloads)] == payloads, context
            assert reader.problem is not None and reader.problem.startswith(f"bytes {len(data):,}–"), context
        columns = EventFileReader(path, chunk_bytes=chunk_bytes).read_columns()
        assert list(columns.tags) == [v.tag for e in events for v in e.values if v.__class__.__name__ == "ScalarValue"]
        if case % 4 == 0:
            from_tensorboard = _tensorboard_prefix(path)
            assert records[:len(from_tensorboard)] == from_tensorboard[:len(records)], context
            assert len(from_tensorboard) >= len(intact) or kind == "absurd_length", context
    assert len(kinds) >= 8  # the seeded draws cover most kinds of damage
