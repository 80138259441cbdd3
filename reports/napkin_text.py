"""`audit calc` as text: a matmul's or a collective's roofline, each number with its unit."""

from __future__ import annotations

from typing import Any

from ..costmodel.units import human, intensity


def matmul_text(result: dict[str, Any]) -> list[str]:
    lines = [
        f"matmul {result['dtype']}[{result['m']},{result['k']}] x [{result['k']},{result['n']}] on {result['hardware']}",
        f"  FLOPs            {human(result['flops'], 'FLOP')}",
        f"  bytes            {human(result['bytes'], 'B')} (read + written)",
        f"  intensity        {intensity(result['intensity'])} (ridge {intensity(result['ridge_intensity'])})",
        f"  compute time     {human(result['compute_s'], 's')} at {human(result['peak_flops_per_s'], 'FLOP/s')}",
        f"  memory time      {human(result['memory_s'], 's')} at {human(result['memory_bytes_per_s'], 'B/s')} "
        f"({result['memory_level']}, {result['memory_source']})",
        f"  expected time    {human(result['time_s'], 's')} ({result['bound_by']}-bound), the roofline: a lower bound",
        f"  achievable time  {human(result['achievable_s'], 's')} (what good kernels take: "
        f"{result['achievable_source']})",
    ]
    if result["dtype"] == "f32" and result.get("peak_flops_note"):
        why = str(result["peak_flops_note"])
        for said in (f"precision {result['precision']}: ", f"{result['precision']}: "):
            why = why.removeprefix(said)
        lines.insert(5, f"  precision        {result['precision']}: {why}")
    lines += [f"  note: {note}" for note in result["notes"] + result["achievable_notes"]]
    return lines


def collective_text(result: dict[str, Any]) -> list[str]:
    wrap = {True: " (with a wraparound)", False: " (without a wraparound)", None: ""}[result["wraparound"]]
    lines = [
        f"{result['op']} of {result['shape']} over {','.join(result['axes'])} "
        f"({result['group_size']} devices) on {result['hardware']}",
        f"  volume V         {human(result['bytes'], 'B')}",
        f"  bytes moved      {human(result['bytes_moved'], 'B')} through one device's links",
        f"  link             {result['link']}, {human(result['bandwidth_bytes_per_s'], 'B/s')}{wrap}",
        f"  hops             {result['hops']}",
        f"  bandwidth time   {human(result['bandwidth_s'], 's')}",
        f"  latency floor    {human(result['latency_s'], 's')}",
        f"  expected time    {human(result['time_s'], 's')} ({result['bound_by']}-bound), the roofline: a lower bound",
        f"  achievable time  {human(result['achievable_s'], 's')} ({result['achievable_source']})",
    ]
    lines += [f"  note: {note}" for note in result["notes"]]
    return lines
