"""Hostile inputs made from real ones: crafted XPlane fields, crafted HLO, malformed reports, mutated bytes.

Shared by the fuzz tests (tests/test_fuzz_hostile.py, driven by hypothesis), the corpus script
(tests/make_hostile_corpus.py) and the campaign (bench/hostile_campaign.py). Every function is
deterministic given its `random.Random`.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any, Callable

from hostile_hlo import PROTO_CRAFTS, STRUCTURE_CRAFTS, craft_hlo_proto

from audit.parsers.xplane.schema import XSpace

# Values at the edges of what each field's wire type can carry, and beyond what is physical.
BIG_INTS = [2**63 - 1, 2**62, -1, -(2**63), 2**40, -(2**40)]
STAT_VALUES: list[tuple[str, Any]] = [
    ("int64_value", 2**63 - 1), ("int64_value", -(2**63)), ("int64_value", -1), ("uint64_value", 2**64 - 1),
    ("double_value", math.nan), ("double_value", math.inf), ("double_value", -math.inf), ("double_value", -1.0),
    ("double_value", 1e308), ("str_value", "x"), ("str_value", "1e999"), ("bytes_value", b"\xff\x00\xfe"),
    ("ref_value", 2**63), ("ref_value", 987654),
]
# Stats the readers interpret, by name (a crafted value there reaches arithmetic).
NAMED_STATS = ("program_id", "run_id", "step_num", "group_id", "correlation_id", "hlo_op", "hlo_module", "flops",
               "bytes_accessed", "model_flops", "device_offset_ps", "device_duration_ps", "self_duration_ps",
               "clock_rate", "memory_bandwidth", "core_count", "peak_teraflops_per_second",
               "peak_hbm_bw_gigabytes_per_second", "device_ordinal", "profile_start_time", "kernel_details",
               "long_name", "tf_op", "occurrences", "iter_num", "context_id", "queue_id")
DEVICE_NAMES = ["/device:GPU:4611686018427387904", "/device:GPU:-3", "/device:TPU:99999999999999999999999",
                "/device:GPU:0 ", "/device:TPU:1 SparseCore 99999999999", "/host:CPU\x00", ""]


def _events(space: Any) -> list[tuple[Any, Any, Any]]:
    return [(plane, line, ev) for plane in space.planes for line in plane.lines for ev in line.events]


def _craft_event(space: Any, rng: random.Random, edit: Callable[[Any], None]) -> None:
    found = _events(space)
    if found:
        for _ in range(rng.randint(1, 3)):
            edit(rng.choice(found)[2])


def _set_stat(stat: Any, rng: random.Random) -> None:
    kind, value = rng.choice(STAT_VALUES)
    for name in ("double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value"):
        stat.ClearField(name)
    setattr(stat, kind, value)


def _all_stats(space: Any) -> list[tuple[Any, Any]]:
    """(plane, stat) for every stat of a plane, an event, or an event's metadata."""
    out = []
    for plane in space.planes:
        out += [(plane, s) for s in plane.stats]
        for md in plane.event_metadata.values():
            out += [(plane, s) for s in md.stats]
        for line in plane.lines:
            for ev in line.events:
                out += [(plane, s) for s in ev.stats]
    return out


def _craft_named_stat(space: Any, rng: random.Random) -> None:
    stats = _all_stats(space)
    named = [(p, s) for p, s in stats if p.stat_metadata[s.metadata_id].name in NAMED_STATS] if stats else []
    for _ in range(rng.randint(1, 4)):
        if named or stats:
            _set_stat(rng.choice(named or stats)[1], rng)


def _craft_plane_name(space: Any, rng: random.Random) -> None:
    devices = [p for p in space.planes if p.name.startswith("/device:")] or list(space.planes)
    if devices:
        rng.choice(devices).name = rng.choice(DEVICE_NAMES)


def _craft_many_planes(space: Any, rng: random.Random) -> None:
    for i in range(rng.choice([1000, 20000])):
        space.planes.add(id=i, name=rng.choice(["/device:GPU:%d" % i, "/device:TPU:%d" % i, "/host:x%d" % i, ""]))


def _craft_metadata_id(space: Any, rng: random.Random) -> None:
    def edit(ev: Any) -> None:
        ev.metadata_id = rng.choice([-1, 2**62, 123456789])
    _craft_event(space, rng, edit)


