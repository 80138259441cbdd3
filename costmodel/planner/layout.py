"""A parallel layout: how many ways each parallelism axis splits the work, and how it runs.

`dp x tp x pp x cp` is the chip count; expert parallelism is carved out of the data-parallel
ranks (`ep` divides `dp`, as DeepSeek-V3 does), or spans every TP and CP rank and some DP ranks
(`ep` = tp x cp x a divisor of dp: Megatron-Core's expert layout with expert-tensor parallelism 1,
MaxText's EP over its other axes), so it adds no chips. `zero` is
the ZeRO stage of the data-parallel ranks (1: optimizer state sharded, 2: and gradients, 3:
and parameters, i.e. FSDP); with `replicas` R > 1 it shards over dp / R ranks and keeps R
replicas whose gradients are all-reduced (hybrid sharding: FSDP within a pod or node, data
parallelism across, as PaLM and HSDP do). A pipeline runs `microbatches` per step under
`schedule`, in `flushes` pipeline flushes (gradient accumulation around the pipeline, as MaxText's
gradient_accumulation_steps with pipeline stages: each flush fills and drains the pipe).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...base.errors import UsageError

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zero-bubble", "dualpipe")
_INT_KEYS = ("dp", "tp", "pp", "ep", "cp", "zero", "microbatches", "virtual_stages", "replicas", "flushes")
_ALIASES = {"mbs": "microbatches", "m": "microbatches", "vpp": "virtual_stages", "v": "virtual_stages"}


@dataclass(frozen=True)
class Layout:
    """Degrees per axis plus the ZeRO stage and pipeline schedule; `microbatches` None: planner's choice."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    zero: int = 1
    microbatches: int | None = None
    schedule: str = "1f1b"
    virtual_stages: int = 1
    replicas: int = 1
    flushes: int = 1

    @property
    def chips(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def ep_over_tp(self) -> bool:
        """EP spans the TP and CP ranks (and ep / (tp x cp) DP ranks) rather than DP ranks alone."""
        return self.ep > 1 and self.dp % self.ep != 0 and self.ep % (self.tp * self.cp) == 0

    @property
    def ep_dp(self) -> int:
        """DP ranks in one EP group."""
        return self.ep // (self.tp * self.cp) if self.ep_over_tp else max(self.ep, 1)

    def with_microbatches(self, m: int) -> Layout:
        return replace(self, microbatches=m)

    def label(self) -> str:
        """`dp=128,tp=8,pp=16,zero=1,m=16,1f1b`: the axes longer than one, then how it runs."""
        parts = [f"{k}={getattr(self, k)}" for k in ("dp", "tp", "pp", "ep", "cp") if getattr(self, k) > 1]
        parts.append(f"zero={self.zero}" + (f",replicas={self.replicas}" if self.replicas > 1 else ""))
        if self.pp > 1:
            if self.microbatches is not None:
                parts.append(f"m={self.microbatches}")
            parts.append(self.schedule if self.schedule != "interleaved"
                         else f"interleaved(v={self.virtual_stages})")
            if self.flushes > 1:
                parts.append(f"flushes={self.flushes}")
        elif self.microbatches and self.microbatches > 1:
            parts.append(f"accum={self.microbatches}")
        return ",".join(parts)

    def serving_label(self) -> str:
        """`tp=8,pp=2`: the axes longer than one (serving keeps no optimizer and runs no schedule)."""
        return ",".join(f"{k}={getattr(self, k)}" for k in ("dp", "tp", "pp", "ep") if getattr(self, k) > 1) \
            or "one chip"

    def to_json(self) -> dict[str, Any]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "ep": self.ep, "cp": self.cp,
                "zero": self.zero, "microbatches": self.microbatches, "schedule": self.schedule,
                "virtual_stages": self.virtual_stages, "replicas": self.replicas, "flushes": self.flushes,
                "chips": self.chips,
                "label": self.label()}


def parse_layout(text: str, chips: int | None = None) -> Layout:
    """`dp=128,tp=8,pp=16[,ep=..,cp=..,zero=..,microbatches=..,schedule=..]` -> Layout.

    An axis left out is 1, except `dp`, which fills the remaining chips when `chips` is given.
    `fsdp=N` is `dp=N` with ZeRO stage 3; `m` and `v` abbreviate microbatches and virtual_stages.
    """
    values: dict[str, Any] = {}
    fsdp = False
    for part in (p.strip() for p in text.split(",")):
        key, sep, raw = part.partition("=")
        key = _ALIASES.get(key.strip().lower(), key.strip().lower())
        if key == "fsdp":  # FSDP is data parallelism with ZeRO stage 3
            key, fsdp = "dp", True
        raw = raw.strip().lower()
        if not sep or not key or not raw:
            raise UsageError(f"cannot read layout {text!r}", hint="write it as dp=128,tp=8,pp=16")
        if key in values:
            raise UsageError(f"layout {text!r} names {key} twice")
        if key == "schedule":
            if raw not in SCHEDULES:
                raise UsageError(f"unknown pipeline schedule {raw!r}", hint=f"one of {', '.join(SCHEDULES)}")
            values[key] = raw
        elif key in _INT_KEYS:
            if not raw.isdigit() or len(raw) > 9 or (int(raw) < 1 and key != "zero"):
                raise UsageError(f"layout {key}={raw[:20]}: expected a positive whole number below 10^9")
            values[key] = int(raw)
        else:
            raise UsageError(f"unknown layout axis {key!r}",
                             hint="dp, tp, pp, ep, cp, zero, replicas, microbatches, schedule, virtual_stages, flushes")
    if fsdp:
        values.setdefault("zero", 3)
    if values.get("zero", 1) > 3:
        raise UsageError(f"ZeRO stage {values['zero']} does not exist", hint="0, 1, 2 or 3")
    if values.get("virtual_stages", 1) > 1 and "schedule" not in values:
        values["schedule"] = "interleaved"
    layout = Layout(**values)
    if chips is not None and "dp" not in values:
        rest = layout.tp * layout.pp * layout.cp
        if chips % rest:
            raise UsageError(f"layout {text!r}: tp x pp x cp = {rest} does not divide {chips} chips")
        layout = replace(layout, dp=chips // rest)
    if chips is not None and layout.chips != chips:
        raise UsageError(f"layout {text!r} uses {layout.chips} chip{'s' if layout.chips > 1 else ''} but the run has {chips}",
                         hint="dp x tp x pp x cp must equal --chips")
    return layout
