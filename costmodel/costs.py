"""What the cost model says of an op: what it costs (`OpCost`) and how long it should take (`Expectation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from .network.collectives import CollectiveTime

Bound = Literal["compute", "memory", "collective", "latency", "unknown"]
"""What limits an op: its FLOPs, its bytes, its collective, a fixed latency, or nothing known."""
BOUNDS: tuple[Bound, ...] = get_args(Bound)
Origin = Literal["model", "trace", "xla", "unknown"]
"""Where an op's FLOPs or bytes came from: the cost model, the trace, XLA's cost analysis, or nowhere."""


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    """A collective as the program states it, and where it runs on the topology.

    `bytes` is the volume V of the book's formulas, as one device of the group sees it:
    the gathered result for all-gather, the input for reduce-scatter and all-reduce,
    the local array for all-to-all, the sent buffer for collective-permute.
    """

    kind: str
    bytes: float
    group_size: int
    groups: tuple[tuple[int, ...], ...] = ()
    axes: tuple[str, ...] = ()  # mesh or physical axes the group spans, when known
    hops: int | None = None
    wraparound: bool | None = None
    leaves_domain: bool = False  # crosses the ICI slice / NVLink domain
    note: str = ""
    fused: str = ""  # the fused computation that carries it ("" for a collective op of its own)


@dataclass(frozen=True, slots=True)
class AttentionProblem:
    """A fused attention call as its config states it: Q.K^T then softmax then P.V, per batch and head.

    `window` is (left, right) keys around each query's diagonal, -1 for no limit; `causal` keys come
    after the diagonal no further than it (top-left aligned, or bottom-right when `bottom_right`).
    `padded`: the valid lengths are runtime operands (padding masks, ragged `thd` rows, several
    segments per row), so the lengths here are the most each sequence can have; `segments` the most
    sequences one row of `q_len` positions may hold. `config` says what
    the problem was read from, for the reasons.
    """

    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    qk_dim: int
    v_dim: int
    # Which kernel: "forward"; "backward" (dQ, dK and dV); or one half of a split backward,
    # "backward dK dV" or "backward dQ".
    kernel: str = "forward"
    causal: bool = False
    bottom_right: bool = False
    window: tuple[int, int] = (-1, -1)
    padded: bool = False
    segments: int = 1  # sequences a row may hold (packed `thd` rows), at runtime boundaries
    config: str = ""

    @property
    def backward(self) -> bool:
        return self.kernel != "forward"


@dataclass(frozen=True, slots=True)
class OpCost:
    """Per-execution cost of one HLO op on one device.

    A value that could not be determined is None (never 0), and `reason` says why.
    `provenance` names where flops/bytes came from: model, trace, xla or unknown.
    """

    flops: float | None
    bytes_read: float | None
    bytes_written: float | None
    transcendentals: float | None = 0.0
    comm_bytes: float = 0.0
    dtype: str = ""
    provenance: Origin = "model"
    reason: str = ""
    collective: CollectiveInfo | None = None
    notes: tuple[str, ...] = ()
    # Bytes read from or written to host memory (`S(5)`: offloaded or pinned host buffers),
    # which cross the host link (PCIe or the chip's host interface), not HBM.
    host_bytes: float = 0.0
    # Dots and convolutions: the precision the program asks of the matrix units, as an
    # algorithm name (`dot_tf32_tf32_f32`) or the highest operand precision (`default`,
    # `high`, `highest`); chips.precision maps it to a peak. "" for every other op.
    precision: str = ""
    # Ops inside a while body run this many times per execution of the enclosing op
    # (None when the trip count is unknown); costs above are for one execution.
    trip_count: int | None = 1
    # Dots, GEMM calls and fusions around one: the matmul problem (batch, M, N, K) its FLOPs
    # come from, which sets tile and wave quantization (costmodel.achievable). None elsewhere.
    gemm: tuple[int, int, int, int] | None = None
    # Convolutions (HLO, cuDNN/MIOpen calls, a fusion around one): (batch, output spatial sizes, input
    # channels, output channels, kernel spatial sizes), so reasons speak of the convolution itself.
    convolution: tuple[int, tuple[int, ...], int, int, tuple[int, ...]] | None = None
    # Fused attention kernels: the problem their FLOPs come from, which sets the rate good attention
    # kernels reach (costmodel.attention). None elsewhere.
    attention: AttentionProblem | None = None
    # Set when only part of the cost is known (an opaque kernel's operand and result bytes):
    # why the expected time is a lower bound and not the roofline of the whole op.
    lower_bound: str = ""
    # Per cache level (name, bytes): how many of the op's bytes may be served by that level, by the
    # data's history in the schedule (costmodel.residency). None: no history known, so the working
    # set alone decides (an op priced on its own, as `audit calc` does).
    resident: tuple[tuple[str, float], ...] | None = None
    # Fusions with a tuple result: how many arrays it writes (each one more write stream to drain).
    outputs: int = 1
    # Scatters with a combiner (scatter-add), alone or fused: (element type, updates) of the
    # read-modify-write updates a GPU runs as atomics. None elsewhere, or where the indices are unique.
    atomics: tuple[str, float] | None = None
    # Loop fusions with a reduce inside: the most elements one output element's reduce adds one after
    # another (the loop emitter gives each output its own sequential loop). 0 elsewhere.
    serial_reduce: int = 0

    @property
    def bytes(self) -> float | None:
        if self.bytes_read is None or self.bytes_written is None:
            return None
        return self.bytes_read + self.bytes_written

    @property
    def modeled(self) -> bool:
        return self.provenance != "unknown"

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte read and written; None when either is unknown or it moves no bytes."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes


@dataclass(frozen=True, slots=True)
class Expectation:
    """How long one execution of an op should take on a chip, and what bounds it."""

    compute_s: float | None
    memory_s: float | None
    comm_s: float | None
    expected_s: float | None
    bound_by: Bound
    reasons: tuple[str, ...] = ()
    peak_flops_per_s: float | None = None
    peak_bytes_per_s: float | None = None
    # The memory level whose bandwidth judged the op: "L2", "Infinity Cache", "HBM", "DRAM"...
    memory_level: str = ""
    # The fixed per-op overhead included in `expected_s` (0 for an op that launches nothing).
    overhead_s: float = 0.0
    # A collective placed on the topology: its hops, links and the terms of its time.
    collective: CollectiveTime | None = None
    # The bytes `memory_level` moves in `memory_s` (all the op's bytes, or those that stream from
    # main memory when the rest can be in a cache).
    memory_bytes: float | None = None
