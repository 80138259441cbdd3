"""What one HLO instruction message states, rendered as HLO text prints it (the proto reader's part
for each distinct instruction; `proto` reads the module around them).

Values are rendered the way HLO text prints them, so both readers give the same model.
"""

from __future__ import annotations

from math import prod
from typing import Any, Iterable

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import schema as schema
from ...base.errors import InputError
from .model import ConvDims, DotDims, Instruction, Metadata, Shape
from .syntax import make_layout
from ..wire.protobuild import DynamicMessage
from .text import FrameTables, backend_config_attributes, frame_source
from .replica_groups import Groups, check_groups, iota_groups, mesh_groups

Attribute = tuple[str, str]
_LAST_TILE_DIM_NAMES = {0: "replicated", 1: "maximal", 3: "other", 4: "manual", 5: "unknown",
                        6: "unreduced"}


def _shape(proto: DynamicMessage) -> Shape:
    """The shape a ShapeProto states; one Shape per distinct encoding (a program repeats a few shapes)."""
    key = proto.SerializeToString()
    found = _SHAPES.get(key)
    if found is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        found = _SHAPES[key] = _read_shape(proto)
    return found


_SHAPES: dict[bytes, Shape] = {}
_MAX_SHAPES = 1 << 14


def _read_shape(proto: DynamicMessage) -> Shape:
    dtype = schema.PRIMITIVE_TYPES.get(proto.element_type, f"type{proto.element_type}")
    if dtype == "tuple":
        return Shape(dtype="tuple", tuple_shapes=tuple(_read_shape(s) for s in proto.tuple_shapes))
    dims = tuple(proto.dimensions)
    layout = proto.layout
    # A combined tile dimension (printed `*`) is stored as INT64_MIN; both readers say -1.
    tiles = tuple(tuple(d if d >= 0 else -1 for d in t.dimensions) for t in layout.tiles)
    return Shape(dtype=dtype, dims=dims,
                 layout=make_layout(len(dims), tuple(layout.minor_to_major), tiles,
                                    layout.memory_space, proto.HasField("layout")),
                 tiles=tiles, memory_space=layout.memory_space)


def _join(values: Iterable[object]) -> str:
    return ",".join(str(v) for v in values)


def render_sharding(proto: DynamicMessage) -> str:
    """An OpSharding as HLO text prints it, e.g. `{devices=[2,4]<=[8]}`."""
    kind = proto.type
    if kind == schema.SHARDING_TUPLE:
        return "{" + ", ".join(render_sharding(s) for s in proto.tuple_shardings) + "}"
    if kind in (schema.SHARDING_REPLICATED, schema.SHARDING_MANUAL, schema.SHARDING_UNKNOWN,
                schema.SHARDING_UNREDUCED):
        return "{" + _LAST_TILE_DIM_NAMES[kind] + "}"
    if kind == schema.SHARDING_MAXIMAL:
        return "{maximal device=" + str(proto.tile_assignment_devices[0]) + "}"
    text = "{devices=[" + _join(proto.tile_assignment_dimensions) + "]"
    if proto.iota_reshape_dims:
        text += "<=[" + _join(proto.iota_reshape_dims) + "]"
        if len(proto.iota_reshape_dims) > 1:
            text += "T(" + _join(proto.iota_transpose_perm) + ")"
    else:
        text += _join(proto.tile_assignment_devices)
    if proto.replicate_on_last_tile_dim:
        text += " last_tile_dim_replicate"
    if proto.last_tile_dims:
        text += " last_tile_dims={" + ", ".join(_LAST_TILE_DIM_NAMES.get(t, str(t))
                                                for t in proto.last_tile_dims) + "}"
    return text + "}"


def _iota(proto: DynamicMessage) -> Groups:
    return iota_groups(proto.num_replica_groups, proto.num_devices_per_group,
                       tuple(proto.iota_reshape_dims), tuple(proto.iota_transpose_perm))


