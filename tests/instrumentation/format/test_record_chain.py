"""The one-pass scan of intact files: records followed through their lengths, every data CRC checked in one pass,
the every-byte header search only after damage; payloads sliced only when asked for."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from instrumentation.format import frame_records, protos, scan_records
from instrumentation.format import records as records_module
from instrumentation.format.record_chain import chain_data_intact, chained_records, follow_lengths
from instrumentation.format.records import Payloads


def _payloads(count: int, seed: int = 0) -> list[bytes]:
    """Scalar events of varied lengths (tags of 1..30 bytes) and a few empty and large payloads."""
    rng = random.Random(seed)
    summary = protos.Summary
    payloads = [protos.Event(step=step, wall_time=1.7e9 + step, summary=summary(value=[summary.Value(
        tag="t" * rng.randrange(1, 31), simple_value=rng.random())])).SerializeToString() for step in range(count)]
    payloads[count // 3] = b""
    payloads[count // 2] = rng.randbytes(70_000)  # past the 64 KiB zero-CRC block
    return payloads


def _spans(payloads: list[bytes]) -> list[tuple[int, int]]:
    """(header offset, data length) of each record of frame_records(payloads), by arithmetic."""
    spans, offset = [], 0
    for payload in payloads:
        spans.append((offset, len(payload)))
        offset += 16 + len(payload)
    return spans


def _tensorboard_crc_ok(buffer: bytes, head: int, length: int) -> bool:
    """The independent oracle: TensorBoard's own masked CRC of one record's data against its stored footer."""
    from tensorboard.summary.writer.record_writer import masked_crc32c as tb_masked_crc32c

    data = buffer[head + 12:head + 12 + length]
    return tb_masked_crc32c(data) == struct.unpack_from("<I", buffer, head + 12 + length)[0]


def _chain(buffer: bytes) -> tuple[np.ndarray, np.ndarray]:
    heads, lengths, stop = chained_records(buffer, 0, 1 << 20)
    assert stop == len(buffer)
    return heads, lengths


def test_one_pass_data_check_agrees_with_a_crc_per_record_on_damage_to_any_one_record():
    payloads = _payloads(200)
    pristine = frame_records(payloads)
    heads, lengths = _chain(pristine)
    assert chain_data_intact(pristine, heads, lengths)
    rng = random.Random(1)
    for head, length in _spans(payloads):
        for _ in range(3):  # a bit of the data (a float's bit among them) or of the stored CRC
            damaged = bytearray(pristine)
            damaged[rng.randrange(head + 12, head + 16 + length)] ^= 1 << rng.randrange(8)
            damaged = bytes(damaged)
            assert not _tensorboard_crc_ok(damaged, head, length)
            assert not chain_data_intact(damaged, heads, lengths), (head, length)


def test_one_pass_data_check_catches_crcs_swapped_between_two_records_of_one_length():
    payloads = [bytes([index]) * 40 for index in range(50)]
    buffer = bytearray(frame_records(payloads))
    heads, lengths = _chain(bytes(buffer))
    first, second = 10 * 56 + 52, 30 * 56 + 52  # the footers of records 10 and 30 (56 bytes a record)
    buffer[first:first + 4], buffer[second:second + 4] = buffer[second:second + 4], buffer[first:first + 4]
    assert not chain_data_intact(bytes(buffer), heads, lengths)


def test_an_intact_buffer_is_scanned_without_the_every_byte_header_search(monkeypatch):
    payloads = _payloads(300)
    buffer = frame_records(payloads)
    searches = []
    real_search = records_module.intact_headers

    def counting_search(*args, **kwargs):
        searches.append(args[1:])
        return real_search(*args, **kwargs)

    monkeypatch.setattr(records_module, "intact_headers", counting_search)
    monkeypatch.setattr(records_module, "_FIRST_CHAIN_RECORDS", 8)  # pieces of 8, 64, 64...: several in one scan
    monkeypatch.setattr(records_module, "_CHAIN_RECORDS", 64)
    scan = scan_records(buffer)
    assert scan.records == payloads and scan.end_offset == len(buffer) and scan.corrupt == 0
    assert scan_records(buffer, 0, max_records=100).records == payloads[:100]
    last = len(buffer) - 16 - len(payloads[-1])
    for cut in (last + 5, last + 12, len(buffer) - 1):  # a header or a record still being written
        torn = scan_records(buffer[:cut])
        assert torn.records == payloads[:-1] and torn.end_offset == last and torn.corrupt == 0
        assert torn.wanted_bytes == (16 + len(payloads[-1]) if cut >= last + 12 else 0)
    assert searches == []

    damaged = bytearray(buffer)
    head, length = _spans(payloads)[151]
    damaged[head + 12 + length - 1] ^= 0x10  # the last data byte of record 151: a bit of its float value
    scan = scan_records(bytes(damaged))
    assert scan.records == payloads[:151] + payloads[152:] and scan.corrupt == 1
    assert scan.skipped[0].start == head and "data CRC" in scan.skipped[0].reason
    assert searches == [(_spans(payloads)[136][0],)]  # searched from the piece of chain (136..199) that failed


def test_following_lengths_stops_at_garbage_without_raising():
    good = frame_records([b"abc"] * 3)
    for garbage in (struct.pack("<QI", 2**64 - 1, 0), struct.pack("<QI", 2**63 - 20, 0), b"\x00" * 4096):
        heads = follow_lengths(good + garbage, 0, 1 << 20)
        assert heads[:4].tolist() == [0, 19, 38, 57] and (heads <= len(good + garbage)).all()
        scan = scan_records(good + garbage)
        assert scan.records == [b"abc"] * 3 and scan.corrupt == 1


def test_payloads_slice_on_demand_and_compare_as_a_list():
    buffer = b"..abc..de...f"
    payloads = Payloads(buffer, np.array([2, 7, 12]), np.array([3, 2, 1]))
    assert len(payloads) == 3 and payloads[0] == b"abc" and payloads[-1] == b"f"
    assert payloads[1:] == [b"de", b"f"] and list(payloads) == [b"abc", b"de", b"f"]
    assert payloads == [b"abc", b"de", b"f"] and payloads != [b"abc"]
    with pytest.raises(IndexError):
        payloads[3]
