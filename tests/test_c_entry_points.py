"""Every entry point of the C extensions called with sizes that disagree: each refuses them with a Python
exception (or, for bytes whose own length prefixes lie, the None its contract gives for malformed bytes),
and never reads or writes past what it was given. Each module's calls run in a child process, so a call
that crashes fails its test (exit -11) instead of ending pytest; each child also makes one consistent call
and checks its answer, so a module that refused everything would fail too."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import skip_without_c

pytestmark = [pytest.mark.slow, skip_without_c]  # child processes

# Runs in each child before the module's cases: `attempt(label, call)` prints the label and what the
# call gave (its result, or its exception's type), flushed, so a crash is seen after the last label.
ATTEMPT = """
import sys

def attempt(label, call):
    try:
        out = call()
    except Exception as exc:  # the type is the result: the test compares it
        out = type(exc).__name__
    print(f"{label}: {out}", flush=True)

def varint(v):
    out = bytearray()
    while True:
        out.append((v & 127) | (128 if v > 127 else 0))
        v >>= 7
        if not v:
            return bytes(out)

def field(number, wire, payload):
    '''One protobuf field: varint payloads are ints, length-delimited ones bytes.'''
    head = varint(number << 3 | wire)
    return head + (varint(payload) if wire == 0 else varint(len(payload)) + payload)
"""

XLINE = """
import numpy as np
from audit.parsers.xplane import _xline

# A line at timestamp 5 of duration 9 with two events; the first carries stat 1 (int64 7).
stat = field(1, 0, 1) + field(4, 0, 7)
events = [field(1, 0, 3) + field(2, 0, 10) + field(3, 0, 20) + field(4, 2, stat), field(1, 0, 4) + field(3, 0, 30)]
line = field(3, 0, 5) + b"".join(field(4, 2, e) for e in events) + field(9, 0, 9)
slot_of = np.array([-1, 0], np.int64)  # stat 1 -> slot 0

def arrays(n=2, slots=1, **changed):
    made = dict(slot_of=slot_of, mid=np.zeros(n, np.int64), off=np.zeros(n, np.int64), dur=np.zeros(n, np.int64),
                occ=np.zeros(n, np.int64), kind=np.zeros((n, slots), np.uint8), value=np.zeros((n, slots), np.int64),
                length=np.zeros((n, slots), np.int32))
    made.update(changed)
    return made

def decode(data=line, **changed):
    a = arrays(**changed)
    got = _xline.decode(data, a["slot_of"], a["mid"], a["off"], a["dur"], a["occ"], a["kind"], a["value"],
                        a["length"])
    return got if got is None else (got, a["mid"].tolist(), a["dur"].tolist(), a["value"][:, 0].tolist())

attempt("count", lambda: _xline.count_events(line))
attempt("decode", decode)
attempt("count of no buffer", lambda: _xline.count_events(2))
attempt("count of text", lambda: _xline.count_events("line"))
attempt("count of an event longer than the line", lambda: _xline.count_events(line[:-6]))
attempt("count of an event of 2^63 bytes", lambda: _xline.count_events(b"\\x22" + varint(1 << 63)))
attempt("count of an event of 2^64-1 bytes", lambda: _xline.count_events(b"\\x22" + varint((1 << 64) - 1)))
attempt("decode of an event of 2^63 bytes", lambda: decode(b"\\x22" + varint(1 << 63) + b"\\0" * 16))
attempt("decode of eight arrays", lambda: _xline.decode(line, *list(arrays().values())[:-1]))
attempt("decode of fewer offsets than ids", lambda: decode(off=np.zeros(1, np.int64)))
attempt("decode of more durations than ids", lambda: decode(dur=np.zeros(3, np.int64)))
attempt("decode of fewer occurrences than ids", lambda: decode(occ=np.zeros(0, np.int64)))
attempt("decode of kinds for another slot count", lambda: decode(kind=np.zeros((2, 2), np.uint8)))
attempt("decode of values for another slot count", lambda: decode(value=np.zeros((2, 3), np.int64)))
attempt("decode of lengths for fewer events", lambda: decode(length=np.zeros((1, 1), np.int32)))
attempt("decode of no events but kinds", lambda: decode(n=0, kind=np.zeros(3, np.uint8)))
attempt("decode of 4-byte ids", lambda: decode(mid=np.zeros(2, np.int32)))
attempt("decode of 8-byte lengths", lambda: decode(length=np.zeros((2, 1), np.int64)))
attempt("decode of 4-byte stat slots", lambda: decode(slot_of=slot_of.astype(np.int32)))
attempt("decode of 8-byte line items", lambda: decode(np.frombuffer(line[:8], np.int64)))
attempt("decode into read-only ids", lambda: decode(mid=bytes(16)))
attempt("decode into strided offsets", lambda: decode(off=np.zeros(4, np.int64)[::2]))
attempt("decode into fewer events than the line", lambda: decode(n=1))
attempt("decode into more events than the line", lambda: decode(n=3))
attempt("decode of slots past the arrays", lambda: decode(slot_of=np.array([5, 1 << 40], np.int64)))
attempt("decode of negative slots", lambda: decode(slot_of=np.array([-7, -1 << 62], np.int64)))
attempt("decode of no slots", lambda: decode(slot_of=np.zeros(0, np.int64)))
"""

HLOSCAN = """
from audit.parsers.hlo import _hloscan

