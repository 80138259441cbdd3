"""Windows of convolution, reduce-window and select-and-scatter, and the positions they cover.

The window comes from the instruction's `window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`
attribute when the reader kept it; otherwise from `ConvDims` (sizes, strides,
dilations) with the padding implied by the input, kernel and output sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...parsers.hlo.model import Instruction, Shape

_FIELD = re.compile(r"(size|stride|pad|lhs_dilate|rhs_dilate|rhs_reversal)=([0-9_x-]+)")


@dataclass(frozen=True)
class WindowDim:
    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1


def parse_window(text: str) -> list[WindowDim]:
    """Parse HLO window text (`size=3x3 stride=2x2 pad=0_1x0_1 rhs_dilate=1x2`)."""
    fields = {key: value.split("x") for key, value in _FIELD.findall(text)}
    rank = len(fields.get("size", []))
    dims = []
    for i in range(rank):
        pad = fields.get("pad", ["0_0"] * rank)[i].split("_")
        dims.append(WindowDim(
            size=int(fields["size"][i]),
            stride=int(fields.get("stride", ["1"] * rank)[i]),
            pad_low=int(pad[0]),
            pad_high=int(pad[1]) if len(pad) > 1 else int(pad[0]),
            lhs_dilation=int(fields.get("lhs_dilate", ["1"] * rank)[i]),
            rhs_dilation=int(fields.get("rhs_dilate", ["1"] * rank)[i]),
        ))
    return dims


def _implied_windows(instr: Instruction, lhs: Shape, out: Shape, rhs: Shape | None) -> list[WindowDim]:
    conv = instr.conv
    if conv is None:
        return []
    rank = len(conv.input_spatial)

    def pick(values: tuple[int, ...], i: int) -> int:
        return values[i] if i < len(values) and values[i] > 0 else 1

    dims = []
    for i in range(rank):
        size = pick(conv.window_size, i) if conv.window_size or rhs is None else rhs.dims[conv.kernel_spatial[i]]
        stride = pick(conv.window_stride, i)
        lhs_d, rhs_d = pick(conv.lhs_dilation, i), pick(conv.rhs_dilation, i)
        out_size = out.dims[conv.output_spatial[i]]
        in_eff = (lhs.dims[conv.input_spatial[i]] - 1) * lhs_d + 1
        k_eff = (size - 1) * rhs_d + 1
        total = max(0, (out_size - 1) * stride + k_eff - in_eff)
        # Padding is not kept in ConvDims: assume it is split evenly, low side first.
        dims.append(WindowDim(size, stride, total // 2, total - total // 2, lhs_d, rhs_d))
    return dims


def window_of(instr: Instruction, lhs: Shape, out: Shape, rhs: Shape | None = None) -> list[WindowDim]:
    """The window of an op, one entry per windowed dimension (spatial dims for convolution)."""
    text = instr.attr("window")
    if text:
        return parse_window(text)
    if instr.conv is not None:
        return _implied_windows(instr, lhs, out, rhs)
    return [WindowDim() for _ in out.dims]


def conv_valid_positions(in_size: int, out_size: int, w: WindowDim) -> int:
    """(output position, kernel tap) pairs whose input element is real data, not padding
    and not a hole from lhs dilation: the multiply-adds one spatial dimension really does."""
    limit = (in_size - 1) * w.lhs_dilation + 1 if in_size else 0
    total = 0
    for k in range(w.size):
        offset = k * w.rhs_dilation - w.pad_low
        if w.lhs_dilation == 1:
            total += _count_in_range(offset, w.stride, out_size, limit)
            continue
        for o in range(out_size):
            idx = o * w.stride + offset
            if 0 <= idx < limit and idx % w.lhs_dilation == 0:
                total += 1
    return total


def _count_in_range(offset: int, stride: int, out_size: int, limit: int) -> int:
    """How many o in [0, out_size) have 0 <= o*stride + offset < limit."""
    lo = max(0, -(offset // stride))  # ceil(-offset / stride)
    hi = min(out_size - 1, (limit - 1 - offset) // stride)
    return max(0, hi - lo + 1)