def _craft_stat_metadata(space: Any, rng: random.Random) -> None:
    plane = rng.choice(list(space.planes))
    for key in list(plane.stat_metadata)[: rng.randint(1, 5)]:
        md = plane.stat_metadata[key]
        md.id = rng.choice(BIG_INTS)
        if rng.random() < 0.5:
            md.name = rng.choice(NAMED_STATS)


def _craft_embedded_hlo(space: Any, rng: random.Random) -> None:
    """One program's HLO in `/host:metadata` (the `Hlo Proto` stat) crafted as `hostile_hlo` crafts a proto."""
    protos = [st for plane in space.planes if plane.name == "/host:metadata" for md in plane.event_metadata.values()
              for st in md.stats if plane.stat_metadata[st.metadata_id].name in ("Hlo Proto", "HLO Proto")]
    if protos:
        stat = rng.choice(protos)
        stat.bytes_value = craft_hlo_proto(stat.bytes_value, rng.choice(sorted(PROTO_CRAFTS)), rng)


def zero_durations(space: Any, rng: random.Random) -> str:
    """Every event of one op on one thread line at zero duration (real traces hold such events: shorter than the
    clock's resolution); the op's name."""
    lines = [(plane, line) for plane in space.planes for line in plane.lines if line.events]
    if not lines:
        return ""
    plane, line = rng.choice(lines)
    mid = rng.choice([ev.metadata_id for ev in line.events])
    for ev in line.events:
        if ev.metadata_id == mid:
            ev.duration_ps = 0
    return str(plane.event_metadata[mid].name) if mid in plane.event_metadata else ""


# Stats a reader reads, crafted as plain proto3 lets a writer craft them: no value at all, two values at once,
# unsigned values past 2^63, strings that are not UTF-8 (made on the bytes: protobuf refuses to write them).
NOT_UTF8_MARK = b"\x00\x00not-utf8\x00\x00"


def _craft_stat_shape(space: Any, rng: random.Random, craft: str) -> None:
    stats = _all_stats(space)
    named = [(p, s) for p, s in stats if p.stat_metadata[s.metadata_id].name in NAMED_STATS] if stats else []
    for _ in range(rng.randint(1, 6)):
        if not (named or stats):
            return
        stat = rng.choice(named or stats)[1]
        if craft == "stat-no-value":
            for name in ("double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value"):
                stat.ClearField(name)
        elif craft == "stat-two-values":
            first, second = rng.sample(STAT_VALUES, 2)
            for kind, value in (first, second):
                setattr(stat, kind, value)
        elif craft == "stat-u64":
            for name in ("int64_value", "str_value", "ref_value", "double_value", "bytes_value"):
                stat.ClearField(name)
            stat.uint64_value = rng.choice([2**64 - 1, 2**63, 2**63 + 12345, 2**32])
        else:  # stat-not-utf8
            for name in ("double_value", "uint64_value", "int64_value", "ref_value", "bytes_value"):
                stat.ClearField(name)
            stat.str_value = NOT_UTF8_MARK.decode()


XPLANE_CRAFTS: tuple[str, ...] = ("duration", "offset", "timestamp", "occurrences", "metadata-id", "stat-value",
                                  "plane-name", "plane-id", "line-id", "many-planes", "stat-metadata", "no-metadata",
                                  "line-duration", "embedded-hlo", "op-zero-duration", "stat-no-value",
                                  "stat-two-values", "stat-u64", "stat-not-utf8")


