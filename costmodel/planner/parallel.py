"""Compute- versus communication-bound for each training parallelism (book ch. 5).

The book models a layer as two matmuls In[B, D] . W_in[D, F] . W_out[F, D] and compares
matmul time with collective time; every strategy here reduces to a ratio
T_math / T_comms (above 1: compute-bound). alpha = C / W_ici is the chip's ICI
arithmetic intensity, n the number of mesh axes a collective uses, B tokens per pod,
N chips per pod. Pods talk over DCN with pure data parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .degrees import divisors

STRATEGIES = ("dp", "fsdp", "fsdp+tp", "tp")


@dataclass(frozen=True)
class Parallel:
    """The inputs of the closed forms: tokens per pod, chips per pod, pods, F, alpha, axes."""

    batch_per_pod: float
    chips_per_pod: int
    pods: int
    d_ff: int
    alpha: float
    axes: int
    dcn_alpha: float | None = None  # C / W_dcn per chip, FLOPs per byte
    # Tensor-parallel degrees the model and slice allow (None: any divisor of the pod, as the book).
    tp_allowed: tuple[int, ...] | None = None
    tp_rule: str = ""

    def tp_ok(self, degree: int) -> bool:
        return self.tp_allowed is None or degree in self.tp_allowed


@dataclass
class StrategyVerdict:
    """One strategy at this batch: its degrees, ratio, critical per-chip batch and bound."""

    strategy: str
    degrees: dict[str, int]
    ici_ratio: float
    dcn_ratio: float | None
    critical_batch_per_chip: float | None
    max_tp_degree: float | None = None
    x_opt: float | None = None
    x_range: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)
    feasible: bool = True  # False: the degrees cannot shard this model on this slice

    @property
    def ratio(self) -> float:
        return min(self.ici_ratio, self.dcn_ratio if self.dcn_ratio is not None else math.inf)

    @property
    def bound(self) -> str:
        return "compute" if self.ratio >= 1.0 else "communication"


def dcn_ratio(p: Parallel) -> float | None:
    """Data parallel over DCN is compute-bound when tokens per pod > C / W_dcn (book ch. 5.1.6)."""
    if p.pods <= 1 or not p.dcn_alpha:
        return None
    return p.batch_per_pod / p.dcn_alpha


def data_parallel(p: Parallel, strategy: str = "dp") -> StrategyVerdict:
    """DP and FSDP: compute-bound when B/X > alpha / n (book ch. 5.1.1-5.1.2)."""
    critical = p.alpha / p.axes
    ratio = (p.batch_per_pod / p.chips_per_pod) / critical
    return StrategyVerdict(strategy, {strategy: p.chips_per_pod, "tp": 1, "pods": p.pods}, ratio, dcn_ratio(p), critical)


def tensor_parallel(p: Parallel) -> StrategyVerdict:
    """TP over Y = N chips: compute-bound when Y < n * F / alpha, whatever the batch (ch. 5.1.3)."""
    max_y = p.axes * p.d_ff / p.alpha
    ratio = max_y / p.chips_per_pod
    verdict = StrategyVerdict("tp", {"fsdp": 1, "tp": p.chips_per_pod, "pods": p.pods}, ratio, dcn_ratio(p), None,
                      max_tp_degree=max_y, notes=["critical batch does not exist: TP comms scale with the batch"])
    if not p.tp_ok(p.chips_per_pod):
        verdict.feasible = False
        verdict.notes.append(f"tp={p.chips_per_pod} is not allowed: {p.tp_rule}")
    return verdict


def mixed_axes(axes: int) -> tuple[int, int]:
    """(M_X, M_Y): FSDP gets all mesh axes but one, TP one (the book's M_X M_Y = 2 on a 3D mesh)."""
    return (max(axes - 1, 1), 1)


def mixed_comms_over_math(x: float, p: Parallel) -> float:
    """(F X / (N M_X) + B / (X M_Y)) / (B F / (N alpha)) for X-way FSDP, N/X-way TP (ch. 5.1.4)."""
    mx, my = mixed_axes(p.axes)
    n, b, f = p.chips_per_pod, p.batch_per_pod, p.d_ff
    return (f * x / (n * mx) + b / (x * my)) / (b * f / (n * p.alpha))


def x_opt(p: Parallel) -> float:
    """X_opt = sqrt(B M_X N / (F M_Y)), the FSDP degree with the least communication."""
    mx, my = mixed_axes(p.axes)
    return math.sqrt(p.batch_per_pod * mx * p.chips_per_pod / (p.d_ff * my))


def compute_bound_x_range(p: Parallel) -> tuple[float, float] | None:
    """FSDP degrees X where comms fit under the matmuls: the roots of the book's quadratic (ch. 6.3).

    X^2 F/(N M_X) - X B F/(N alpha) + B/M_Y = 0; None when the discriminant is negative.
    """
    mx, my = mixed_axes(p.axes)
    n, b, f = p.chips_per_pod, p.batch_per_pod, p.d_ff
    a, bq, c = f / (n * mx), -b * f / (n * p.alpha), b / my
    disc = bq * bq - 4 * a * c
    if disc < 0:
        return None
    root = math.sqrt(disc)
    return ((-bq - root) / (2 * a), (-bq + root) / (2 * a))


def mixed(p: Parallel) -> StrategyVerdict:
    """FSDP x TP with the divisor of N closest in comms to X_opt (book ch. 5.1.4)."""
    mx, my = mixed_axes(p.axes)
    # X = N is plain FSDP (listed on its own), so the mix keeps at least 2-way TP.
    candidates = [x for x in divisors(p.chips_per_pod)
                  if x < p.chips_per_pod and p.tp_ok(p.chips_per_pod // x)]
    feasible = bool(candidates)
    best_x = min(candidates or [p.chips_per_pod], key=lambda x: mixed_comms_over_math(x, p))
    critical = 4 * p.alpha ** 2 / (mx * my * p.d_ff)
    verdict = StrategyVerdict("fsdp+tp", {"fsdp": best_x, "tp": p.chips_per_pod // best_x, "pods": p.pods},
                      1.0 / mixed_comms_over_math(best_x, p), dcn_ratio(p), critical,
                      max_tp_degree=p.axes * p.d_ff / p.alpha, x_opt=x_opt(p), x_range=compute_bound_x_range(p))
    if p.axes == 1:
        verdict.notes.append("one mesh axis: FSDP and TP share it, so the closed form is optimistic")
    if not feasible:
        verdict.feasible = False
        verdict.notes.append(f"no TP degree of at least 2 is allowed: {p.tp_rule}")
    elif p.tp_allowed is not None:
        verdict.notes.append(f"TP degree chosen among {', '.join(map(str, p.tp_allowed))}: {p.tp_rule}")
    return verdict


def all_strategies(p: Parallel) -> list[StrategyVerdict]:
    return [data_parallel(p, "dp"), data_parallel(p, "fsdp"), mixed(p), tensor_parallel(p)]
