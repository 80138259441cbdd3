"""The subset of XLA's HLO protos this tool reads, with upstream field numbers.

Field numbers follow openxla/xla `xla/service/hlo.proto` and `xla/xla_data.proto`.
Enums (PrimitiveType, OpSharding.Type, ...) are declared as int32; `PRIMITIVE_TYPES`
maps PrimitiveType numbers to the dtype names used in HLO text.
"""

from __future__ import annotations

from ..wire.protobuild import FieldSpec, build_messages

# xla.PrimitiveType number -> HLO text dtype name (names as in hlo_model.DTYPE_BITS).
PRIMITIVE_TYPES: dict[int, str] = {
    1: "pred",
    30: "s1", 26: "s2", 21: "s4", 2: "s8", 3: "s16", 4: "s32", 5: "s64",
    31: "u1", 27: "u2", 22: "u4", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
    10: "f16", 11: "f32", 16: "bf16", 12: "f64",
    19: "f8e5m2", 28: "f8e4m3", 20: "f8e4m3fn", 23: "f8e4m3b11fnuz", 29: "f8e3m4",
    24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 32: "f4e2m1fn", 33: "f8e8m0fnu",
    15: "c64", 18: "c128",
    13: "tuple", 14: "opaque", 17: "token",
}

# xla.OpSharding.Type
SHARDING_REPLICATED, SHARDING_MAXIMAL, SHARDING_TUPLE, SHARDING_OTHER = 0, 1, 2, 3
SHARDING_MANUAL, SHARDING_UNKNOWN, SHARDING_UNREDUCED = 4, 5, 6

