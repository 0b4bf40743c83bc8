"""The HParams plugin's messages (tensorboard/plugins/hparams/{api,plugin_data}.proto), in the private pool."""
from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2

from instrumentation.format import protos
from instrumentation.format.protos import BOOL, DOUBLE, ENUM, INT32, MESSAGE, STRING, enum, field, message

_STRUCT_FILE = "google/protobuf/struct.proto"
protos.POOL.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
_VALUE, _LIST_VALUE = ".google.protobuf.Value", ".google.protobuf.ListValue"
PACKAGE = f"{protos.PACKAGE}.hparams"

DATA_TYPE_STRING, DATA_TYPE_BOOL, DATA_TYPE_FLOAT64 = 1, 2, 3
STATUS_SUCCESS = 1



def _map_entry(name: str, value_type_name: str) -> Any:
    """The nested entry message of a `map<string, value_type>` field."""
    entry = message(name, [field("key", 1, STRING), field("value", 2, MESSAGE, type_name=value_type_name)])
    entry.options.map_entry = True
    return entry


_CLASSES = protos.build_file("flowscope/tensorboard/hparams.proto", dependencies=[_STRUCT_FILE],
                             package=PACKAGE, enums=[
    enum("DataType", [("DATA_TYPE_UNSET", 0), ("DATA_TYPE_STRING", 1), ("DATA_TYPE_BOOL", 2),
                      ("DATA_TYPE_FLOAT64", 3)]),
    enum("DatasetType", [("DATASET_UNKNOWN", 0), ("DATASET_TRAINING", 1), ("DATASET_VALIDATION", 2)]),
    enum("Status", [("STATUS_UNKNOWN", 0), ("STATUS_SUCCESS", 1), ("STATUS_FAILURE", 2), ("STATUS_RUNNING", 3)]),
], messages=[
    message("Interval", [field("min_value", 1, DOUBLE), field("max_value", 2, DOUBLE)]),
    message("HParamInfo", [
        field("name", 1, STRING), field("display_name", 2, STRING), field("description", 3, STRING),
        field("type", 4, ENUM, type_name="DataType"),
        field("domain_discrete", 5, MESSAGE, type_name=_LIST_VALUE, oneof=0),
        field("domain_interval", 6, MESSAGE, type_name="Interval", oneof=0), field("differs", 7, BOOL)],
        oneofs=["domain"]),
    message("MetricName", [field("group", 1, STRING), field("tag", 2, STRING)]),
    message("MetricInfo", [
        field("name", 1, MESSAGE, type_name="MetricName"), field("display_name", 3, STRING),
        field("description", 4, STRING), field("dataset_type", 5, ENUM, type_name="DatasetType")]),
    message("Experiment", [
        field("name", 6, STRING), field("description", 1, STRING), field("user", 2, STRING),
        field("time_created_secs", 3, DOUBLE), field("hparam_infos", 4, MESSAGE, repeated=True, type_name="HParamInfo"),
        field("metric_infos", 5, MESSAGE, repeated=True, type_name="MetricInfo")]),
    message("SessionStartInfo", [
        field("hparams", 1, MESSAGE, repeated=True, type_name="SessionStartInfo.HparamsEntry"),
        field("model_uri", 2, STRING), field("monitor_url", 3, STRING), field("group_name", 4, STRING),
        field("start_time_secs", 5, DOUBLE)],
        nested=[_map_entry("HparamsEntry", _VALUE)]),
    message("SessionEndInfo", [field("status", 1, ENUM, type_name="Status"), field("end_time_secs", 2, DOUBLE)]),
    message("HParamsPluginData", [
        field("version", 1, INT32), field("experiment", 2, MESSAGE, type_name="Experiment", oneof=0),
        field("session_start_info", 3, MESSAGE, type_name="SessionStartInfo", oneof=0),
        field("session_end_info", 4, MESSAGE, type_name="SessionEndInfo", oneof=0)], oneofs=["data"]),
])


HParamsPluginData, Experiment, HParamInfo, MetricInfo, MetricName, SessionStartInfo, SessionEndInfo = (
    _CLASSES[name] for name in ("HParamsPluginData", "Experiment", "HParamInfo", "MetricInfo", "MetricName",
                                "SessionStartInfo", "SessionEndInfo"))
ListValue = protos.message_factory.GetMessageClass(protos.POOL.FindMessageTypeByName("google.protobuf.ListValue"))
