"""The on-disk contract: TFRecord-framed Event protos, their value objects and an incremental reader."""
from __future__ import annotations

from instrumentation.format.metadata import FILE_VERSION, event_file_name, is_event_file
from instrumentation.format.column_batch import ScalarBatch
from instrumentation.format.reader import EventFileReader
from instrumentation.format.record_headers import MAX_RECORD_BYTES
from instrumentation.format.records import (frame_record, frame_records, iter_records, masked_crc32c, scan_records,
                                            write_record)
from instrumentation.format.values import Event, HistogramValue, PluginValue, ScalarValue, SummaryValue, TextValue

__all__ = [
    "FILE_VERSION", "MAX_RECORD_BYTES", "Event", "EventFileReader", "HistogramValue", "PluginValue", "ScalarBatch",
    "ScalarValue", "SummaryValue", "TextValue", "event_file_name", "frame_record", "frame_records", "is_event_file",
    "iter_records", "masked_crc32c", "scan_records", "write_record",
]