def _mesh(proto: DynamicMessage) -> Groups:
    axes = [(a.name, a.size) for a in proto.mesh.axes]
    if not axes:
        return tuple((d,) for d in proto.mesh.device_ids)  # a maximal mesh: one device
    refs = []
    for ref in proto.axes:
        if not 0 <= ref.mesh_axis_index < len(axes):
            raise InputError(f"mesh replica groups: axis index {ref.mesh_axis_index} of a mesh of {len(axes)} axes")
        name = axes[ref.mesh_axis_index][0]
        sub = ref.sub_axis_info
        refs.append((name, sub.pre_size, sub.size) if ref.HasField("sub_axis_info") else name)
    ids = None
    if proto.mesh.device_ids:
        sizes = [s for _, s in axes]
        if len(proto.mesh.device_ids) != prod(sizes):
            raise InputError(f"mesh device_ids: {len(proto.mesh.device_ids)} ids for a mesh of {sizes}")
        ids = np.array(proto.mesh.device_ids).reshape(sizes)
    return mesh_groups(axes, refs, ids)


def _replica_groups(proto: DynamicMessage) -> Groups | None:
    if proto.HasField("mesh_axes_replica_group_list"):
        groups = _mesh(proto.mesh_axes_replica_group_list)
    elif proto.HasField("iota_collective_device_list"):
        groups = _iota(proto.iota_collective_device_list)
    elif proto.collective_device_list.HasField("iota_replica_group_list"):
        groups = _iota(proto.collective_device_list.iota_replica_group_list)
    else:
        listed = proto.collective_device_list.replica_groups or proto.replica_groups
        groups = tuple(tuple(g.replica_ids) for g in listed)
    return check_groups(groups) or None


def _conv(proto: DynamicMessage) -> ConvDims:
    d = proto.convolution_dimension_numbers
    window = proto.window.dimensions
    return ConvDims(
        input_batch=d.input_batch_dimension, input_feature=d.input_feature_dimension,
        input_spatial=tuple(d.input_spatial_dimensions),
        kernel_input_feature=d.kernel_input_feature_dimension,
        kernel_output_feature=d.kernel_output_feature_dimension,
        kernel_spatial=tuple(d.kernel_spatial_dimensions),
        output_batch=d.output_batch_dimension, output_feature=d.output_feature_dimension,
        output_spatial=tuple(d.output_spatial_dimensions),
        window_size=tuple(w.size for w in window),
        window_stride=tuple(w.stride or 1 for w in window),
        lhs_dilation=tuple(w.base_dilation or 1 for w in window),
        rhs_dilation=tuple(w.window_dilation or 1 for w in window),
        feature_group_count=proto.feature_group_count or 1,
        batch_group_count=proto.batch_group_count or 1)


def _window_text(window: DynamicMessage) -> str:
    """A Window as HLO text prints it: `{size=3x3 stride=2x2 pad=0_1x0_1 ...}`."""
    dims = list(window.dimensions)

    def part(key: str, values: list[int], default: int) -> str:
        return f" {key}=" + "x".join(str(v) for v in values) if any(v != default for v in values) else ""

    text = "size=" + "x".join(str(w.size) for w in dims)
    text += part("stride", [w.stride or 1 for w in dims], 1)
    if any(w.padding_low or w.padding_high for w in dims):
        text += " pad=" + "x".join(f"{w.padding_low}_{w.padding_high}" for w in dims)
    text += part("lhs_dilate", [w.base_dilation or 1 for w in dims], 1)
    text += part("rhs_dilate", [w.window_dilation or 1 for w in dims], 1)
    text += part("rhs_reversal", [int(w.window_reversal) for w in dims], 0)
    return "{" + text + "}"


def _padding_text(config: DynamicMessage) -> str:
    dims = list(config.dimensions)
    interior = any(d.interior_padding for d in dims)
    return "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}"
                    + (f"_{d.interior_padding}" if interior else "") for d in dims)