def craft_xplane(data: bytes, craft: str, rng: random.Random) -> bytes:
    """`data` (an XSpace) with one kind of field set to a value a real profiler never writes."""
    space = XSpace()
    space.ParseFromString(data)
    big = rng.choice(BIG_INTS)
    if craft == "duration":
        _craft_event(space, rng, lambda ev: setattr(ev, "duration_ps", rng.choice(BIG_INTS)))
    elif craft == "offset":
        _craft_event(space, rng, lambda ev: setattr(ev, "offset_ps", rng.choice(BIG_INTS)))
    elif craft == "occurrences":
        _craft_event(space, rng, lambda ev: setattr(ev, "num_occurrences", rng.choice([-5, 2**62, 2**31])))
    elif craft == "metadata-id":
        _craft_metadata_id(space, rng)
    elif craft == "timestamp":
        lines = [line for plane in space.planes for line in plane.lines]
        for line in rng.sample(lines, min(len(lines), rng.randint(1, 3))):
            line.timestamp_ns = big
    elif craft == "line-duration":
        for line in (line for plane in space.planes for line in plane.lines):
            line.duration_ps = big
    elif craft == "line-id":
        for line in (line for plane in space.planes for line in plane.lines):
            if rng.random() < 0.5:
                line.id = big
    elif craft == "stat-value":
        _craft_named_stat(space, rng)
    elif craft == "plane-name":
        _craft_plane_name(space, rng)
    elif craft == "plane-id":
        for plane in space.planes:
            plane.id = rng.choice(BIG_INTS)
    elif craft == "many-planes":
        _craft_many_planes(space, rng)
    elif craft == "stat-metadata":
        _craft_stat_metadata(space, rng)
    elif craft == "embedded-hlo":
        _craft_embedded_hlo(space, rng)
    elif craft == "no-metadata":
        rng.choice(list(space.planes)).ClearField(rng.choice(["event_metadata", "stat_metadata"]))
    elif craft == "op-zero-duration":
        zero_durations(space, rng)
    elif craft in ("stat-no-value", "stat-two-values", "stat-u64", "stat-not-utf8"):
        _craft_stat_shape(space, rng, craft)
    else:
        raise ValueError(craft)
    # Same length: the string's length prefix stays right, its bytes are no longer UTF-8.
    return bytes(space.SerializeToString()).replace(NOT_UTF8_MARK, b"\xff\xfenot-utf8\xc3\x28")


# A small real-looking module; crafts replace one part of it.
HLO_TEMPLATE = """HloModule crafted, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%fused (p: f32[8,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  ROOT %e = f32[8,16]{1,0} exponential(%p)
}

%cond (c: (s32[], f32[8,16])) -> pred[] {
  %c = (s32[], f32[8,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (b: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {
  %b = (s32[], f32[8,16]{1,0}) parameter(0)
  %j = s32[] get-tuple-element(%b), index=0
  %one = s32[] constant(1)
  %k = s32[] add(%j, %one)
  %v = f32[8,16]{1,0} get-tuple-element(%b), index=1
  %w = f32[8,16]{1,0} fusion(%v), kind=kLoop, calls=%fused
  ROOT %t = (s32[], f32[8,16]{1,0}) tuple(%k, %w)
}

ENTRY %main (a: f32[8,16]) -> f32[8,16] {
  %a = f32[8,16]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}) tuple(%zero, %a)
  %loop = (s32[], f32[8,16]{1,0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"4"}}
  %r = f32[8,16]{1,0} get-tuple-element(%loop), index=1
  %ar = f32[8,16]{1,0} all-reduce(%r), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%add
  %d = f32[8,8]{1,0} dot(%ar, %ar), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT %out = f32[8,16]{1,0} fusion(%ar), kind=kLoop, calls=%fused, metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3}
}
"""

