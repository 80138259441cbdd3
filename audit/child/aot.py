"""Compile a workload's step for a TPU topology this machine does not have, and predict it.

The child side (`python -P -m audit.child.aot`) asks libtpu for the topology's devices, builds
the workload over them with abstract arrays, compiles ahead of time (nothing executes)
and writes the optimized HLO, XLA's own cost and memory analyses and each device's
physical coordinates. The parent side costs that HLO on the target chip and topology.

    python -P -m audit.child.aot SCRIPT --target tpu-v5e:4x4 --out DIR [-- ARGS...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Sequence

from ..base.errors import InputError, UsageError

RESULT_NAME = "aot.json"
HLO_NAME = "module.after_optimizations.txt"
INSTALL_HINT = "install the TPU compiler with: pip install 'roofline-audit[tpu]'"


def libtpu_available() -> bool:
    return importlib.util.find_spec("libtpu") is not None


def topology_name(target: str) -> tuple[str, str]:
    """Split `tpu-v5e:4x4` into (catalog name, libtpu topology name `v5e:4x4`)."""
    from ..costmodel.chips.catalog import CATALOG
    from ..hardware_options import resolve_hardware

    if ":" not in target:
        raise UsageError(f"--target needs a topology, e.g. {target}:4x4")
    hw = resolve_hardware(target)
    if not hw.detection.libtpu_prefix:
        compilable = sorted(name for name, chip in CATALOG.items() if chip.detection.libtpu_prefix)
        raise UsageError(f"--target {target}: only TPU targets can be compiled ahead of time "
                         f"({', '.join(compilable)})")
    shape = "x".join(str(d) for d in hw.topology)
    return hw.name, f"{hw.detection.libtpu_prefix}:{shape}"


def check_target(target: str) -> None:
    """Fail before anything starts when the target cannot be compiled here."""
    topology_name(target)
    if not libtpu_available():
        raise InputError(f"--target {target} needs libtpu to compile for TPU", hint=INSTALL_HINT)


def _memory(compiled: Any) -> dict[str, Any]:
    stats = compiled.memory_analysis()
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes")
    return {f: int(getattr(stats, f, 0) or 0) for f in fields}


def compile_for_target(script: Path, argv: Sequence[str], target: str, out: Path) -> dict[str, Any]:
    """Build and compile the workload for `target`; write the HLO and a JSON record to `out`."""
    import jax
    from jax.experimental import topologies

    from ..workload_api import load_workload

    chip, topo_name = topology_name(target)
    try:
        topo = topologies.get_topology_desc(platform="tpu", topology_name=topo_name)
    except Exception as exc:  # libtpu refuses a shape its chip does not come in: bad input, not the workload
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"--target {target}: libtpu has no {topo_name} slice ({said})") from None
    devices: list[Any] = list(topo.devices)  # jaxlib's stubs leave Device's attributes unnamed
    wl, _ = load_workload(script, argv, devices=devices, aot=True)
    lowered = wl.jitted().lower(*wl.args, **wl.kwargs)
    compiled = lowered.compile()
    out.mkdir(parents=True, exist_ok=True)
    (out / HLO_NAME).write_text(compiled.as_text())
    cost = compiled.cost_analysis()
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    record = {
        "schema": "audit.aot/v1", "target": target, "chip": chip, "topology": topo_name,
        "workload": wl.name, "config": _jsonable(wl.config), "mesh": wl.describe_mesh(),
        "device_kind": devices[0].device_kind if devices else "",
        "devices": [{"id": int(d.id), "coords": [int(c) for c in getattr(d, "coords", ())],
                     "core_on_chip": int(getattr(d, "core_on_chip", 0))} for d in devices],
        # Replica groups in the HLO name partitions; partition p runs on this device id.
        "partition_devices": _partition_devices(wl, compiled),
        "cost_analysis": {k: float(v) for k, v in (cost or {}).items()},
        "memory": _memory(compiled),
        "jax_version": jax.__version__,
    }
    (out / RESULT_NAME).write_text(json.dumps(record, indent=1))
    return record


def _partition_devices(wl: Any, compiled: Any) -> list[int]:
    """Device ids in partition order: the mesh's device order, which jit's shardings follow."""
    if wl.mesh is not None:
        return [int(d.id) for d in wl.mesh.devices.flat]
    import jax

    for sharding in jax.tree_util.tree_leaves(compiled.input_shardings):
        assignment = getattr(sharding, "_device_assignment", None)
        if assignment:
            return [int(d.id) for d in assignment]
    return []


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="python -m audit.child.aot")
    parser.add_argument("script", type=Path)
    parser.add_argument("--target", required=True)
    parser.add_argument("--out", type=Path, required=True)
    ns = parser.parse_args(args[:split])
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        compile_for_target(ns.script, args[split + 1:], ns.target, ns.out)
    except (InputError, UsageError) as exc:
        sys.stderr.write(f"audit: error: {exc}\n")
        return exc.exit_code
    except Exception as exc:  # the workload (or its compile) failed: show why
        sys.stderr.write("".join(traceback.format_exception(exc)))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