_MESSAGES: dict[str, list[FieldSpec]] = {
    "HloProto": [
        ("hlo_module", 1, "HloModuleProto"),
        ("buffer_assignment", 3, "bytes"),
    ],
    "HloModuleProto": [
        ("name", 1, "string"),
        ("entry_computation_name", 2, "string"),
        ("computations", 3, "HloComputationProto", "repeated"),
        ("id", 5, "int64"),
        ("entry_computation_id", 6, "int64"),
        ("schedule", 7, "HloScheduleProto"),
        ("input_output_alias", 8, "HloInputOutputAliasProto"),
        ("stack_frame_index", 17, "StackFrameIndexProto"),
    ],
    # Outputs that reuse a parameter's buffer (donated inputs updated in place).
    "HloInputOutputAliasProto": [
        ("entries", 1, "AliasEntryProto", "repeated"),
    ],
    "AliasEntryProto": [
        ("output_shape_index", 1, "int64", "repeated"),
        ("parameter_number", 2, "int64"),
        ("parameter_shape_index", 3, "int64", "repeated"),
    ],
    # The order a scheduled module runs each computation's instructions in (by computation id).
    "HloScheduleProto": [
        ("sequences", 1, "map<int64,InstructionSequence>"),
    ],
    "InstructionSequence": [
        ("instruction_ids", 1, "int64", "repeated"),
    ],
    "StackFrameIndexProto": [
        ("file_names", 1, "string", "repeated"),
        ("function_names", 2, "string", "repeated"),
        ("file_locations", 3, "FileLocation", "repeated"),
        ("stack_frames", 4, "StackFrame", "repeated"),
    ],
    "FileLocation": [
        ("file_name_id", 1, "int32"),
        ("function_name_id", 2, "int32"),
        ("line", 3, "int32"),
        ("column", 4, "int32"),
    ],
    "StackFrame": [
        ("file_location_id", 1, "int32"),
        ("parent_frame_id", 2, "int32"),
    ],
    "HloComputationProto": [
        ("name", 1, "string"),
        ("instructions", 2, "HloInstructionProto", "repeated"),
        ("id", 5, "int64"),
        ("root_id", 6, "int64"),
        ("is_fusion_computation", 7, "bool"),
        ("execution_thread", 8, "string"),
    ],
    "HloInstructionProto": [
        ("name", 1, "string"),
        ("opcode", 2, "string"),
        ("shape", 3, "ShapeProto"),
        ("metadata", 7, "OpMetadata"),
        ("literal", 8, "LiteralProto"),
        ("parameter_number", 9, "int64"),
        ("fusion_kind", 11, "string"),
        ("tuple_index", 13, "int64"),
        ("dimensions", 14, "int64", "repeated"),
        ("window", 15, "Window"),
        ("convolution_dimension_numbers", 16, "ConvolutionDimensionNumbers"),
        ("slice_dimensions", 17, "SliceDimensions", "repeated"),
        ("dynamic_slice_sizes", 20, "int64", "repeated"),
        ("padding_config", 21, "PaddingConfig"),
        ("channel_id", 26, "int64"),
        ("custom_call_target", 28, "string"),
        ("dot_dimension_numbers", 30, "DotDimensionNumbers"),
        ("fft_type", 31, "int32"),
        ("fft_length", 32, "int64", "repeated"),
        ("gather_slice_sizes", 34, "int64", "repeated"),
        ("id", 35, "int64"),
        ("operand_ids", 36, "int64", "repeated"),
        ("control_predecessor_ids", 37, "int64", "repeated"),
        ("called_computation_ids", 38, "int64", "repeated"),
        ("sharding", 40, "OpSharding"),
        ("backend_config", 43, "bytes"),
        ("replica_groups", 49, "ReplicaGroup", "repeated"),
        ("feature_group_count", 50, "int64"),
        ("precision_config", 51, "PrecisionConfig"),
        ("source_target_pairs", 52, "SourceTarget", "repeated"),
        ("batch_group_count", 58, "int64"),
        ("comparison_direction", 63, "string"),
        ("use_global_device_ids", 71, "bool"),
        ("async_execution_thread", 79, "string"),
        ("k", 81, "int64"),
        ("collective_device_list", 87, "CollectiveDeviceListProto"),
        # Newer XLA (jaxlib 0.10) writes the compact forms directly on the instruction;
        # numbers verified by decoding jaxlib's own serialized modules.
        ("iota_collective_device_list", 92, "IotaReplicaGroupListProto"),
        ("mesh_axes_replica_group_list", 93, "MeshAxesReplicaGroupListProto"),
    ],
    "LiteralProto": [
        ("shape", 1, "ShapeProto"),
        ("preds", 2, "bool", "repeated"),
        ("u8s", 3, "bytes"),
        ("s32s", 4, "int32", "repeated"),
        ("s64s", 5, "int64", "repeated"),
        ("u32s", 6, "uint32", "repeated"),
        ("u64s", 7, "uint64", "repeated"),
        ("f32s", 8, "float", "repeated"),
        ("f64s", 9, "double", "repeated"),
        ("f16s", 11, "bytes"),
        ("bf16s", 13, "bytes"),
        ("s8s", 15, "bytes"),
        ("u16s", 16, "bytes"),
        ("s16s", 17, "bytes"),
        ("f8e5m2s", 19, "bytes"),
        ("f8e4m3fns", 20, "bytes"),
        ("f8e4m3b11fnuzs", 23, "bytes"),
        ("f8e5m2fnuzs", 24, "bytes"),
        ("f8e4m3fnuzs", 25, "bytes"),
        ("f8e4m3s", 28, "bytes"),
        ("f8e3m4s", 29, "bytes"),
    ],
    "PrecisionConfig": [
        ("operand_precision", 1, "int32", "repeated"),
        ("algorithm", 2, "int32"),
    ],
    "SliceDimensions": [
        ("start", 1, "int64"),
        ("limit", 2, "int64"),
        ("stride", 3, "int64"),
    ],
    "ShapeProto": [
        ("element_type", 2, "int32"),
        ("dimensions", 3, "int64", "repeated"),
        ("tuple_shapes", 4, "ShapeProto", "repeated"),
        ("layout", 5, "LayoutProto"),
        ("is_dynamic_dimension", 6, "bool", "repeated"),
    ],
    "LayoutProto": [
        ("minor_to_major", 1, "int64", "repeated"),
        ("tiles", 6, "TileProto", "repeated"),
        ("element_size_in_bits", 7, "int64"),
        ("memory_space", 8, "int64"),
        ("tail_padding_alignment_in_elements", 16, "int64"),
    ],
    "TileProto": [
        ("dimensions", 1, "int64", "repeated"),
    ],
    "OpMetadata": [
        ("op_type", 1, "string"),
        ("op_name", 2, "string"),
        ("source_file", 3, "string"),
        ("source_line", 4, "int32"),
        ("deduplicated_name", 12, "string"),
        ("stack_frame_id", 15, "int32"),
        ("scheduling_name", 16, "string"),
    ],
    "DotDimensionNumbers": [
        ("lhs_contracting_dimensions", 1, "int64", "repeated"),
        ("rhs_contracting_dimensions", 2, "int64", "repeated"),
        ("lhs_batch_dimensions", 3, "int64", "repeated"),
        ("rhs_batch_dimensions", 4, "int64", "repeated"),
    ],
    "ConvolutionDimensionNumbers": [
        ("kernel_input_feature_dimension", 3, "int64"),
        ("kernel_output_feature_dimension", 4, "int64"),
        ("kernel_spatial_dimensions", 6, "int64", "repeated"),
        ("input_batch_dimension", 7, "int64"),
        ("input_feature_dimension", 8, "int64"),
        ("output_batch_dimension", 9, "int64"),
        ("output_feature_dimension", 10, "int64"),
        ("input_spatial_dimensions", 11, "int64", "repeated"),
        ("output_spatial_dimensions", 12, "int64", "repeated"),
    ],
    "Window": [
        ("dimensions", 1, "WindowDimension", "repeated"),
    ],
    "WindowDimension": [
        ("size", 1, "int64"),
        ("stride", 2, "int64"),
        ("padding_low", 3, "int64"),
        ("padding_high", 4, "int64"),
        ("window_dilation", 5, "int64"),
        ("base_dilation", 6, "int64"),
        ("window_reversal", 7, "bool"),
    ],
    "PaddingConfig": [
        ("dimensions", 1, "PaddingConfigDimension", "repeated"),
    ],
    "PaddingConfigDimension": [
        ("edge_padding_low", 1, "int64"),
        ("edge_padding_high", 2, "int64"),
        ("interior_padding", 3, "int64"),
    ],
    "OpSharding": [
        ("type", 1, "int32"),
        ("tile_assignment_dimensions", 3, "int64", "repeated"),
        ("tile_assignment_devices", 4, "int64", "repeated"),
        ("tuple_shardings", 5, "OpSharding", "repeated"),
        ("replicate_on_last_tile_dim", 6, "bool"),
        ("last_tile_dims", 8, "int32", "repeated"),
        ("iota_reshape_dims", 9, "int64", "repeated"),
        ("iota_transpose_perm", 10, "int32", "repeated"),
    ],
    "ReplicaGroup": [
        ("replica_ids", 1, "int64", "repeated"),
    ],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, "int64"),
        ("num_devices_per_group", 2, "int64"),
        ("iota_reshape_dims", 3, "int64", "repeated"),
        ("iota_transpose_perm", 4, "int32", "repeated"),
    ],
    "CollectiveDeviceListProto": [
        ("replica_groups", 1, "ReplicaGroup", "repeated"),
        ("iota_replica_group_list", 2, "IotaReplicaGroupListProto"),
    ],
    "MeshAxesReplicaGroupListProto": [
        ("mesh", 1, "MeshProto"),
        ("axes", 2, "AxisRefProto", "repeated"),
    ],
    "MeshProto": [
        ("axes", 1, "MeshAxis", "repeated"),
        ("device_ids", 2, "int64", "repeated"),
    ],
    "MeshAxis": [
        ("name", 1, "string"),
        ("size", 2, "int64"),
    ],
    "AxisRefProto": [
        ("mesh_axis_index", 1, "int64"),
        ("sub_axis_info", 2, "SubAxis"),
    ],
    "SubAxis": [
        ("pre_size", 1, "int64"),
        ("size", 2, "int64"),
    ],
    "SourceTarget": [
        ("source", 1, "int64"),
        ("target", 2, "int64"),
    ],
}

_CLASSES = build_messages("audit_hlo.proto", "xla", _MESSAGES)

HloProto = _CLASSES["HloProto"]
HloModuleProto = _CLASSES["HloModuleProto"]
HloComputationProto = _CLASSES["HloComputationProto"]
HloInstructionProto = _CLASSES["HloInstructionProto"]
ShapeProto = _CLASSES["ShapeProto"]
OpSharding = _CLASSES["OpSharding"]
CollectiveDeviceListProto = _CLASSES["CollectiveDeviceListProto"]