_HLO_EDITS: dict[str, list[tuple[str, str]]] = {
    "self-fusion": [("  ROOT %e = f32[8,16]{1,0} exponential(%p)",
                     "  ROOT %e = f32[8,16]{1,0} fusion(%p), kind=kLoop, calls=%fused")],
    "mutual-recursion": [("  ROOT %e = f32[8,16]{1,0} exponential(%p)",
                          "  ROOT %e = f32[8,16]{1,0} call(%p), to_apply=%other"),
                         ("ENTRY %main", "%other (q: f32[8,16]) -> f32[8,16] {\n  %q = f32[8,16]{1,0} parameter(0)\n"
                                         "  ROOT %z = f32[8,16]{1,0} fusion(%q), kind=kLoop, calls=%fused\n}\n\n"
                                         "ENTRY %main")],
    "while-body-calls-itself": [("  %w = f32[8,16]{1,0} fusion(%v), kind=kLoop, calls=%fused",
                                 "  %w0 = (s32[], f32[8,16]{1,0}) while(%b), condition=%cond, body=%body\n"
                                 "  %w = f32[8,16]{1,0} get-tuple-element(%w0), index=1")],
    "entry-calls-entry": [("  %r = f32[8,16]{1,0} get-tuple-element(%loop), index=1",
                           "  %r = f32[8,16]{1,0} call(%a), to_apply=%main")],
    "missing-computation": [("calls=%fused, metadata", "calls=%nowhere, metadata")],
    "trip-count-text": [('{"n":"4"}', '{"n":"abc"}')],
    "trip-count-negative": [('{"n":"4"}', '{"n":"-5"}')],
    "trip-count-huge": [('{"n":"4"}', '{"n":"999999999999999999999999999"}')],
    "trip-count-object": [('{"n":"4"}', '{"n":{"x":[]}}')],
    "iota-groups-huge": [("replica_groups={{0,1,2,3}}", "replica_groups=[2000000,1000000]<=[2000000000000]")],
    "iota-groups-transposed-huge": [("replica_groups={{0,1,2,3}}",
                                     "replica_groups=[4194304,4194304]<=[4194304,4194304]T(1,0)")],
    "groups-huge-ids": [("replica_groups={{0,1,2,3}}", "replica_groups={{0,99999999999999999999}}")],
    "groups-many": [("replica_groups={{0,1,2,3}}", "replica_groups={" + ",".join("{%d}" % i for i in range(20000))
                     + "}")],
    "mesh-huge": [("replica_groups={{0,1,2,3}}", "replica_groups=mesh['x'=100000000,'y'=100000000] {'y'}")],
    "shape-huge-dims": [("%d = f32[8,8]{1,0} dot", "%d = f32[99999999999,99999999999]{1,0} dot")],
    "shape-overflow": [("%d = f32[8,8]{1,0} dot", "%d = f32[9223372036854775807,9223372036854775807]{1,0} dot")],
    "shape-rank-huge": [("%d = f32[8,8]{1,0} dot", "%d = f32[" + ",".join(["2"] * 300) + "] dot")],
    "shape-negative": [("%d = f32[8,8]{1,0} dot", "%d = f32[-8,8]{1,0} dot")],
    "parameter-shape-huge": [("ENTRY %main (a: f32[8,16]) -> f32[8,16] {\n  %a = f32[8,16]{1,0} parameter(0)",
                              "ENTRY %main (a: f32[8,16]) -> f32[8,16] {\n  %a = f32[65536,65536,65536,65536]{3,2,1,0}"
                              " parameter(0)")],
    "contracting-out-of-range": [("lhs_contracting_dims={1}", "lhs_contracting_dims={7}")],
    "channel-id-text": [("channel_id=1", "channel_id=abc")],
    "channel-id-huge": [("channel_id=1", "channel_id=99999999999999999999999")],
    "source-line-huge": [("source_line=3", "source_line=99999999999999999999999")],
    "stack-frame-missing": [('source_file="f.py" source_line=3', "stack_frame_id=99")],
    "tuple-index-huge": [("get-tuple-element(%loop), index=1", "get-tuple-element(%loop), index=99999999999")],
    "operand-undefined": [("fusion(%ar), kind=kLoop", "fusion(%nothere), kind=kLoop")],
    "constant-huge": [("%n = s32[] constant(4)", "%n = s32[] constant(99999999999999999999999)")],
    "deep-tuple": [("-> pred[] {", "-> " + "(" * 3000 + "pred[]" + ")" * 3000 + " {")],
    "conv-zero-groups": [("%d = f32[8,8]{1,0} dot(%ar, %ar), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
                          "%d = f32[8,8]{1,0} convolution(%ar, %ar), window={size=0}, dim_labels=bf_oi->bf, "
                          "feature_group_count=0, batch_group_count=0")],
    "slice-huge": [("%r = f32[8,16]{1,0} get-tuple-element(%loop), index=1",
                    "%r0 = f32[8,16]{1,0} get-tuple-element(%loop), index=1\n"
                    "  %r = f32[8,16]{1,0} slice(%r0), slice={[0:99999999999999999999], [0:16:0]}")],
    "layout-out-of-range": [("%d = f32[8,8]{1,0} dot", "%d = f32[8,8]{7,0} dot")],
    "dynamic-dim": [("%d = f32[8,8]{1,0} dot", "%d = f32[8,?]{1,0} dot")],
    "dynamic-dim-parameter": [("ENTRY %main (a: f32[8,16]) -> f32[8,16] {\n  %a = f32[8,16]{1,0} parameter(0)",
                               "ENTRY %main (a: f32[?,16]) -> f32[8,16] {\n  %a = f32[?,16]{1,0} parameter(0)")],
    "groups-empty-group": [("replica_groups={{0,1,2,3}}", "replica_groups={{}}")],
    "tile-zero": [("%d = f32[8,8]{1,0} dot", "%d = f32[8,8]{1,0:T(0,128)} dot")],
    "tile-huge": [("%d = f32[8,8]{1,0} dot", "%d = f32[8,8]{1,0:T(9223372036854775807,9223372036854775807)} dot")],
    "parameter-named": [("%a = f32[8,16]{1,0} parameter(0)", "%a = f32[8,16]{1,0} parameter(%a)")],
    "mesh-axis-zero": [("replica_groups={{0,1,2,3}}", "replica_groups=mesh['x'=4,'y'=0] {'y'}")],
    "iota-groups-zero": [("replica_groups={{0,1,2,3}}", "replica_groups=[0,4]<=[0]")],
    "stack-frame-no-location": [("HloModule crafted, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}",
                                 "HloModule crafted, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}"
                                 '\n\nFileNames\n1 "f.py"\n\nFunctionNames\n1 "f"\n\nFileLocations\n'
                                 "1 {file_name_id=1 function_name_id=1 line=3}\n\nStackFrames\n1 {parent_frame_id=0}"),
                                ('source_file="f.py" source_line=3', "stack_frame_id=1")],
    "backend-config-deep": [('"known_trip_count":{"n":"4"}',
                             '"known_trip_count":{"n":"4"},"x":' + "[" * 5000 + "]" * 5000)],
}
HLO_CRAFTS: tuple[str, ...] = tuple(_HLO_EDITS) + tuple(STRUCTURE_CRAFTS)


