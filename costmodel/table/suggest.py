"""A concrete thing to try for a flagged op, tied to the rule that flagged it."""

from __future__ import annotations

from ..units import intensity
from .record import OpRecord


def suggest(op: OpRecord, ridge: float | None, kind: str = "") -> str:
    """One suggestion from the op's verdict and reasons (plain text); `kind` is the chip kind."""
    reasons = " ".join(op.reasons).lower()
    bound = op.bound_by
    opcode = op.opcode
    if kind == "cpu" and op.comm_bytes:
        return ("On simulated CPU devices a collective waits at a rendezvous until every device arrives, so "
                "its time is mostly the other devices' work on the shared cores. Judge communication on the "
                "real chip: `audit run --target tpu-...`, or profile on the accelerator.")
    if "opaque" in reasons or bound == "unknown":
        return ("No cost model for this op: check it in the trace viewer, or give it a cost "
                "estimate (Pallas: pl.CostEstimate) so it can be audited.")
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
        return "Already compute-bound: gains need fewer FLOPs (algorithm, remat policy) or a lower-precision dtype."
    return "Inspect this op in the trace viewer: it is far from its expected time."
