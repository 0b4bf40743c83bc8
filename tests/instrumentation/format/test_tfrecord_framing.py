"""TFRecord framing: CRCs against TensorBoard's own implementation, truncation at every byte, corruption."""
from __future__ import annotations

import struct

import pytest

from instrumentation.format import (EventFileReader, frame_record, frame_records, iter_records, masked_crc32c,
                                    scan_records)
from instrumentation.format import protos


def _payloads(count: int) -> list[bytes]:
    return [bytes([index % 251]) * (index * 7 % 50 + 1) for index in range(count)]


def test_masked_crc_and_framing_match_tensorboard():
    from tensorboard.summary.writer.record_writer import RecordWriter, masked_crc32c as tb_masked_crc32c

    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> None:
            self.data += data

    sink = Sink()
    tb_writer = RecordWriter(sink)
    for payload in [b"", b"a", b"brain.Event:2" * 100]:
        assert masked_crc32c(payload) == tb_masked_crc32c(payload)
        tb_writer.write(payload)
    assert frame_records([b"", b"a", b"brain.Event:2" * 100]) == sink.data


def test_scan_round_trip_and_max_records():
    payloads = _payloads(100)
    buffer = frame_records(payloads)
    scan = scan_records(buffer)
    assert scan.records == payloads and scan.end_offset == len(buffer) and scan.corrupt == 0
    first = scan_records(buffer, 0, max_records=10)
    assert first.records == payloads[:10]
    assert scan_records(buffer, first.end_offset).records == payloads[10:]


def test_cut_at_every_byte_of_the_last_record_reads_up_to_the_previous_record(tmp_path):
    events = [protos.Event(step=step, wall_time=1.0 + step, file_version="v" if step == 0 else None)
              for step in range(3)]
    records = [frame_record(event.SerializeToString()) for event in events]
    whole = b"".join(records)
    complete = len(whole) - len(records[-1])
    path = tmp_path / "events.out.tfevents.cut"
    for cut in range(complete, len(whole)):
        path.write_bytes(whole[:cut])
        reader = EventFileReader(path)
        read = reader.read()
        assert [event.step for event in read] == [0, 1], cut
        assert reader.offset == complete and reader.corrupt_records == 0
        assert reader.read() == []  # nothing new: stays put
        path.write_bytes(whole)  # the writer finishes the record
        assert [event.step for event in reader.read()] == [2]
        assert reader.offset == len(whole)


def test_corrupt_data_is_skipped_and_counted(tmp_path):
    payloads = [protos.Event(step=step, wall_time=2.0).SerializeToString() for step in range(1, 6)]
    framed = bytearray(frame_records(payloads))
    record_bytes = len(frame_record(payloads[0]))
    framed[record_bytes * 2 + 14] ^= 0xFF  # a data byte of the third record
    path = tmp_path / "events.out.tfevents.bad"
    path.write_bytes(bytes(framed))
    reader = EventFileReader(path)
    assert [event.step for event in reader.read()] == [1, 2, 4, 5]
    assert reader.corrupt_records == 1


def test_corrupt_length_resyncs_at_the_next_intact_record():
    payloads = _payloads(5)
    framed = bytearray(frame_records(payloads))
    framed[0] ^= 0x01  # the first record's length no longer matches its CRC
    scan = scan_records(bytes(framed))
    assert scan.records == payloads[1:] and scan.corrupt == 1


def test_garbage_tail_is_skipped_but_its_last_11_bytes_wait_for_a_header():
    payloads = _payloads(3)
    framed = frame_records(payloads)
    garbage = struct.pack("<QI", 5, 12345)  # a complete header whose CRC is wrong: it can never become a record
    scan = scan_records(framed + garbage)
    assert scan.records == payloads and scan.corrupt == 1
    # every position that has 12 bytes was tested; the last 11 could still start a header being written
    assert scan.end_offset == len(framed) + len(garbage) - 11
    assert [(s.start, s.stop) for s in scan.skipped] == [(len(framed), scan.end_offset)]
    assert "CRC" in scan.skipped[0].reason
    later = scan_records(framed + garbage + frame_records(payloads[:1]), scan.end_offset)
    assert later.records == payloads[:1]


def test_iter_records_crosses_chunk_boundaries(tmp_path):
    payloads = _payloads(300)
    path = tmp_path / "records"
    path.write_bytes(frame_records(payloads))
    assert list(iter_records(str(path), chunk_bytes=64)) == payloads


@pytest.mark.parametrize("chunk_bytes", [16, 1 << 20])
def test_reader_handles_records_larger_than_its_chunk(tmp_path, chunk_bytes):
    big = protos.Event(step=7, wall_time=1.0, file_version="x" * 5000).SerializeToString()
    path = tmp_path / "events.out.tfevents.big"
    path.write_bytes(frame_records([big, big]))
    reader = EventFileReader(path, chunk_bytes=chunk_bytes)
    assert [event.file_version for event in reader.read()] == ["x" * 5000] * 2


def test_max_records_reads_are_sized_to_the_records_and_still_take_a_large_one(tmp_path):
    small = [protos.Event(step=step, wall_time=1.0, file_version="v").SerializeToString() for step in range(1, 301)]
    large = protos.Event(step=1000, wall_time=1.0, file_version="x" * 300_000).SerializeToString()
    payloads = small[:150] + [large] + small[150:]
    path = tmp_path / "events.out.tfevents.sized"
    path.write_bytes(frame_records(payloads))
    reader = EventFileReader(path)
    steps = []
    while events := reader.read(max_records=7):
        assert len(events) <= 7
        steps += [event.step for event in events]
    assert steps == [protos.Event.FromString(p).step for p in payloads] and reader.offset == path.stat().st_size
