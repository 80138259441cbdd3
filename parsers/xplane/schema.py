"""The XSpace wire schema (package `tensorflow.profiler`), only the fields this tool reads.

Field numbers are those of upstream `xla/tsl/profiler/protobuf/xplane.proto`;
`CoreDetails` is from xprof's `op_stats.proto`. Unknown fields are kept by
protobuf and ignored here.
"""

from __future__ import annotations

from ..wire.protobuild import FieldSpec, build_messages

_MESSAGES: dict[str, list[FieldSpec]] = {
    "XSpace": [
        ("planes", 1, "XPlane", "repeated"),
        ("errors", 2, "string", "repeated"),
        ("warnings", 3, "string", "repeated"),
        ("hostnames", 4, "string", "repeated"),
    ],
    "XPlane": [
        ("id", 1, "int64"),
        ("name", 2, "string"),
        ("lines", 3, "XLine", "repeated"),
        ("event_metadata", 4, "map<int64, XEventMetadata>"),
        ("stat_metadata", 5, "map<int64, XStatMetadata>"),
        ("stats", 6, "XStat", "repeated"),
    ],
    "XLine": [
        ("id", 1, "int64"),
        ("display_id", 10, "int64"),
        ("name", 2, "string"),
        ("display_name", 11, "string"),
        ("timestamp_ns", 3, "int64"),
        ("duration_ps", 9, "int64"),
        ("events", 4, "XEvent", "repeated"),
    ],
    # offset_ps and num_occurrences form the oneof `data` upstream; as plain
    # proto3 scalars they read the same, and a zero num_occurrences means "not set".
    "XEvent": [
        ("metadata_id", 1, "int64"),
        ("offset_ps", 2, "int64"),
        ("num_occurrences", 5, "int64"),
        ("duration_ps", 3, "int64"),
        ("stats", 4, "XStat", "repeated"),
    ],
    "XStat": [
        ("metadata_id", 1, "int64"),
        ("double_value", 2, "double"),
        ("uint64_value", 3, "uint64"),
        ("int64_value", 4, "int64"),
        ("str_value", 5, "string"),
        ("bytes_value", 6, "bytes"),
        ("ref_value", 7, "uint64"),
    ],
    "XEventMetadata": [
        ("id", 1, "int64"),
        ("name", 2, "string"),
        ("display_name", 4, "string"),
        ("metadata", 3, "bytes"),
        ("stats", 5, "XStat", "repeated"),
        ("child_id", 6, "int64", "repeated"),
    ],
    "XStatMetadata": [
        ("id", 1, "int64"),
        ("name", 2, "string"),
        ("description", 3, "string"),
    ],
    "CoreDetails": [
        ("hostname", 1, "string"),
        ("device_ordinal", 2, "uint32"),
        ("core_num", 3, "uint32"),
        ("local_chip_id", 4, "uint32"),
        ("global_chip_id", 5, "uint32"),
        ("global_core_id", 6, "uint32"),
        ("is_sparse_core", 7, "bool"),
    ],
}

_CLASSES = build_messages("audit_xplane.proto", "tensorflow.profiler", _MESSAGES)

XSpace = _CLASSES["XSpace"]
XPlane = _CLASSES["XPlane"]
XLine = _CLASSES["XLine"]
XEvent = _CLASSES["XEvent"]
XStat = _CLASSES["XStat"]
XEventMetadata = _CLASSES["XEventMetadata"]
XStatMetadata = _CLASSES["XStatMetadata"]
CoreDetails = _CLASSES["CoreDetails"]
