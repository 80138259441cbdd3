"""Make big HLO programs, as text and as the same program in a proto, from a real JAX compile.

    python bench/make_big_hlo.py [--kind unrolled|computations|both] [--mb 50] [--out bench/data/hlo]

JAX compiles a block of `--layers` layers (dot, tanh, softmax, a mean: XLA:CPU fuses them into a
few dozen fusions) once; the block's compiled HLO is then repeated, each copy reading the one
before, until the text reaches `--mb` MB. Compiling the whole program instead would take XLA hours
(1,000 layers took it four minutes here), and what the tool reads is the same: XLA's own text.

- `unrolled`: one entry computation holding every copy's instructions (about 200,000 for 50 MB),
  the copies calling the block's fused computations, shared as XLA's computation deduplicator
  leaves identical ones: the shape of a fully unrolled program.
- `computations`: every copy with its own renamed fused computations (tens of thousands of
  computations), the shape of a big model's dump.

Each text is parsed by XLA's own HLO parser (the installed jaxlib), which checks the grammar and
writes the `.hlo.pb` (a serialized HloModuleProto) of the same program. Prints each file's path,
size, instruction and computation counts.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_NAME = re.compile(r"%([\w.\-]+)")


def compile_block(layers: int) -> str:
    """XLA:CPU's optimized HLO of `layers` layers of x -> x + softmax(tanh(x @ w + b)) * mean."""
    import jax
    import jax.numpy as jnp

    def block(x, w, b):
        for i in range(layers):
            h = jnp.tanh(x @ w[i % 4] + b[i % 4])
            x = x + jax.nn.softmax(h, axis=-1) * jnp.mean(h)
        return x

    args = (jnp.ones((16, 128)), jnp.ones((4, 128, 128)), jnp.ones((4, 128)))
    return str(jax.jit(block).lower(*args).compile().as_text())


def split(text: str) -> tuple[list[str], dict[str, list[str]], str]:
    """(the lines before the first computation, computations by name in order, the entry's name)."""
    lines = text.splitlines()
    head: list[str] = []
    comps: dict[str, list[str]] = {}
    entry, current = "", None
    for line in lines:
        if current is None:
            match = re.match(r"^(ENTRY )?%([\w.\-]+) .*\{$", line)
            if match:
                current = match.group(2)
                comps[current] = [line]
                entry = current if match.group(1) else entry
            elif not comps:
                head.append(line)
            continue
        comps[current].append(line)
        if line == "}":
            current = None
    return head, comps, entry


def _renamed(lines: list[str], names: dict[str, str]) -> list[str]:
    return [_NAME.sub(lambda m: "%" + names.get(m.group(1), m.group(1)), line) for line in lines]


def stitch(block: str, copies: int, own_computations: bool) -> str:
    """`copies` of the block's entry in one entry computation, each copy's input its predecessor's
    root; with `own_computations`, each copy calls renamed copies of the fused computations."""
    head, comps, entry = split(block)
    entry_lines = comps.pop(entry)
    header, body = entry_lines[0], entry_lines[1:-1]
    defined = [m.group(1) for line in body if (m := re.match(r"\s*(?:ROOT )?%([\w.\-]+) = ", line))]
    params = {m.group(1): int(m.group(2)) for line in body
              if (m := re.match(r"\s*%([\w.\-]+) = .* parameter\((\d+)\)", line))}
    root = next(m.group(1) for line in body if (m := re.match(r"\s*ROOT %([\w.\-]+) = ", line)))
    x = next(name for name, number in params.items() if number == 0)
    out, called = [], []
    previous = x
    for c in range(copies):
        names = {name: f"{name}.u{c}" for name in defined if name not in params}
        names[x] = previous
        if own_computations:
            names.update({name: f"{name}.u{c}" for name in comps})
            called += [line for lines in comps.values() for line in _renamed(lines, names)] + [""]
        for line in _renamed(body, names):
            if c and " parameter(" in line:
                continue  # the parameters are the first copy's
            out.append(line.replace("ROOT ", "") if c < copies - 1 else line)
        previous = names[root]
    shared = [] if own_computations else [line for lines in comps.values() for line in lines + [""]]
    return "\n".join(head + shared + called + [header] + out + ["}", ""])


def write(text: str, path: Path) -> None:
    """The text, and the same program as XLA's parser reads it, serialized (`.hlo.pb`)."""
    from jax._src.lib import xla_client

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    start = time.perf_counter()
    module = xla_client.hlo.hlo_module_from_text(text)
    proto = path.with_suffix(".hlo.pb")
    proto.write_bytes(module.as_serialized_hlo_module_proto())
    parsed = time.perf_counter() - start
    instructions = sum(1 for line in text.splitlines() if re.match(r"\s+(ROOT )?%\S+ = ", line))
    computations = sum(1 for line in text.splitlines() if line.endswith("{") and not line.startswith(" "))
    print(f"{path}\t{len(text) / 1e6:.1f} MB\t{instructions} instructions\t{computations} computations\t"
          f"XLA's parser {parsed:.1f} s")
    print(f"{proto}\t{proto.stat().st_size / 1e6:.1f} MB")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=("unrolled", "computations", "both"), default="both")
    parser.add_argument("--mb", type=float, default=50.0, help="size of each text, MB")
    parser.add_argument("--layers", type=int, default=16, help="layers in the compiled block")
    parser.add_argument("--out", type=Path, default=HERE / "data" / "hlo")
    args = parser.parse_args()
    block = compile_block(args.layers)
    for kind in (("unrolled", "computations") if args.kind == "both" else (args.kind,)):
        own = kind == "computations"
        one = len(stitch(block, 2, own)) - len(stitch(block, 1, own))
        copies = max(1, round((args.mb * 1e6 - len(stitch(block, 1, own))) / one) + 1)
        write(stitch(block, copies, own), args.out / f"{kind}.hlo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