# An instruction named "a", id 7, operands 1 and 2 (packed), opcode "add" (field 2, the rest).
instruction = field(1, 2, b"a") + field(2, 2, b"add") + field(35, 0, 7) + field(36, 2, varint(1) + varint(2))
computation = field(2, 2, instruction)
module = field(3, 2, computation)
wrapped = field(1, 2, module)

attempt("instructions", lambda: _hloscan.instructions(computation))
attempt("computations", lambda: _hloscan.computations(module, False))
attempt("computations wrapped", lambda: _hloscan.computations(wrapped, True))
attempt("instructions of no buffer", lambda: _hloscan.instructions(7))
attempt("instructions of text", lambda: _hloscan.instructions("computation"))
attempt("computations of text", lambda: _hloscan.computations("module", False))
attempt("computations without the flag", lambda: _hloscan.computations(module))
attempt("instructions cut inside an instruction", lambda: _hloscan.instructions(computation[:-3]))
attempt("instructions of an instruction of 2^63 bytes", lambda: _hloscan.instructions(b"\\x12" + varint(1 << 63)))
attempt("instructions of an instruction of 2^64-1 bytes",
        lambda: _hloscan.instructions(b"\\x12" + varint((1 << 64) - 1) + instruction))
name_past = field(1, 2, b"a")[:-2] + varint(40) + b"a"
attempt("instructions of a name past its instruction", lambda: _hloscan.instructions(field(2, 2, name_past)))
operands_past = field(36, 2, varint(1))[:-2] + varint(1 << 62) + varint(1)
attempt("instructions of operands past their instruction",
        lambda: _hloscan.instructions(field(2, 2, operands_past)))
attempt("instructions of a truncated varint", lambda: _hloscan.instructions(b"\\x12\\x80\\x80"))
attempt("computations of a computation past the module", lambda: _hloscan.computations(module[:-1], False))
attempt("computations of a module of 2^63 bytes", lambda: _hloscan.computations(b"\\x0a" + varint(1 << 63), True))
"""

STAMP = """
from audit.base import _stamp

class Record:
    __slots__ = ("a", "b", "c")
    def __init__(self, a, b, c):
        self.a, self.b, self.c = a, b, c

class Wide:
    __slots__ = tuple(f"f{i}" for i in range(40))

class Plain:
    pass

Record.foreign = Wide.__dict__["f39"]  # another class's slot, stored under a name of this one

attempt("layout of too few fields", lambda: _stamp.layout(Record, ("a", "b"), ("a",)))
attempt("layout of too many fields", lambda: _stamp.layout(Record, ("a", "b", "c", "d"), ("a",)))
attempt("layout of a field named twice", lambda: _stamp.layout(Record, ("a", "b", "b"), ("a",)))
attempt("layout of a foreign slot as a field", lambda: _stamp.layout(Record, ("a", "b", "foreign"), ("a",)))
attempt("layout of a foreign slot stamped", lambda: _stamp.layout(Record, ("a", "b", "c"), ("foreign",)))
attempt("stamp after every layout was refused", lambda: _stamp.stamp(Record(1, 2, 3), 4))
attempt("layout of a method stamped", lambda: _stamp.layout(Record, ("a", "b", "c"), ("__init__",)))
attempt("layout of a missing field stamped", lambda: _stamp.layout(Record, ("a", "b", "c"), ("z",)))
attempt("layout of 17 stamped fields", lambda: _stamp.layout(Wide, Wide.__slots__, Wide.__slots__[:17]))
attempt("layout of a class with a dict", lambda: _stamp.layout(Plain, (), ()))
attempt("layout of a built-in class", lambda: _stamp.layout(complex, (), ()))
attempt("layout of field numbers", lambda: _stamp.layout(Record, (0, 1, 2), ()))
attempt("layout of a list of fields", lambda: _stamp.layout(Record, ["a", "b", "c"], ()))
attempt("layout", lambda: _stamp.layout(Record, ("a", "b", "c"), ("c", "a")))
copy = lambda *values: (lambda r: (r.a, r.b, r.c))(_stamp.stamp(Record(1, 2, 3), *values))
attempt("stamp", lambda: copy(30, 10))
attempt("stamp of one value too few", lambda: copy(30))
attempt("stamp of one value too many", lambda: copy(30, 10, 20))
attempt("stamp of no template", lambda: _stamp.stamp())
attempt("stamp of another class's template", lambda: _stamp.stamp(Plain(), 1, 2))
attempt("stamp of a subclass's template", lambda: _stamp.stamp(type("Sub", (Record,), {})(1, 2, 3), 1, 2))
"""

RECENCY = """
from array import array
from audit.costmodel import _recency
from audit.costmodel import residency_walk