def craft_hlo(seed_text: str, craft: str, rng: random.Random) -> str:
    """The template module with one crafted construct, or a crafted structure (`seed_text` is kept
    for byte mutations)."""
    del seed_text, rng
    if craft in STRUCTURE_CRAFTS:
        return STRUCTURE_CRAFTS[craft]()
    text = HLO_TEMPLATE
    for old, new in _HLO_EDITS[craft]:
        assert old in text, (craft, old)
        text = text.replace(old, new, 1)
    return text


REPORT_VALUES: list[Any] = ["x", [], {}, None, 10**400, -1, -1e300, True, [None], {"a": [1]}, "NaN", 2**64]
REPORT_CRAFTS: tuple[str, ...] = ("delete", "retype", "deep", "truncate", "runs", "nan", "big-int", "ops-nulls",
                                  "steps-many", "empty")


def _random_path(doc: Any, rng: random.Random) -> list[Any]:
    path: list[Any] = []
    node = doc
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(sorted(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    return path


def craft_report(doc: dict[str, Any], craft: str, rng: random.Random) -> bytes:
    """An `audit.report/v1` report with one kind of damage a hand edit, a truncation or an attacker makes."""
    if craft in ("delete", "retype"):
        path = _random_path(doc, rng) or ["summary"]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if craft == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(REPORT_VALUES)
        return json.dumps(doc).encode()
    text = json.dumps(doc)
    if craft == "deep":
        depth = rng.choice([100, 5000, 100_000])
        return text[:-1].encode() + b', "x": ' + b"[" * depth + b"]" * depth + b"}"
    if craft == "truncate":
        return text[: rng.randrange(len(text))].encode()
    if craft == "runs":
        n, steps = rng.choice([(2000, 50), (20_000, 1), (3, 200_000)])
        doc["runs"] = [{"source": f"r{i}", "steps": [0.01 + 1e-5 * j for j in range(steps)]} for i in range(n)]
        return json.dumps(doc).encode()
    if craft == "nan":
        return text.replace('"time_s": ', '"time_s": NaN, "was": ', 1).encode()
    if craft == "big-int":
        return text.replace('"steps": ', '"steps": ' + "9" * rng.choice([30, 400, 5000]) + ', "was": ', 1).encode()
    if craft == "ops-nulls":
        doc["ops"] = [None] * rng.randint(1, 5)
        return json.dumps(doc).encode()
    if craft == "steps-many":
        doc["steps"] = [{"index": i, "time_s": 0.01 + 1e-7 * i} for i in range(rng.choice([100_000, 250_000]))]
        return json.dumps(doc).encode()
    if craft == "empty":
        return rng.choice([b"", b"{}", b"[]", b"null", b'"audit.report/v1"'])
    raise ValueError(craft)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """Random damage: a truncation, flipped bytes, a cut, or a duplicated chunk."""
    kind = rng.choice(["truncate", "flip", "cut", "duplicate"])
    if kind == "truncate":
        return data[: rng.randrange(len(data) or 1)]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            i = rng.randrange(len(out))
            out[i] ^= rng.randint(1, 255)
        return bytes(out)
    i = rng.randrange(len(data) or 1)
    n = rng.randint(1, max(1, len(data) // 10))
    if kind == "cut":
        return data[:i] + data[i + n:]
    return data[:i] + data[i:i + n] * rng.randint(2, 5) + data[i:]
