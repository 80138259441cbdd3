"""Build protobuf message classes at import from a compact Python declaration.

Each schema module (`xplane.schema`, `hlo.schema`) declares only the messages and
fields this tool reads, with their upstream field numbers; that declaration is the
one source of truth. No generated code is checked in and no build step is needed.

A field is `(name, number, type)` or `(name, number, type, "repeated")`. `type` is a
scalar (`int64`, `uint64`, `int32`, `uint32`, `bool`, `double`, `float`, `string`,
`bytes`), the name of another message in the same schema, or `map<K,V>`.
Enums are declared as `int32`: same wire format, and unknown values stay readable.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, TypeAlias, Union

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# (name, number, type) or (name, number, type, "repeated")
FieldSpec: TypeAlias = Union[tuple[str, int, str], tuple[str, int, str, str]]
# A message class or message built here: its fields exist only at run time, so the
# checker cannot know them and every field access stays open.
DynamicMessage: TypeAlias = Any

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _FDP.TYPE_DOUBLE, "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64, "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32, "uint32": _FDP.TYPE_UINT32,
    "sint64": _FDP.TYPE_SINT64, "fixed64": _FDP.TYPE_FIXED64,
    "bool": _FDP.TYPE_BOOL, "string": _FDP.TYPE_STRING, "bytes": _FDP.TYPE_BYTES,
}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _set_type(field: descriptor_pb2.FieldDescriptorProto, type_name: str, package: str) -> None:
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    else:
        field.type = _FDP.TYPE_MESSAGE
        field.type_name = f".{package}.{type_name}"


def _add_message(file: descriptor_pb2.FileDescriptorProto, package: str, name: str,
                 fields: Sequence[FieldSpec]) -> None:
    msg = file.message_type.add(name=name)
    for spec in fields:
        fname, number, ftype = spec[0], spec[1], spec[2]
        repeated = len(spec) == 4 and spec[3] == "repeated"
        field = msg.field.add(name=fname, number=number)
        if ftype.startswith("map<"):
            key_type, value_type = (t.strip() for t in ftype[4:-1].split(","))
            entry = msg.nested_type.add(name=_camel(fname) + "Entry")
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL)
            _set_type(key, key_type, package)
            value = entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL)
            _set_type(value, value_type, package)
            field.label = _FDP.LABEL_REPEATED
            field.type = _FDP.TYPE_MESSAGE
            field.type_name = f".{package}.{name}.{entry.name}"
            continue
        field.label = _FDP.LABEL_REPEATED if repeated else _FDP.LABEL_OPTIONAL
        _set_type(field, ftype, package)


def build_messages(file_name: str, package: str,
                   messages: Mapping[str, Sequence[FieldSpec]]) -> dict[str, DynamicMessage]:
    """Return message classes by name for a schema, in a private descriptor pool."""
    file = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
    for name, fields in messages.items():
        _add_message(file, package, name, fields)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name in messages
    }