# dtype -> (LiteralProto field, numpy element type); packed fields are little-endian bytes.
_LITERAL_FIELDS: dict[str, tuple[str, npt.DTypeLike]] = {
    "pred": ("preds", np.bool_), "s32": ("s32s", np.int32), "s64": ("s64s", np.int64),
    "u32": ("u32s", np.uint32), "u64": ("u64s", np.uint64), "f32": ("f32s", np.float32),
    "f64": ("f64s", np.float64), "s8": ("s8s", "<i1"), "u8": ("u8s", "<u1"),
    "s16": ("s16s", "<i2"), "u16": ("u16s", "<u2"), "f16": ("f16s", "<f2"),
    "bf16": ("bf16s", ml_dtypes.bfloat16), "f8e5m2": ("f8e5m2s", ml_dtypes.float8_e5m2),
    "f8e4m3fn": ("f8e4m3fns", ml_dtypes.float8_e4m3fn),
    "f8e4m3b11fnuz": ("f8e4m3b11fnuzs", ml_dtypes.float8_e4m3b11fnuz),
    "f8e5m2fnuz": ("f8e5m2fnuzs", ml_dtypes.float8_e5m2fnuz),
    "f8e4m3fnuz": ("f8e4m3fnuzs", ml_dtypes.float8_e4m3fnuz),
    "f8e4m3": ("f8e4m3s", ml_dtypes.float8_e4m3), "f8e3m4": ("f8e3m4s", ml_dtypes.float8_e3m4),
}
_INLINE_ELEMENTS = 10  # XLA prints larger constants as `{...}`


def _float_text(value: float, dtype: str) -> str:
    """XLA's RoundTripFpToString: f32/f64 try digits10 then max_digits10; others max_digits10."""
    if dtype == "f32":
        short = "%.6g" % value
        return short if np.float32(float(short)) == np.float32(value) else "%.9g" % value
    if dtype == "f64":
        short = "%.15g" % value
        return short if float(short) == value else "%.17g" % value
    mantissa = ml_dtypes.finfo(_LITERAL_FIELDS[dtype][1]).nmant + 1  # type: ignore[no-untyped-call]  # ml_dtypes.finfo is unannotated
    return "%.*g" % (int(np.ceil(1 + mantissa * np.log10(2))), value)


def _element_text(value: Any, dtype: str) -> str:
    if dtype == "pred":
        return "true" if value else "false"
    if dtype[0] == "f" or dtype == "bf16":
        return _float_text(float(value), dtype)
    return str(int(value))


def _literal_text(literal: DynamicMessage) -> str | None:
    """A constant's value as HLO text prints it (scalars and vectors up to 10 elements)."""
    shape = _shape(literal.shape)
    spec = _LITERAL_FIELDS.get(shape.dtype)
    if spec is None or len(shape.dims) > 1:
        return None
    if shape.elements > _INLINE_ELEMENTS:
        return "{...}"
    raw = getattr(literal, spec[0])
    values = np.frombuffer(raw, dtype=spec[1]) if isinstance(raw, bytes) else list(raw)
    if len(values) != shape.elements:
        return None
    texts = [_element_text(v, shape.dtype) for v in values]
    return texts[0] if not shape.dims else "{" + ", ".join(texts) + "}"


# xla.FftType, xla.PrecisionConfig.Precision and .Algorithm as HLO text prints them.
_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}
_PRECISIONS = {0: "default", 1: "high", 2: "highest"}
_ALGORITHMS = {1: "dot_any_f8_any_f8_f32", 2: "dot_any_f8_any_f8_f32_fast_accum", 3: "dot_f16_f16_f16",
               4: "dot_f16_f16_f32", 5: "dot_bf16_bf16_bf16", 6: "dot_bf16_bf16_f32", 7: "dot_bf16_bf16_f32_x3",
               8: "dot_bf16_bf16_f32_x6", 9: "dot_tf32_tf32_f32", 10: "dot_tf32_tf32_f32_x3",
               11: "dot_f32_f32_f32", 12: "dot_f64_f64_f64", 13: "dot_bf16_bf16_f32_x9"}


# Names of the called computations by opcode, in `called_computation_ids` order.
_CALLED_NAMES = {"while": ("body", "condition"), "fusion": ("calls",),
                 "select-and-scatter": ("select", "scatter"), "async-start": ("calls",),
                 "call": ("to_apply",)}


def called_attributes(opcode: str, called: tuple[str, ...]) -> list[Attribute]:
    if not called:
        return []
    if opcode == "conditional":
        return [("branch_computations", "{" + ", ".join(called) + "}")]
    if opcode == "custom-call":
        return [("called_computations", "{" + ", ".join(called) + "}")]
    keys = _CALLED_NAMES.get(opcode, ("to_apply",))
    return list(zip(keys, called))