ints = lambda *v: array("i", v).tobytes()
doubles = lambda *v: array("d", v).tobytes()
# Three ops: 0 and 1 produce buffers 0 and 1, op 2 reads both; one capacity of 64 bytes.
args = dict(kinds=bytes(3), order=ints(0, 1, 2), starts=ints(0, 0, 0, 2), operands=ints(0, 1), body=ints(-1, -1, -1),
            sizes=doubles(16.0, 32.0, 8.0), hidden=bytes(3), by_name=ints(0, 1, 2), params=ints(), donated=ints(),
            root=2, entry=1, capacities=doubles(64.0), costs=ints(1, 1, 2))

def walk(**changed):
    return _recency.walk(*{**args, **changed}.values())

def python_walk():
    a = {k: array("i", v) if k in ("order", "starts", "operands", "body", "by_name", "params", "donated", "costs")
         else array("d", v) if k in ("sizes", "capacities") else v for k, v in args.items()}
    return residency_walk.walk(*a.values())

attempt("walk is the Python walk", lambda: walk() == python_walk())
attempt("walk of a root past the ops", lambda: walk(root=3))
attempt("walk of a negative root", lambda: walk(root=-1))
attempt("walk of a root past 2^31", lambda: walk(root=1 << 40))
attempt("walk of more ops than buffers", lambda: walk(sizes=doubles(16.0, 32.0), hidden=bytes(2)))
attempt("walk of fewer order entries than ops", lambda: walk(order=ints(0, 1)))
attempt("walk of starts as long as the ops", lambda: walk(starts=ints(0, 0, 0)))
attempt("walk of starts past the operands", lambda: walk(starts=ints(0, 0, 0, 5)))
attempt("walk of decreasing starts", lambda: walk(starts=ints(0, 2, 0, 2)))
attempt("walk of an operand past the buffers", lambda: walk(operands=ints(0, 3)))
attempt("walk of a negative operand", lambda: walk(operands=ints(0, -2)))
attempt("walk of an operand of 2^31-1", lambda: walk(operands=ints(0, (1 << 31) - 1)))
attempt("walk of operands cut inside an int", lambda: walk(operands=ints(0, 1)[:7], starts=ints(0, 0, 0, 1)))
attempt("walk of a body past the buffers", lambda: walk(kinds=bytes([0, 0, 2]), body=ints(-1, -1, 9)))
attempt("walk of a body of -1 for a loop", lambda: walk(kinds=bytes([0, 0, 2])))
attempt("walk of an unknown kind", lambda: walk(kinds=bytes([0, 0, 9])))
attempt("walk of hidden flags for fewer buffers", lambda: walk(hidden=bytes(2)))
attempt("walk of a name rank past the buffers", lambda: walk(by_name=ints(0, 1, 7)))
attempt("walk of more name ranks than buffers", lambda: walk(by_name=ints(0, 1, 2, 0)))
attempt("walk of a parameter past the ops", lambda: walk(params=ints(3)))
attempt("walk of an odd donated list", lambda: walk(donated=ints(0)))
attempt("walk of a donated buffer past the buffers", lambda: walk(params=ints(0), donated=ints(0, 5)))
attempt("walk of costs for fewer ops", lambda: walk(costs=ints(1, 1)))
attempt("walk of 63 capacities", lambda: walk(capacities=doubles(*[64.0] * 63)))
attempt("walk of text", lambda: walk(order="012"))
"""

CASES = {
    "xline": (XLINE, {
        "count": "2",
        "decode": "((5, 9), [3, 4], [20, 30], [7, 0])",
        "count of no buffer": "TypeError",
        "count of text": "TypeError",
        "count of an event longer than the line": "-1",
        "count of an event of 2^63 bytes": "-1",
        "count of an event of 2^64-1 bytes": "-1",
        "decode of an event of 2^63 bytes": "None",
        "decode of eight arrays": "TypeError",
        "decode of fewer offsets than ids": "ValueError",
        "decode of more durations than ids": "ValueError",
        "decode of fewer occurrences than ids": "ValueError",
        "decode of kinds for another slot count": "ValueError",
        "decode of values for another slot count": "ValueError",
        "decode of lengths for fewer events": "ValueError",
        "decode of no events but kinds": "ValueError",
        "decode of 4-byte ids": "TypeError",
        "decode of 8-byte lengths": "TypeError",
        "decode of 4-byte stat slots": "TypeError",
        "decode of 8-byte line items": "TypeError",
        "decode into read-only ids": "BufferError",
        "decode into strided offsets": "ValueError",
        "decode into fewer events than the line": "None",
        "decode into more events than the line": "None",
        # a stat whose slot is outside the arrays is not one the caller asked about: skipped
        "decode of slots past the arrays": "((5, 9), [3, 4], [20, 30], [0, 0])",
        "decode of negative slots": "((5, 9), [3, 4], [20, 30], [0, 0])",
        "decode of no slots": "((5, 9), [3, 4], [20, 30], [0, 0])",
    }),
    "hloscan": (HLOSCAN, {
        "instructions": "(['a'], [7], [(1, 2)], [()], [b'\\x12\\x03add'])",
        "computations": "[(['a'], [7], [(1, 2)], [()], [b'\\x12\\x03add'])]",
        "computations wrapped": "[(['a'], [7], [(1, 2)], [()], [b'\\x12\\x03add'])]",
        "instructions of no buffer": "TypeError",
        "instructions of text": "TypeError",
        "computations of text": "TypeError",
        "computations without the flag": "TypeError",
        # bytes whose own lengths lie are malformed: None, and the Python reader says what is wrong
        "instructions cut inside an instruction": "None",
        "instructions of an instruction of 2^63 bytes": "None",
        "instructions of an instruction of 2^64-1 bytes": "None",
        "instructions of a name past its instruction": "None",
        "instructions of operands past their instruction": "None",
        "instructions of a truncated varint": "None",
        "computations of a computation past the module": "None",
        "computations of a module of 2^63 bytes": "None",
    }),
    "stamp": (STAMP, {
        "layout of too few fields": "TypeError",
        "layout of too many fields": "TypeError",
        "layout of a field named twice": "TypeError",
        "layout of a foreign slot as a field": "TypeError",
        "layout of a foreign slot stamped": "TypeError",
        "stamp after every layout was refused": "TypeError",
        "layout of a method stamped": "TypeError",
        "layout of a missing field stamped": "AttributeError",
        "layout of 17 stamped fields": "TypeError",
        "layout of a class with a dict": "TypeError",
        "layout of a built-in class": "TypeError",
        "layout of field numbers": "TypeError",
        "layout of a list of fields": "TypeError",
        "layout": "None",
        "stamp": "(10, 2, 30)",
        "stamp of one value too few": "TypeError",
        "stamp of one value too many": "TypeError",
        "stamp of no template": "TypeError",
        "stamp of another class's template": "TypeError",
        "stamp of a subclass's template": "TypeError",
    }),
    "recency": (RECENCY, {
        "walk is the Python walk": "True",
        "walk of a root past the ops": "ValueError",
        "walk of a negative root": "ValueError",
        "walk of a root past 2^31": "OverflowError",
        "walk of more ops than buffers": "ValueError",
        "walk of fewer order entries than ops": "ValueError",
        "walk of starts as long as the ops": "ValueError",
        "walk of starts past the operands": "ValueError",
        "walk of decreasing starts": "ValueError",
        "walk of an operand past the buffers": "ValueError",
        "walk of a negative operand": "ValueError",
        "walk of an operand of 2^31-1": "ValueError",
        "walk of operands cut inside an int": "ValueError",
        "walk of a body past the buffers": "ValueError",
        "walk of a body of -1 for a loop": "ValueError",
        "walk of an unknown kind": "ValueError",
        "walk of hidden flags for fewer buffers": "ValueError",
        "walk of a name rank past the buffers": "ValueError",
        "walk of more name ranks than buffers": "ValueError",
        "walk of a parameter past the ops": "ValueError",
        "walk of an odd donated list": "ValueError",
        "walk of a donated buffer past the buffers": "ValueError",
        "walk of costs for fewer ops": "ValueError",
        "walk of 63 capacities": "ValueError",
        "walk of text": "TypeError",
    }),
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_c_entry_points_refuse_sizes_that_disagree(module: str) -> None:
    # GIVEN a C module's entry points and calls whose sizes, counts, indices and lengths disagree
    code, expected = CASES[module]
    # WHEN a child process makes each call
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ATTEMPT) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)
    got = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    # THEN none crashes (a signal is a negative return code; the next call after the last one printed crashed)
    assert done.returncode == 0, (done.returncode, list(got)[-1:], done.stderr[-2000:])
    # AND each refuses what disagrees with the exception expected, and the consistent calls give their answers
    assert got == expected
