"""The parts of an op's record that judge it among its identical ops [trace]: what the kernel
itself does at its fastest, how far this op is from it, and what ran beside it.

The op table builds them (the grouping and the verdict among identical ops, and the overlap of
an op's runs with other ops in the exported window); times are seconds. `beside_summary` says
what ran beside an op in words, for its reasons and the report's interference section.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ..costmodel.units import figure, human


@dataclass(frozen=True)
class BesideOp:
    """One op that ran during this op's runs in the window [trace]."""

    key: str  # program/op
    name: str
    devices: int  # devices it ran on while this op ran
    overlap_s: float  # time it overlapped this op's runs, summed
    collective: bool
    itself: bool = False  # this op on other devices (the devices of one program run it at once)


@dataclass(frozen=True)
class Beside:
    """What ran beside an op's runs in the exported window (one step, or the capture window) [trace]."""

    window: str  # "step N" or "the capture window"
    runs: int  # this op's runs in the window, over devices
    run_s: float  # their mean duration
    concurrency: float  # other ops running at a time during them, on average
    collective_concurrency: float  # of which collectives
    kernel_concurrency: float | None  # the same beside the fastest identical instance's runs (None: not there)
    kernel_collective_concurrency: float | None
    kernel_run_s: float | None  # the fastest instance's mean run in the window
    ops: tuple[BesideOp, ...]  # the ops that overlapped them most

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ops"] = [asdict(o) for o in self.ops]
        return out

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> Beside:
        return cls(window=str(e.get("window") or ""), runs=int(e.get("runs") or 0), run_s=float(e.get("run_s") or 0.0),
                   concurrency=float(e.get("concurrency") or 0.0),
                   collective_concurrency=float(e.get("collective_concurrency") or 0.0),
                   kernel_concurrency=e.get("kernel_concurrency"),
                   kernel_collective_concurrency=e.get("kernel_collective_concurrency"),
                   kernel_run_s=e.get("kernel_run_s"),
                   ops=tuple(BesideOp(str(o.get("key") or ""), str(o.get("name") or ""), int(o.get("devices") or 0),
                                      float(o.get("overlap_s") or 0.0), bool(o.get("collective")),
                                      bool(o.get("itself")))
                             for o in e.get("ops") or () if isinstance(o, Mapping)))


@dataclass(frozen=True)
class Identical:
    """This op among the ops that run the same computation on the same shapes, their data at the
    same memory level [trace]. Times are per run."""

    ops: int  # identical ops (program, op) measured, this one included
    instances: int  # (op, device) instances compared
    kernel_s: float  # the fastest instance's mean run: what the kernel itself does
    kernel_key: str  # that instance's op (program/op)
    kernel_device: str  # and device (host/device)
    noise: float  # that instance's slowest run over its fastest: the run-to-run spread
    ratio: float  # this op's mean run over kernel_s
    threshold: float  # the ratio beyond which the time is interference (a multiple of the noise)
    beside: Beside | None = None  # interference only

    @property
    def interference(self) -> bool:
        return self.ratio >= self.threshold

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "beside"}
        out["beside"] = self.beside.to_json() if self.beside is not None else None
        return out

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> Identical | None:
        """An `identical` entry read back; None when it lacks a figure the verdict rests on."""
        try:
            beside = e.get("beside")
            return cls(ops=int(e["ops"]), instances=int(e["instances"]), kernel_s=float(e["kernel_s"]),
                       kernel_key=str(e.get("kernel_key") or ""), kernel_device=str(e.get("kernel_device") or ""),
                       noise=float(e["noise"]), ratio=float(e["ratio"]), threshold=float(e["threshold"]),
                       beside=Beside.from_json(beside) if isinstance(beside, Mapping) else None)
        except (KeyError, TypeError, ValueError):
            return None


def beside_summary(b: Beside, names: bool = True) -> str:
    """Where, how many ops computed and waited in collectives at a time beside the op (and beside
    the fastest instance), and (`names`) which ops overlapped it most."""
    computing = b.concurrency - b.collective_concurrency
    than = ""
    if b.kernel_concurrency is not None and b.kernel_collective_concurrency is not None:
        than = (f", against {figure(b.kernel_concurrency - b.kernel_collective_concurrency)} and "
                f"{figure(b.kernel_collective_concurrency)} beside the fastest instance (its run there "
                f"{human(b.kernel_run_s, 's')})")
    named = ", ".join(f"{o.name}{' (itself)' if o.itself else ''} on {o.devices} device(s) "
                      f"({human(o.overlap_s, 's')}{', collective' if o.collective else ''})" for o in b.ops)
    return (f"in {b.window} [trace], where its {b.runs} run(s) took {human(b.run_s, 's')} on average: "
            f"{figure(computing)} other op(s) computing at a time and {figure(b.collective_concurrency)} in collectives"
            f"{than}" + (f"; most: {named}" if named and names else ""))