def _attributes(p: DynamicMessage, config: str) -> tuple[list[Attribute], list[Attribute]]:
    """The attributes HLO text prints before the called computations' names, and after them."""
    out: list[Attribute] = []
    if p.opcode == "parameter":
        out.append(("parameter_number", str(p.parameter_number)))
    literal = _literal_text(p.literal) if p.HasField("literal") else None
    if literal is not None:
        out.append(("literal", literal))
    if p.opcode == "get-tuple-element":
        out.append(("index", str(p.tuple_index)))
    if p.comparison_direction:
        out.append(("direction", p.comparison_direction))
    if p.HasField("window"):
        out.append(("window", _window_text(p.window)))
    if p.opcode == "pad":
        out.append(("padding", _padding_text(p.padding_config)))
    if p.dynamic_slice_sizes:
        out.append(("dynamic_slice_sizes", "{" + _join(p.dynamic_slice_sizes) + "}"))
    if p.gather_slice_sizes:
        out.append(("slice_sizes", "{" + _join(p.gather_slice_sizes) + "}"))
    if p.opcode == "topk":
        out.append(("k", str(p.k)))
    if p.opcode == "fft":
        out.append(("fft_type", _FFT_TYPES.get(p.fft_type, str(p.fft_type))))
        out.append(("fft_length", "{" + _join(p.fft_length) + "}"))
    if p.HasField("precision_config"):
        precision = p.precision_config
        if any(precision.operand_precision):
            out.append(("operand_precision",
                        "{" + ",".join(_PRECISIONS.get(v, str(v)) for v in precision.operand_precision) + "}"))
        if precision.algorithm:
            out.append(("algorithm", _ALGORITHMS.get(precision.algorithm, str(precision.algorithm))))
    after = [("stack_frame_id", str(p.metadata.stack_frame_id))] if p.metadata.stack_frame_id else []
    return out, after + backend_config_attributes(config)


def named_template(p: DynamicMessage, tables: FrameTables, name: str, comp: str,
                    origin: str) -> tuple[Instruction, tuple[Attribute, ...], tuple[Attribute, ...]]:
    """`_template`, with an error in its fields naming where it sits (`name`: the message's own,
    which the reader clears before it reads)."""
    try:
        return _template(p, tables)
    except InputError as exc:
        raise InputError(f"HLO instruction {name!r} in computation {comp!r}: {exc.message}",
                         path=origin or None) from None


def _template(p: DynamicMessage, tables: FrameTables | None = None
              ) -> tuple[Instruction, tuple[Attribute, ...], tuple[Attribute, ...]]:
    """The instruction a message less its names, ids, operands and callees states, and its attributes
    before and after where the callees' names go."""
    config = p.backend_config.decode("utf-8", errors="replace")
    before, after = _attributes(p, config)
    dot = None
    if p.opcode == "dot" or p.HasField("dot_dimension_numbers"):
        d = p.dot_dimension_numbers
        dot = DotDims(tuple(d.lhs_batch_dimensions), tuple(d.rhs_batch_dimensions),
                      tuple(d.lhs_contracting_dimensions), tuple(d.rhs_contracting_dimensions))
    m = p.metadata
    source_file, source_line = m.source_file, m.source_line
    if not source_file and m.stack_frame_id and tables:  # the source its stack frame names
        found, line = frame_source(m.stack_frame_id, tables)
        if found:
            source_file, source_line = found, line
    return Instruction(
        name="", opcode=p.opcode, shape=_shape(p.shape),
        fusion_kind=p.fusion_kind, dot=dot,
        # cuDNN convolution custom calls carry dimension numbers too.
        conv=_conv(p) if p.opcode == "convolution" or p.HasField("convolution_dimension_numbers") else None,
        replica_groups=_replica_groups(p),
        channel_id=p.channel_id if p.channel_id > 0 else None,
        use_global_device_ids=p.use_global_device_ids,
        dimensions=tuple(p.dimensions),
        slice=tuple((s.start, s.limit, s.stride or 1) for s in p.slice_dimensions),
        source_target_pairs=tuple((s.source, s.target) for s in p.source_target_pairs),
        custom_call_target=p.custom_call_target, backend_config=config,
        sharding=render_sharding(p.sharding) if p.HasField("sharding") else "",
        metadata=Metadata(op_type=m.op_type, op_name=m.op_name, source_file=source_file, source_line=source_line),
        attributes=(*before, *after)), tuple(before), tuple(after)
