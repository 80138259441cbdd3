"""The families of the hostile-input campaign (bench/hostile_campaign.py): each builds cases from real
inputs with the crafts in tests/hostile_*.py.

A case is the `audit` command line and the files its folder holds; `{dir}` in the command is the
case's folder. Seeds are real: the captures in tests/data/fixtures and tests/data/captures, a CPU
capture this machine makes with `audit run`, an Nsight SQLite export built from a real nsys-jax
archive's ranges, the catalog's hardware files and reports the tool writes; the real HLO texts of
tests/data (template reader), TransformerEngine's attention calls (attention configs), and the default
run's CPU trace (read by each decoder path, `decoders`).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hostile_archives import (NSYS_CRAFTS, SQLITE_CRAFTS, TOML_CRAFTS, ZIP_MEMBER_CRAFTS, craft_nsys, craft_sqlite,
                              craft_toml, craft_zip_member)
from hostile_hlo import PROTO_CRAFTS, TEMPLATE_CRAFTS, craft_attention, craft_hlo_proto, craft_template_text
from hostile_inputs import HLO_CRAFTS, REPORT_CRAFTS, XPLANE_CRAFTS, craft_hlo, craft_report, craft_xplane, mutate_bytes

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "data" / "fixtures"
SEED_HLO = sorted((ROOT / "tests" / "data" / "hlo").glob("*.hlo"))
# Real texts of every kind for the template reader: hand-checked, TPU AOT dumps, TransformerEngine attention.
TEMPLATE_TEXTS = [*SEED_HLO, *sorted((ROOT / "tests" / "data" / "hlo" / "tpu-aot").glob("*.txt")),
                  *sorted((ROOT / "tests" / "data" / "te_attention").glob("*.hlo.txt"))]
CPU_RUN = ROOT / "tests" / "data" / "captures" / "cpu-default-run"
# The decoder paths a CPU trace is read by ($AUDIT_DECODER): each must give the same report.
DECODERS = ("c", "numba", "python")
NSYS_ARCHIVE = FIXTURES / "gpu-a100-pax-nsys-jax" / "pax_fsdp4_4proc_proc0.zip"
HLO_PROTOS = [FIXTURES / "gpu-h100-maxtext" / "module_0016.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb",
              FIXTURES / "gpu-h100-maxtext" / "module_0016.jit_train_step.before_optimizations.hlo.pb"]
CATALOG = ROOT / "costmodel" / "chips" / "data"
CALC = ["calc", "matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--dtype", "bf16"]


@dataclass
class Case:
    family: str
    name: str
    argv: list[str]  # after `audit`; {dir} is the case's folder
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()  # files the command may create or change
    # Run once per $AUDIT_DECODER named here: the exit codes and the JSON reports' summaries must agree.
    decoders: tuple[str, ...] = ()


@dataclass
class Seeds:
    """The real inputs the families mutate, read once."""

    profiles: dict[str, bytes]
    reports: dict[str, bytes]
    sqlite: Path
    dump: Path  # the HLO dump folder the SQLite export's programs are in


def profile_cases(rng: random.Random, n: int, seeds: Seeds) -> list[Case]:
    cases = []
    for i in range(n):
        craft = rng.choice(XPLANE_CRAFTS)
        data = craft_xplane(seeds.profiles[rng.choice(sorted(seeds.profiles))], craft, rng)
        cases.append(Case("xplane-field", f"{craft}-{i}", ["inspect", "{dir}/p.xplane.pb", "-q", "--json",
                                                           "{dir}/out.json"],
                          files={"p.xplane.pb": data}, outputs=("out.json",)))
    return cases


def hlo_cases(rng: random.Random, n: int) -> list[Case]:
    cases = []
    for i in range(n):
        craft = rng.choice(HLO_CRAFTS)
        text = craft_hlo(rng.choice(SEED_HLO).read_text(), craft, rng)
        cases.append(Case("hlo-craft", f"{craft}-{i}", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100",
                                                        "--json", "{dir}/out.json"],
                          files={"m.hlo": text.encode()}, outputs=("out.json",)))
    return cases


def proto_cases(rng: random.Random, n: int) -> list[Case]:
    protos = [p.read_bytes() for p in HLO_PROTOS]
    cases = []
    for i in range(n):
        craft = rng.choice(sorted(PROTO_CRAFTS))
        data = craft_hlo_proto(rng.choice(protos), craft, rng)
        cases.append(Case("hlo-proto", f"{craft}-{i}", ["inspect", "{dir}/m.hlo.pb", "-q", "--hardware", "h100:4",
                                                        "--json", "{dir}/out.json"],
                          files={"m.hlo.pb": data}, outputs=("out.json",)))
    return cases


def report_cases(rng: random.Random, n: int, seeds: Seeds) -> list[Case]:
    cases = []
    for i in range(n):
        craft = rng.choice(REPORT_CRAFTS)
        base = seeds.reports[rng.choice(sorted(seeds.reports))]
        data = craft_report(json.loads(base), craft, rng)
        cases.append(Case("report-json", f"{craft}-{i}", ["diff", "{dir}/base.json", "{dir}/head.json", "-q",
                                                          "--json", "{dir}/diff.json"],
                          files={"base.json": base, "head.json": data}, outputs=("diff.json",)))
    return cases


def nsys_cases(rng: random.Random, n: int) -> list[Case]:
    return _archive_cases("nsys-jax", NSYS_CRAFTS, craft_nsys, rng, n)


def _archive_cases(family: str, crafts: Sequence[str], craft: Callable[[bytes, str, random.Random], bytes],
                   rng: random.Random, n: int) -> list[Case]:
    """`n` copies of the real nsys-jax archive, each damaged by one of `crafts`, read by inspect."""
    archive = NSYS_ARCHIVE.read_bytes()
    cases = []
    for i in range(n):
        name = rng.choice(crafts)
        cases.append(Case(family, f"{name}-{i}", ["inspect", "{dir}/a.zip", "-q", "--json", "{dir}/out.json"],
                          files={"a.zip": craft(archive, name, rng)}, outputs=("out.json",)))
    return cases


def sqlite_cases(rng: random.Random, n: int, seeds: Seeds, work: Path) -> list[Case]:
    dump = {f"dump/{p.name}": p.read_bytes() for p in seeds.dump.iterdir()}
    cases = []
    for i in range(n):
        craft = rng.choice(SQLITE_CRAFTS)
        path = work / f"crafted-{i}.sqlite"
        shutil.copy(seeds.sqlite, path)
        craft_sqlite(path, craft, rng)
        cases.append(Case("nsys-sqlite", f"{craft}-{i}", ["inspect", "{dir}/x.sqlite", "--hlo", "{dir}/dump", "-q",
                                                          "--json", "{dir}/out.json"],
                          files={"x.sqlite": path.read_bytes(), **dump}, outputs=("out.json",)))
        path.unlink()
    return cases


def toml_cases(rng: random.Random, n: int) -> list[Case]:
    entries = sorted(CATALOG.glob("*.toml"))
    hlo = SEED_HLO[0].read_bytes()
    cases = []
    for i in range(n):
        craft = rng.choice(TOML_CRAFTS)
        text = craft_toml(rng.choice(entries).read_text(), craft, rng)
        argv = rng.choice([[*CALC, "--hardware", "{dir}/hw.toml", "--json", "-"],
                           ["inspect", "{dir}/m.hlo", "-q", "--hardware", "{dir}/hw.toml"],
                           ["hardware", "show", "{dir}/hw.toml"]])
        cases.append(Case("hardware-toml", f"{craft}-{i}", argv, files={"hw.toml": text.encode(), "m.hlo": hlo}))
    return cases


def mutation_cases(rng: random.Random, n: int, seeds: Seeds) -> list[Case]:
    """Random byte damage of every input format."""
    formats: dict[str, Callable[[], tuple[bytes, str, list[str]]]] = {
        "xplane": lambda: (seeds.profiles[rng.choice(sorted(seeds.profiles))], "m.xplane.pb", ["inspect"]),
        "hlo": lambda: (rng.choice(SEED_HLO).read_bytes(), "m.hlo", ["inspect"]),
        "hlo-proto": lambda: (rng.choice(HLO_PROTOS).read_bytes(), "m.hlo.pb", ["inspect"]),
        "report": lambda: (seeds.reports[rng.choice(sorted(seeds.reports))], "m.json", ["diff", "{dir}/m.json"]),
        "nsys-jax": lambda: (NSYS_ARCHIVE.read_bytes(), "m.zip", ["inspect"]),
        "sqlite": lambda: (seeds.sqlite.read_bytes(), "m.sqlite", ["inspect"]),
        "toml": lambda: ((CATALOG / "h100.toml").read_bytes(), "m.toml", [*CALC, "--hardware"]),
    }
    cases = []
    for i in range(n):
        kind = rng.choice(sorted(formats))
        data, name, argv = formats[kind]()
        extra = {"hlo": ["-q", "--hardware", "h100"], "hlo-proto": ["-q", "--hardware", "h100"], "report": ["-q"],
                 "sqlite": ["-q", "--hlo", str(seeds.dump)], "toml": []}.get(kind, ["-q"])
        cases.append(Case("byte-mutation", f"{kind}-{i}", [*argv, "{dir}/" + name, *extra],
                          files={name: mutate_bytes(data, rng)}))
    return cases


def template_cases(rng: random.Random, n: int) -> list[Case]:
    """Real HLO texts with lines the template reader must leave to the line reader (hostile_hlo)."""
    cases = []
    for i in range(n):
        craft = rng.choice(sorted(TEMPLATE_CRAFTS))
        text = craft_template_text(rng.choice(TEMPLATE_TEXTS).read_text(), craft, rng)
        cases.append(Case("hlo-template", f"{craft}-{i}", ["inspect", "{dir}/m.hlo", "-q", "--hardware", "h100",
                                                           "--json", "{dir}/out.json"],
                          files={"m.hlo": text.encode()}, outputs=("out.json",)))
    return cases


def zip_member_cases(rng: random.Random, n: int) -> list[Case]:
    return _archive_cases("zip-member", ZIP_MEMBER_CRAFTS, craft_zip_member, rng, n)


def decoder_cases(rng: random.Random, n: int) -> list[Case]:
    """The default run's real CPU trace with crafted stats and times, read by each decoder path."""
    seed = (CPU_RUN / "vm.xplane.pb").read_bytes()
    hardware = (CPU_RUN / "cpu.toml").read_bytes()
    crafts = ("stat-no-value", "stat-two-values", "stat-u64", "stat-not-utf8", "op-zero-duration", "stat-value",
              "duration", "occurrences", "line-duration", "timestamp")
    cases = []
    for i in range(n):
        craft = rng.choice(crafts)
        cases.append(Case("decoder-paths", f"{craft}-{i}", ["inspect", "{dir}/p.xplane.pb", "-q", "--hardware",
                                                            "{dir}/cpu.toml", "--json", "{dir}/out.json"],
                          files={"p.xplane.pb": craft_xplane(seed, craft, rng), "cpu.toml": hardware},
                          outputs=("out.json",), decoders=DECODERS))
    return cases


def attention_cases(rng: random.Random, n: int) -> list[Case]:
    """Fused attention calls stating numbers no kernel has: TransformerEngine attributes of real calls, cuDNN
    configs, Pallas kernels of huge sequences."""
    texts = sorted((ROOT / "tests" / "data" / "te_attention").glob("*.hlo.txt"))
    cases = []
    for i in range(n):
        text = craft_attention(rng.choice(texts).read_text(), rng)
        chip = "v5p" if "tpu_custom_call" in text else "h100"
        cases.append(Case("attention-config", f"attention-{i}", ["inspect", "{dir}/m.hlo", "-q", "--hardware", chip,
                                                                 "--json", "{dir}/out.json"],
                          files={"m.hlo": text.encode()}, outputs=("out.json",)))
    return cases
