"""One in-memory model of an HLO module, whichever format it was read from.

Both readers (binary `HloModuleProto`/`HloProto` and HLO text) produce these
records; the cost model reads only these. Shapes keep dtype, dims, layout,
tiles and memory space so the cost model can account for TPU tile padding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator

from .dtypes import DTYPE_BITS
from .opcodes import RUNS_OTHERS


@dataclass(frozen=True, slots=True)
class Shape:
    """An array shape (or a tuple of shapes).

    `layout` is minor-to-major; `tiles` are the layout's tiles, outermost first,
    e.g. ((8, 128),) for `T(8,128)`; `memory_space` is the `S(n)` annotation (0 = default HBM).
    """

    dtype: str
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = None
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0
    tuple_shapes: tuple["Shape", ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def elements(self) -> int:
        """Number of elements of an array shape (0 for tuples and tokens)."""
        if self.is_tuple or self.dtype in ("token", "opaque"):
            return 0
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def bits(self) -> int:
        return DTYPE_BITS.get(self.dtype, 0)

    def leaves(self) -> Iterator["Shape"]:
        """The array shapes inside this shape, depth first."""
        if self.is_tuple:
            for s in self.tuple_shapes:
                yield from s.leaves()
        else:
            yield self

    @property
    def byte_size(self) -> int:
        """Logical size in bytes of all leaves (no padding), sub-byte types packed."""
        return sum((leaf.elements * leaf.bits + 7) // 8 for leaf in self.leaves())

    def __str__(self) -> str:
        return _shape_text(self)


@lru_cache(maxsize=1 << 14)  # a program has few distinct shapes; each is printed for every op that has it
def _shape_text(shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(str(s) for s in shape.tuple_shapes) + ")"
    return f"{shape.dtype}[{','.join(str(d) for d in shape.dims)}]"


@dataclass(frozen=True, slots=True)
class DotDims:
    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()
    lhs_contracting: tuple[int, ...] = ()
    rhs_contracting: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConvDims:
    """Convolution dimension numbers and window, as in `dim_labels=b01f_01io->b01f`."""

    input_batch: int = 0
    input_feature: int = 1
    input_spatial: tuple[int, ...] = ()
    kernel_input_feature: int = 0
    kernel_output_feature: int = 1
    kernel_spatial: tuple[int, ...] = ()
    output_batch: int = 0
    output_feature: int = 1
    output_spatial: tuple[int, ...] = ()
    window_size: tuple[int, ...] = ()
    window_stride: tuple[int, ...] = ()
    lhs_dilation: tuple[int, ...] = ()
    rhs_dilation: tuple[int, ...] = ()
    feature_group_count: int = 1
    batch_group_count: int = 1


@dataclass(frozen=True, slots=True)
class Metadata:
    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0

    @property
    def source(self) -> str:
        if not self.source_file:
            return ""
        return f"{self.source_file}:{self.source_line}" if self.source_line else self.source_file


@dataclass(frozen=True, slots=True)
class Instruction:
    """One HLO instruction. Operands and called computations are referenced by name."""

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...] = ()
    called: tuple[str, ...] = ()
    id: int = 0
    fusion_kind: str = ""  # kLoop, kInput, kOutput, kCustom
    dot: DotDims | None = None
    conv: ConvDims | None = None
    # Collectives: explicit groups of device ids (expanded from any spelling); None = all devices.
    replica_groups: tuple[tuple[int, ...], ...] | None = None
    channel_id: int | None = None
    use_global_device_ids: bool = False
    # `dimensions=` of reduce/broadcast/transpose/concatenate/all-gather/reduce-scatter/all-to-all...
    dimensions: tuple[int, ...] = ()
    # slice: (start, limit, stride) per dimension.
    slice: tuple[tuple[int, int, int], ...] = ()
    # collective-permute: (source, target) pairs.
    source_target_pairs: tuple[tuple[int, int], ...] = ()
    custom_call_target: str = ""
    backend_config: str = ""
    sharding: str = ""
    metadata: Metadata = field(default_factory=Metadata)
    # Anything else the reader saw, as raw text (e.g. "to_apply", "known_trip_count", "window").
    attributes: tuple[tuple[str, str], ...] = ()

    def attr(self, key: str, default: str = "") -> str:
        for k, v in self.attributes:
            if k == key:
                return v
        return default


# A computation bigger than this is the body of a program, never a fused computation: the readers
# give it no content number (`Computation.content`), not worth its key.
MAX_CONTENT_INSTRUCTIONS = 1 << 12

# The fields in which a big program's copies of one instruction differ: the readers read each
# distinct instruction once and stamp its copies with these (`stamping`).
STAMPED = ("name", "operands", "called", "id", "metadata", "attributes")


def tuple_element(base: Instruction | None, index: str, name: str) -> Instruction | None:
    """The operand `%base#index` as recent XLA prints a tuple element in HLO text (the
    get-tuple-element it stands for is not printed): a get-tuple-element of `base`, or None."""
    if base is None or not index.isdigit() or not base.shape.is_tuple or int(index) >= len(base.shape.tuple_shapes):
        return None
    return Instruction(name=name, opcode="get-tuple-element", shape=base.shape.tuple_shapes[int(index)],
                       operands=(base.name,), attributes=(("index", index),))


@dataclass
class Computation:
    name: str
    instructions: list[Instruction]
    id: int = 0
    root: str = ""
    is_fusion: bool = False
    # Computations of one module with the same `content` are the same but for the names and ids of
    # their instructions and of the computations they call (a program's renamed copies of one
    # fused computation); None when the reader did not say.
    content: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {i.name: i for i in self.instructions}
        if not self.root and self.instructions:
            self.root = self.instructions[-1].name

    def __getitem__(self, name: str) -> Instruction:
        return self._by_name[name]

    def get(self, name: str) -> Instruction | None:
        found = self._by_name.get(name)
        if found is None and "#" in name:
            base, _, index = name.rpartition("#")
            found = tuple_element(self._by_name.get(base), index, name)
        return found

    @property
    def root_instruction(self) -> Instruction:
        return self._by_name[self.root]


@dataclass
class Module:
    """An HLO module: computations by name, the entry's name, and where it was read from."""

    name: str
    computations: dict[str, Computation]
    entry: str
    id: int = 0
    source: str = ""  # "proto" or "text"
    # A scheduled module (`is_scheduled=true`, or a proto with a schedule) runs each computation's
    # instructions in `schedule` order (computation name -> instruction names); text lists them so.
    is_scheduled: bool = False
    schedule: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Entry parameter number -> the index in the entry's result tuple of the output that reuses its
    # buffer (input_output_alias: a donated input updated in place, so one run's output is the next
    # run's input). Only whole top-level parameters and outputs are listed.
    aliased_outputs: dict[int, int] = field(default_factory=dict)
    # `num_partitions=N` of a text module's header (its compile options; a proto states none: 1).
    num_partitions: int = 1

    def sequence(self, computation: str) -> list[Instruction]:
        """The computation's instructions in the order they run (schedule order when known)."""
        comp = self.computations[computation]
        order = self.schedule.get(computation)
        if not order or len(order) != len(comp.instructions):
            return list(comp.instructions)
        return [comp[name] for name in order]

    def position(self, name: str) -> float | None:
        """Where an op runs within its computation: 0 first, 1 last, in schedule order."""
        index = self.__dict__.get("_positions")
        if index is None:
            index = {}
            for comp in self.computations.values():
                seq = self.sequence(comp.name)
                for n, instr in enumerate(seq):
                    index[instr.name] = n / max(len(seq) - 1, 1)
            self.__dict__["_positions"] = index
        return index.get(name)

    @property
    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    def running(self) -> list[Computation]:
        """The computations whose instructions are the program's ops, in the order they are found:
        the entry and, however deep, what its loops, branches, calls and async starts run (a
        fused computation, or one a reduction applies, is not one of them)."""
        found = {self.entry: self.computations[self.entry]}
        pending = [self.entry]
        while pending:
            for instr in found[pending.pop()].instructions:
                for comp in self.run_by(instr):
                    if comp.name not in found and not comp.is_fusion:
                        found[comp.name] = comp
                        pending.append(comp.name)
        return list(found.values())

    def run_by(self, instr: Instruction) -> list[Computation]:
        """The computations `instr` runs as ops of their own: a while's body and condition, a
        conditional's branches, what a call or an async start calls. The one walker over called
        computations: the cost model's execution counts and schedule follow it too."""
        if instr.opcode == "while":
            parts = list(self.while_parts(instr))
        elif instr.opcode == "conditional":
            parts = [self._named(name) for name in instr.called]
        elif instr.opcode in RUNS_OTHERS:
            parts = [self._named(name) for name in instr.called or (instr.attr("to_apply"), instr.attr("calls"))]
        else:
            return []
        return [comp for comp in parts if comp is not None]

    def while_parts(self, loop: Instruction) -> tuple[Computation | None, Computation | None]:
        """A while loop's body and condition, by their attributes or else their place in its called list."""
        called = loop.called
        body = self._named(loop.attr("body")) or (self._named(called[0]) if called else None)
        cond = self._named(loop.attr("condition")) or (self._named(called[1]) if len(called) > 1 else None)
        return body, cond

    def _named(self, name: str) -> Computation | None:
        return self.computations.get(name.lstrip("%")) if name else None

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        for comp in self.computations.values():
            for instr in comp.instructions:
                yield comp, instr

    @property
    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations.values())

    def named(self) -> dict[str, tuple[Computation, Instruction]]:
        """Every instruction with its computation, by name (names are unique per module), indexed once."""
        index = self.__dict__.get("_index")
        if index is None:
            index = self.__dict__["_index"] = {i.name: (c, i) for c, i in self.instructions()}
        return index

    def find(self, name: str) -> tuple[Computation, Instruction] | None:
        """Look an instruction up by name in any computation, `%t#1` tuple elements included."""
        index = self.named()
        found = index.get(name)
        if found is None and "#" in name:
            base, _, position = name.rpartition("#")
            hit = index.get(base)
            element = tuple_element(hit[1], position, name) if hit else None
            found = (hit[0], element) if hit and element else None
        return found
