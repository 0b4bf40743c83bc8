"""TensorBoard's Event/Summary/Histogram/Tensor messages, built at run time from descriptors in a private pool."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FieldSpec = tuple  # (name, number, type, repeated?, type_name, oneof_index)

_F = descriptor_pb2.FieldDescriptorProto
DOUBLE, FLOAT, INT64, UINT64, INT32 = _F.TYPE_DOUBLE, _F.TYPE_FLOAT, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_INT32
BOOL, STRING, BYTES = _F.TYPE_BOOL, _F.TYPE_STRING, _F.TYPE_BYTES
MESSAGE, ENUM, UINT32 = _F.TYPE_MESSAGE, _F.TYPE_ENUM, _F.TYPE_UINT32

PACKAGE = "flowscope.tensorboard"
# NOTE: a private pool, so these classes never clash with TensorBoard's or TensorFlow's own generated protos,
# which register the same message names in the default pool when those packages are imported.
POOL = descriptor_pool.DescriptorPool()


def field(name: str, number: int, type_: int, *, repeated: bool = False, type_name: str = "",
          oneof: int | None = None) -> FieldSpec:
    return (name, number, type_, repeated, type_name, oneof)


def message(name: str, fields: Sequence[FieldSpec], *, oneofs: Sequence[str] = (),
            nested: Sequence[descriptor_pb2.DescriptorProto] = (),
            enums: Sequence[descriptor_pb2.EnumDescriptorProto] = ()) -> descriptor_pb2.DescriptorProto:
    """A DescriptorProto; `type_name` of message/enum fields is resolved like protoc does (relative to the scope)."""
    proto = descriptor_pb2.DescriptorProto(name=name)
    for oneof_name in oneofs:
        proto.oneof_decl.add(name=oneof_name)
    for name_, number, type_, repeated, type_name, oneof in fields:
        f = proto.field.add(name=name_, number=number, type=type_,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof
    proto.nested_type.extend(nested)
    proto.enum_type.extend(enums)
    return proto


def enum(name: str, values: Sequence[tuple[str, int]]) -> descriptor_pb2.EnumDescriptorProto:
    proto = descriptor_pb2.EnumDescriptorProto(name=name)
    for value_name, number in values:
        proto.value.add(name=value_name, number=number)
    return proto


def build_file(file_name: str, messages: Sequence[descriptor_pb2.DescriptorProto],
               enums: Sequence[descriptor_pb2.EnumDescriptorProto] = (),
               dependencies: Sequence[str] = (), package: str = PACKAGE) -> dict[str, Any]:
    """Adds one proto3 file to the private pool; returns its message classes by name relative to the package."""
    file_proto = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
    file_proto.dependency.extend(dependencies)
    file_proto.message_type.extend(messages)
    file_proto.enum_type.extend(enums)
    POOL.Add(file_proto)
    # NOTE: pass the file *name*: upb's pool.Add returns a descriptor, the pure-Python backend returns None.
    classes = message_factory.GetMessageClassesForFiles([file_name], POOL)
    return {full_name.removeprefix(f"{package}."): cls for full_name, cls in classes.items()}


# DataType values used here (tensorflow/core/framework/types.proto).
DATA_TYPES = [("DT_INVALID", 0), ("DT_FLOAT", 1), ("DT_DOUBLE", 2), ("DT_INT32", 3), ("DT_UINT8", 4),
              ("DT_INT16", 5), ("DT_INT8", 6), ("DT_STRING", 7), ("DT_COMPLEX64", 8), ("DT_INT64", 9),
              ("DT_BOOL", 10), ("DT_BFLOAT16", 14), ("DT_UINT16", 17), ("DT_COMPLEX128", 18), ("DT_HALF", 19),
              ("DT_UINT32", 22), ("DT_UINT64", 23)]

_CLASSES = build_file("flowscope/tensorboard/event.proto", enums=[
    enum("DataType", DATA_TYPES),
    enum("DataClass", [("DATA_CLASS_UNKNOWN", 0), ("DATA_CLASS_SCALAR", 1), ("DATA_CLASS_TENSOR", 2),
                       ("DATA_CLASS_BLOB_SEQUENCE", 3)]),
], messages=[
    message("HistogramProto", [
        field("min", 1, DOUBLE), field("max", 2, DOUBLE), field("num", 3, DOUBLE), field("sum", 4, DOUBLE),
        field("sum_squares", 5, DOUBLE), field("bucket_limit", 6, DOUBLE, repeated=True),
        field("bucket", 7, DOUBLE, repeated=True)]),
    message("TensorShapeProto", [
        field("dim", 2, MESSAGE, repeated=True, type_name="TensorShapeProto.Dim"),
        field("unknown_rank", 3, BOOL)],
        nested=[message("Dim", [field("size", 1, INT64), field("name", 2, STRING)])]),
    message("TensorProto", [
        field("dtype", 1, ENUM, type_name="DataType"), field("tensor_shape", 2, MESSAGE, type_name="TensorShapeProto"),
        field("version_number", 3, INT32), field("tensor_content", 4, BYTES),
        field("float_val", 5, FLOAT, repeated=True), field("double_val", 6, DOUBLE, repeated=True),
        field("int_val", 7, INT32, repeated=True), field("string_val", 8, BYTES, repeated=True),
        field("int64_val", 10, INT64, repeated=True), field("bool_val", 11, BOOL, repeated=True),
        field("half_val", 13, INT32, repeated=True), field("uint32_val", 16, UINT32, repeated=True),
        field("uint64_val", 17, UINT64, repeated=True)]),
    message("SummaryMetadata", [
        field("plugin_data", 1, MESSAGE, type_name="SummaryMetadata.PluginData"),
        field("display_name", 2, STRING), field("summary_description", 3, STRING),
        field("data_class", 4, ENUM, type_name="DataClass")],
        nested=[message("PluginData", [field("plugin_name", 1, STRING), field("content", 2, BYTES)])]),
    message("Summary", [field("value", 1, MESSAGE, repeated=True, type_name="Summary.Value")], nested=[
        message("Image", [field("height", 1, INT32), field("width", 2, INT32), field("colorspace", 3, INT32),
                          field("encoded_image_string", 4, BYTES)]),
        message("Audio", [field("sample_rate", 1, FLOAT), field("num_channels", 2, INT64),
                          field("length_frames", 3, INT64), field("encoded_audio_string", 4, BYTES),
                          field("content_type", 5, STRING)]),
        message("Value", [
            field("tag", 1, STRING), field("node_name", 7, STRING),
            field("metadata", 9, MESSAGE, type_name="SummaryMetadata"),
            field("simple_value", 2, FLOAT, oneof=0), field("histo", 5, MESSAGE, type_name="HistogramProto", oneof=0),
            field("tensor", 8, MESSAGE, type_name="TensorProto", oneof=0),
            field("image", 4, MESSAGE, type_name="Summary.Image", oneof=0),
            field("audio", 6, MESSAGE, type_name="Summary.Audio", oneof=0)], oneofs=["value"])]),
    message("SessionLog", [
        field("status", 1, ENUM, type_name="SessionLog.SessionStatus"), field("checkpoint_path", 2, STRING),
        field("msg", 3, STRING)],
        enums=[enum("SessionStatus", [("STATUS_UNSPECIFIED", 0), ("START", 1), ("STOP", 2), ("CHECKPOINT", 3)])]),
    message("TaggedRunMetadata", [field("tag", 1, STRING), field("run_metadata", 2, BYTES)]),
    message("Event", [
        field("wall_time", 1, DOUBLE), field("step", 2, INT64),
        field("file_version", 3, STRING, oneof=0), field("graph_def", 4, BYTES, oneof=0),
        field("summary", 5, MESSAGE, type_name="Summary", oneof=0),
        field("session_log", 7, MESSAGE, type_name="SessionLog", oneof=0),
        field("tagged_run_metadata", 8, MESSAGE, type_name="TaggedRunMetadata", oneof=0),
        field("meta_graph_def", 9, BYTES, oneof=0)], oneofs=["what"]),
    message("PrCurvePluginData", [field("version", 1, INT32), field("num_thresholds", 2, UINT32)]),
])

Event, Summary, SummaryMetadata, SessionLog = (_CLASSES[name] for name in ("Event", "Summary", "SummaryMetadata",
                                                                              "SessionLog"))
HistogramProto, TensorProto, TensorShapeProto = (_CLASSES[name] for name in ("HistogramProto", "TensorProto",
                                                                             "TensorShapeProto"))
TaggedRunMetadata, PrCurvePluginData = _CLASSES["TaggedRunMetadata"], _CLASSES["PrCurvePluginData"]
