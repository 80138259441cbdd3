"""Each program's device memory from its buffer assignment [buffer assignment]: the peak as XProf's
memory viewer computes it, where in the schedule it is reached, what is live then (with the
instruction and source line that made each buffer), and the headroom against the device's memory
(catalog, the trace's device stats, or the user's hardware file). Where the workload states a
transformer's size, the planner's memory breakdown [plan] stands beside the measured one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..costmodel.chips.hardware import Hardware
from ..base.errors import InputError
from ..base.options import DEFAULTS
from ..parsers.hlo.buffer_assignment import BufferAssignment, LogicalBuffer, MemoryUsage, memory_usage
from ..parsers.hlo.model import Instruction, Module, Shape

SOURCE = "buffer assignment"
TEXT_SOURCE = "buffer assignment text"  # no heap trace: temporaries at the size XLA reserved for them


def program_memory(buffers: Mapping[int, BufferAssignment], modules: Mapping[int, Module],
                   names: Mapping[int, str], hw: Hardware, config: Mapping[str, Any] | None = None,
                   warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per program with a buffer assignment, the largest peak first."""
    rows = []
    for pid, assignment in buffers.items():
        try:
            usage = memory_usage(assignment)
        except (ValueError, KeyError) as exc:  # a trace that contradicts itself costs only its program its row
            if warnings is not None:
                warnings.append(f"buffer assignment of program {pid} not replayed: {exc}")
            continue
        module = modules.get(pid)
        rows.append(_row(pid, names.get(pid) or (module.name if module else str(pid)), usage, module, hw,
                         assignment.traced))
    rows.sort(key=lambda r: -r["peak_bytes"])
    if rows and config:
        plan = planned_memory(config)
        if plan is not None:
            rows[0]["plan"] = plan
    return rows


def _row(pid: int, name: str, usage: MemoryUsage, module: Module | None, hw: Hardware,
         traced: bool) -> dict[str, Any]:
    capacity = hw.hbm_bytes
    by_id = {i.id: i for _, i in module.instructions()} if module is not None else {}
    row: dict[str, Any] = {
        "program_id": pid, "module": name, "source": SOURCE if traced else TEXT_SOURCE,
        "peak_bytes": usage.peak_bytes, "parameter_bytes": usage.parameter_bytes,
        "live_out_bytes": usage.live_out_bytes, "temporary_bytes": usage.temporary_bytes,
        "indefinite_bytes": usage.indefinite_bytes, "allocated_bytes": usage.allocated_bytes,
        "peak_at": _peak_at(usage, module),
        "largest": [_buffer(b, group, by_id, module) for b, group in usage.live_at_peak[:DEFAULTS.memory_buffers]],
        "device_memory_bytes": None, "device_memory_source": None, "headroom_bytes": None, "peak_share": None,
    }
    if capacity is not None and capacity.value > 0:
        row.update(device_memory_bytes=capacity.value, device_memory_source=capacity.source,
                   headroom_bytes=capacity.value - usage.peak_bytes, peak_share=usage.peak_bytes / capacity.value)
    return row


def _peak_at(usage: MemoryUsage, module: Module | None) -> dict[str, Any]:
    """Where the peak is reached: the heap event, its instruction and that instruction's place in its
    computation's schedule."""
    # No heap event reaches the peak when the program puts nothing on the heap: null, not the reader's -1.
    event = usage.peak_event if usage.peak_event >= 0 else None
    out: dict[str, Any] = {"event": event, "events": usage.events, "instruction": usage.peak_instruction,
                           "computation": None, "position": None, "scheduled": None, "source_line": None}
    found = module.find(usage.peak_instruction) if module is not None and usage.peak_instruction else None
    if found is not None:
        computation, instr = found
        order = module.schedule.get(computation.name) if module is not None else None
        names = list(order) if order else [i.name for i in computation.instructions]
        out.update(computation=computation.name, source_line=instr.metadata.source or None,
                   position=names.index(instr.name) + 1 if instr.name in names else None, scheduled=len(names))
    return out


def _buffer(buffer: LogicalBuffer, group: str, by_id: Mapping[int, Instruction],
            module: Module | None) -> dict[str, Any]:
    """A buffer live at the peak, named by the instruction that defined it (the proto names it by id,
    its name field left empty by recent XLA; the text by name)."""
    instr = by_id.get(buffer.instruction_id)
    if instr is None and module is not None and buffer.instruction and (found := module.find(buffer.instruction)):
        instr = found[1]
    shape = _element(instr.shape, buffer.shape_index) if instr is not None else None
    label = buffer.label if buffer.instruction or instr is None else replace(buffer, instruction=instr.name).label
    return {"instruction": label, "bytes": buffer.size, "kind": group,
            "opcode": instr.opcode if instr is not None else None,
            "shape": str(shape) if shape is not None else None,
            "op_name": (instr.metadata.op_name or None) if instr is not None else None,
            "source_line": (instr.metadata.source or None) if instr is not None else None}


def _element(shape: Shape, index: tuple[int, ...]) -> Shape | None:
    for i in index:
        if not shape.is_tuple or i >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def planned_memory(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The planner's memory per device for the workload's stated transformer [plan]: parameters and
    optimizer state (Adam's two moments), and the activations one step saves for the backward pass
    (no rematerialisation unless the config says how many arrays a layer keeps). None when the
    config states no transformer or is not a training step."""
    from ..costmodel.planner.train import ADAM_BYTES_PER_PARAM
    from ..costmodel.planner.transformer import activation_bytes_per_token, dtype_bytes, param_breakdown
    from ..costmodel.planner.workload import _model, split_degrees, step_kind
    from ..costmodel.network.mesh_layout import parse_mesh

    if "d_model" not in config or step_kind(dict(config)) != "train":
        return None
    try:
        cfg = _model(dict(config))
        mesh = parse_mesh(config.get("mesh"), error=InputError)
        sharding = str(config.get("sharding") or "none").lower()
        x, y = split_degrees(sharding, mesh)
        dtype = _dtype(config.get("dtype") or "bf16")
        param_dtype = _dtype(config.get("param_dtype") or config.get("dtype") or "bf16")
        n = param_breakdown(cfg)["total"]
        weight_shards = x * y if "fsdp" in sharding else y
        moments = 2 * dtype_bytes(param_dtype) if config.get("optimizer") == "adam" else ADAM_BYTES_PER_PARAM
        tokens = int(config["batch"]) * int(config["seq"])
        remat = config.get("checkpoints_per_layer")
        activations = tokens / x * activation_bytes_per_token(cfg, None if remat is None else float(remat), dtype)
    except (InputError, KeyError, ValueError, TypeError):
        return None
    params = n * dtype_bytes(param_dtype) / weight_shards
    optimizer = n * moments / weight_shards
    return {"source": "plan", "params": n, "parameter_bytes": params, "optimizer_bytes": optimizer,
            "activation_bytes": activations, "total_bytes": params + optimizer + activations,
            "note": "the book's memory math for this configuration, per device: parameters and optimizer state "
                    "are held across steps (entry parameters), the saved activations are temporaries "
                    + ("(no rematerialisation)" if remat is None else f"({remat} arrays saved per layer)")}


def _dtype(name: object) -> str:
    """A workload's dtype name as the planner spells it (`bfloat16` -> `bf16`)."""
    text = str(name).lower()
    return {"bfloat16": "bf16", "float32": "f32", "float16": "f16", "float64": "f64"}.get(text, text)
