"""TensorBoard's GraphDef subset (tensorflow/core/framework/graph.proto) that the graph plugin reads, in the private
pool: nodes with their op, inputs and attributes (`_output_shapes`, `dtype`)."""
from __future__ import annotations

from instrumentation.format import protos
from instrumentation.format.protos import BYTES, INT32, MESSAGE, STRING, field, message

_SHAPE = f".{protos.PACKAGE}.TensorShapeProto"
_attr_entry = message("AttrEntry", [field("key", 1, STRING), field("value", 2, MESSAGE, type_name="AttrValue")])
_attr_entry.options.map_entry = True

_CLASSES = protos.build_file("flowscope/tensorboard/graph.proto", dependencies=["flowscope/tensorboard/event.proto"],
                             package=f"{protos.PACKAGE}.graph", messages=[
    message("AttrValue", [field("list", 1, MESSAGE, type_name="AttrValue.ListValue", oneof=0),
                          field("s", 2, BYTES, oneof=0), field("shape", 7, MESSAGE, type_name=_SHAPE, oneof=0)],
            oneofs=["value"],
            nested=[message("ListValue", [field("shape", 7, MESSAGE, repeated=True, type_name=_SHAPE)])]),
    message("NodeDef", [field("name", 1, STRING), field("op", 2, STRING), field("input", 3, STRING, repeated=True),
                        field("device", 4, STRING),
                        field("attr", 5, MESSAGE, repeated=True, type_name="NodeDef.AttrEntry")],
            nested=[_attr_entry]),
    message("VersionDef", [field("producer", 1, INT32)]),
    message("GraphDef", [field("node", 1, MESSAGE, repeated=True, type_name="NodeDef"),
                         field("versions", 4, MESSAGE, type_name="VersionDef")]),
])
GraphDef, NodeDef, AttrValue = _CLASSES["GraphDef"], _CLASSES["NodeDef"], _CLASSES["AttrValue"]
