"""The scalar encoder's oracle: scalar Events serialized by the protobuf runtime, as torch and tensorboardX do."""
from __future__ import annotations

from instrumentation.format import protos
from instrumentation.format.records import frame_records


def protobuf_event(tags: list[str] | tuple[str, ...], values: list[float], step: int, wall_time: float) -> bytes:
    """One serialized Event holding a ``simple_value`` per (tag, value), in order (a TF1 merged summary)."""
    summary = protos.Summary
    return protos.Event(wall_time=wall_time, step=step, summary=summary(
        value=[summary.Value(tag=tag, simple_value=value) for tag, value in zip(tags, values)])).SerializeToString()


def protobuf_records(events: list[tuple]) -> bytes:
    """``protobuf_event(*event)`` of each event, framed: the bytes a writer of these events must produce."""
    return frame_records([protobuf_event(*event) for event in events])
