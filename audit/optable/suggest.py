"""A concrete thing to try for a flagged op, matched to how far it is from its achievable time.

Far from the time good kernels of its kind take on the chip, the kernel is the gap (its tiling,
the layouts of its operands, its occupancy, its algorithm), not the work: fewer FLOPs would not
close it. Near that time, only less work closes it: fewer FLOPs or bytes, a lower precision,
fusion, shapes that pad less.
"""

from __future__ import annotations

from ..costmodel.units import factor, intensity
from .record import OpRecord

# At or above this share of its achievable time, an op is as fast as good kernels of its kind as
# far as the achievable figures can tell: real kernels reach 0.8-1.3x of them on the captures
# (XLA's own GEMMs and loop fusions on an H100 at 0.98-1.2x, small MI300X GEMMs at 1.07-1.31x).
NEAR_ACHIEVABLE = 0.8
_MATMUL_TARGETS = ("__cublas", "__hipblas", "__rocblas", "__cudnn", "__miopen", "te_fused_attn")
_MATMUL_WORDS = ("dot_general", "conv_general", "matmul", "einsum", "gemm", "dot_product_attention", "fmha")


def suggest(op: OpRecord, ridge: float | None, kind: str = "") -> str:
    """One suggestion from the op's verdict, reasons and distance from its achievable time (plain
    text); `kind` is the chip kind."""
    reasons = " ".join(op.reasons).lower()
    if kind == "cpu" and op.comm_bytes:
        return ("On simulated CPU devices a collective waits at a rendezvous until every device arrives, so "
                "its time is mostly the other devices' work on the shared cores. Judge communication on the "
                "real chip: `audit run --target tpu-...`, or profile on the accelerator.")
    if "opaque" in reasons or op.bound_by == "unknown":
        return ("No cost model for this op: check it in the trace viewer, or give it a cost "
                "estimate (Pallas: pl.CostEstimate) so it can be audited.")
    reach = op.achievable_fraction
    if reach is not None and reach < NEAR_ACHIEVABLE:
        return _kernel_gap(op, 1 / reach, kind)
    return _less_work(op, reasons, ridge)


def is_matmul(op: OpRecord) -> bool:
    """A matrix-unit op: a dot or convolution, a library GEMM, convolution or attention call, a fusion
    around one."""
    if op.opcode in ("dot", "convolution") or op.custom_call_target.startswith(_MATMUL_TARGETS):
        return True
    names = f"{op.name} {op.framework_op}".lower()
    return any(word in names for word in _MATMUL_WORDS)


def _kernel_gap(op: OpRecord, slower: float, kind: str) -> str:
    """Far from its achievable time: what in the kernel to look at, by what the op is."""
    ceiling = ("roofline time (no achievable figures for this chip)" if op.achievable_source.startswith("roofline")
               else "achievable time")
    head = f"At {factor(slower)} its {ceiling} the kernel, not the work, is the gap: look at "
    if op.bound_by == "collective":
        return (f"At {factor(slower)} its {ceiling} the transfer, not the bytes, is the gap: look at a wait on a "
                "slower device (the straggler view), another collective on its links, or many small messages.")
    if is_matmul(op):
        return head + _MATMUL_KERNEL.get(kind, _MATMUL_KERNEL["gpu"])
    if op.bound_by == "latency":
        return head + "too little parallel work (a small grid, a serial loop inside) or a wait on an earlier kernel."
    if op.bound_by == "memory":
        return head + ("its access pattern (transposed or strided layouts, a reduction along a short or non-minor "
                       "dimension, uncoalesced gathers) and its occupancy.")
    return head + "its parallelism and vectorisation (occupancy; transcendentals on special-function units)."


_MATMUL_KERNEL = {
    "gpu": ("the kernel XLA chose for this shape (a library call or a Triton fusion): a tiling that idles compute "
            "units, operand layouts that force a transpose, occupancy."),
    "tpu": "its MXU tiling (a Pallas kernel's block sizes) and operand layouts that need a transpose first.",
    "cpu": "the library XLA:CPU called for it (Eigen, oneDNN, XNNPACK) and how many threads ran it.",
}


def _less_work(op: OpRecord, reasons: str, ridge: float | None) -> str:
    """Near its achievable time: only less work (or cheaper work) makes it faster."""
    bound, opcode = op.bound_by, op.opcode
    if "pads to" in reasons:
        return "Pick dimensions that are multiples of the MXU/tensor-core tile (128 or 256) to avoid padding waste."
    if "f32" in reasons and ("mxu" in reasons or "matmul" in reasons or "tensor" in reasons):
        return ("Feed the matmul bf16 inputs and keep f32 accumulation "
                "(preferred_element_type=jnp.float32) to use the bf16 peak.")
    if bound == "collective":
        if op.overlapped is False:
            return ("Overlap this collective with compute (async collectives, or a collective matmul), "
                    "or shard so it moves fewer bytes.")
        return ("Move fewer bytes (shard along another axis, keep weights gathered across steps) or "
                "use an axis with wraparound / more links.")
    if bound == "latency":
        return "Batch small ops or collectives together; at this size fixed latency dominates the bandwidth term."
    if bound == "memory":
        if opcode in ("dot", "convolution") or "fusion" in op.category and "dot" in reasons:
            tip = f" (the ridge on this chip is ~{intensity(ridge)})" if ridge else ""
            return f"Raise arithmetic intensity: a larger per-device batch makes this matmul compute-bound{tip}."
        return "Fuse this op with its producer or consumer so its operands do not round-trip through memory."
    if bound == "compute":
        return ("As fast as good kernels of its kind: gains need fewer FLOPs (algorithm, remat policy) or a "
                "lower-precision dtype.")
    return "Inspect this op in the trace viewer: it is far from its expected time."
