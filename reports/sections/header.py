"""The head of every report: what was analysed, on which chip, with which ceilings and their sources."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import PurePath
from typing import Any

from ...costmodel import units as qty
from ..model.report import ReportModel
from ..text import md_text


def subject(report: ReportModel) -> str:
    """What the report is about: the workload, else the input paths."""
    src = report.source
    return src.get("workload") or ", ".join(str(p) for p in src.get("paths") or []) or "profile"


def _tagged(hw: Mapping[str, Any], key: str, source: object) -> str:
    """A figure's source, with `estimate` where the catalog's figure is one (`hardware.estimates`)."""
    return f"{source}, estimate" if key in (hw.get("estimates") or ()) else str(source)


def _each_peak_once(hw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`peaks_used` with one entry per peak name (a report written before it was kept so
    listed an unknown peak once per op), its ops summed; entries without a known rate left out."""
    merged: dict[str, dict[str, Any]] = {}
    for p in hw.get("peaks_used") or []:
        if not qty.known(p.get("flops_per_s")):
            continue
        entry = merged.setdefault(str(p["peak"]), {**p, "ops": 0})
        entry["ops"] += int(p.get("ops") or 0)
    return list(merged.values())


def _peaks_used(hw: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(peak, rate, source and how many ops it priced) for the peaks that priced the ops, else bf16 or the largest."""
    used = _each_peak_once(hw)
    if used:
        return [(str(p["peak"]), qty.flops_per_s(p["flops_per_s"]),
                 f"{_tagged(hw, 'peak_flops_per_s.' + str(p['peak']), p['source'])}; {qty.count(p['ops'])} ops")
                for p in used]
    peaks = hw.get("peak_flops_per_s") or {}
    sources = hw.get("peak_flops_source") or {}
    main = "bf16" if "bf16" in peaks else next(iter(peaks), None)
    return [] if main is None else [(main, qty.flops_per_s(peaks[main]),
                                     _tagged(hw, f"peak_flops_per_s.{main}", sources.get(main) or hw.get("source")))]


def _memories(hw: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(name, bandwidth and size, source) of HBM and every cache roof."""
    out = [(str(hw.get("main_memory") or "HBM"), qty.bytes_per_s(hw.get("hbm_bytes_per_s")),
            _tagged(hw, "hbm_bytes_per_s", hw.get("hbm_bytes_per_s_source") or hw.get("source")))]
    out += [(str(c["name"]), f"{qty.nbytes(c['capacity_bytes']['value'])} at {qty.bytes_per_s(c['bytes_per_s']['value'])}",
             _tagged(hw, f"caches.{c['name']}.bytes_per_s", c["bytes_per_s"]["source"])) for c in hw.get("caches") or []]
    return out


def _crosses_nodes(report: ReportModel) -> bool:
    """Whether a collective of the report was priced on the scale-out network (between nodes or slices)."""
    return any(c.link == "dcn" for c in report.collectives)


def _link(hw: Mapping[str, Any], crosses_nodes: bool = False) -> str | None:
    """The scale-up link with its bandwidth and source (a TPU's per ICI link, a GPU's per device), and the
    scale-out network's where it priced a collective (`crosses_nodes`) or the user stated it (a file of
    theirs, --set), tagged `estimate` where the figure is one."""
    ic = hw.get("interconnect") or {}
    if not ic.get("name") or ic.get("kind") in ("none", "host-memory"):
        return None
    parts = []
    for key, label, per in (("link_bytes_per_s", str(ic["name"]), "link" if ic.get("kind") == "ici" else "device"),
                            ("dcn_bytes_per_s", str(ic.get("scale_out")), "device")):
        q = ic.get(key)
        if not isinstance(q, Mapping) or q.get("value") is None or (
                key == "dcn_bytes_per_s" and q.get("source") != "user" and not crosses_nodes):
            continue
        parts.append(f"{label} {qty.bytes_per_s(q['value'])} per {per} [{_tagged(hw, 'interconnect.' + key, q.get('source'))}]")
    return ", ".join(parts) or str(ic["name"])


def terminal(report: ReportModel) -> list[str]:
    return [f"audit: {subject(report)}"]


def terminal_hardware(report: ReportModel) -> list[str]:
    """The chip and the ceilings that priced the ops, one line, below the verdict's figures."""
    hw = report.hardware
    parts = [f"peak {p} {rate} [{src}]" for p, rate, src in _peaks_used(hw)]
    parts += [f"{name} {rate} [{src}]" for name, rate, src in _memories(hw)]
    parts += [link] if (link := _link(hw, _crosses_nodes(report))) else []
    return [f"hardware: {hw.get('name')} ({_provenance(hw)}): " + ", ".join(parts)] + [
        f"  {n}" for n in user_changes(hw)]


def user_changes(hw: Mapping[str, Any]) -> list[str]:
    """The hardware notes of the figures the user changed with --set, and of those that moved with them."""
    return [str(n) for n in hw.get("notes") or [] if "from --set" in str(n) or "follows --set" in str(n)]


def _provenance(hw: Mapping[str, Any]) -> str:
    """Where the chip's figures came from, and what in the input identified it."""
    source = str(hw.get("source") or "unknown")
    return f"{source}; identified by {hw['identified_by']}" if hw.get("identified_by") else source


def markdown(report: ReportModel) -> list[str]:
    lines = [f"## Roofline audit: {md_text(subject(report), 120)}"]
    if report.predicted:
        lines += ["", "_Predicted, not measured: an ahead-of-time report from the compiled program._"]
    return lines


def markdown_hardware(report: ReportModel) -> list[str]:
    """The chip and the ceilings that priced the ops, one line below the verdict's figures (a comment holds
    no HTML, so it is not folded there)."""
    hw = report.hardware
    bits = [f"**Hardware:** {md_text(hw.get('name') or 'unknown')} ({md_text(_provenance(hw))})"]
    bits += [f"{md_text(p)} {rate} ({md_text(src)})" for p, rate, src in _peaks_used(hw)]
    bits += [f"{md_text(name)} {rate} ({md_text(src)})" for name, rate, src in _memories(hw)]
    bits += [md_text(link)] if (link := _link(hw, _crosses_nodes(report))) else []
    if report.source.get("jax_version"):
        bits.append(f"JAX {md_text(report.source['jax_version'])}")
    changed = user_changes(hw)
    return [" · ".join(bits)] + (["", "Changed with `--set`: " + "; ".join(md_text(n, 200) for n in changed)]
                                 if changed else [])


def _dl(items: list[tuple[str, str]]) -> str:
    """A definition list; values are already-escaped HTML."""
    return '<dl class="facts">' + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _src(source: object) -> str:
    return f' <span class="src">{escape(str(source))}</span>' if source else ""


def _ceilings(hw: Mapping[str, Any]) -> list[tuple[str, str]]:
    sources = hw.get("peak_flops_source") or {}
    peaks = hw.get("peak_flops_per_s") or {}
    used = {p["peak"]: p for p in _each_peak_once(hw)}
    rows = [(f"Peak {p['peak']}", escape(qty.flops_per_s(p["flops_per_s"]))
             + _src(_tagged(hw, f"peak_flops_per_s.{p['peak']}", p["source"]))
             + escape(f" · priced {qty.count(p['ops'])} ops")) for p in used.values()]
    # The peaks that priced no op are the chip's, not this report's: listed only when none priced one.
    rows += [(f"Peak {dtype}", escape(qty.flops_per_s(v))
              + _src(_tagged(hw, f"peak_flops_per_s.{dtype}", sources.get(dtype) or hw.get("source"))))
             for dtype, v in sorted(peaks.items(), key=lambda kv: -float(kv[1] or 0)) if not used]
    memory = str(hw.get("main_memory") or "HBM")
    rows.append((f"{memory} bandwidth", escape(qty.bytes_per_s(hw.get("hbm_bytes_per_s")))
                 + _src(_tagged(hw, "hbm_bytes_per_s", hw.get("hbm_bytes_per_s_source") or hw.get("source")))))
    if qty.known(hw.get("hbm_bytes")):
        rows.append((f"{memory} capacity", escape(qty.nbytes(hw.get("hbm_bytes"))) + _src(hw.get("source"))))
    for cache in hw.get("caches") or []:  # the memory roofs of ops whose bytes fit in a cache
        rows.append((f"{cache['name']} bandwidth ({qty.nbytes(cache['capacity_bytes']['value'])})",
                     escape(qty.bytes_per_s(cache["bytes_per_s"]["value"]))
                     + _src(_tagged(hw, f"caches.{cache['name']}.bytes_per_s", cache["bytes_per_s"]["source"]))))
    ic = hw.get("interconnect") or {}
    if ic.get("kind") and ic.get("kind") != "none":
        link = ic.get("link_bytes_per_s")
        value = link.get("value") if isinstance(link, Mapping) else link
        source = link.get("source") if isinstance(link, Mapping) else None
        rows.append(("Interconnect", escape(str(ic.get("name") or ic["kind"])) + (
            " · link " + escape(qty.bytes_per_s(value)) + _src(_tagged(hw, "interconnect.link_bytes_per_s", source))
            if link else "")))
        scale_out = ic.get("dcn_bytes_per_s")
        if isinstance(scale_out, Mapping) and scale_out.get("value") is not None:
            rows.append((str(ic.get("scale_out") or "Scale-out"), escape(qty.bytes_per_s(scale_out["value"]))
                         + " per device" + _src(_tagged(hw, "interconnect.dcn_bytes_per_s", scale_out.get("source")))))
    return rows


def html(report: ReportModel) -> str:
    src, hw, tool = report.source, report.hardware, report.tool
    paths = [str(p) for p in src.get("paths") or []]
    what = src.get("workload") or ", ".join(PurePath(p).name for p in paths) or "profile"
    kind = {"run": "profiled run", "xplane": "captured profile", "nsys": "Nsight Systems profile", "hlo": "HLO dump",
            "aot": "ahead-of-time prediction"}.get(str(src.get("kind")), str(src.get("kind") or "report"))
    facts = [("Input", escape(kind) + " · " + "<br>".join(f"<code>{escape(p)}</code>" for p in paths)),
             ("Hardware", f"<strong>{escape(str(hw.get('name') or 'unknown'))}</strong>" + _src(_provenance(hw))
              + ' · <a href="#hardware">its ceilings</a>')]
    jax = src.get("jax_version") or (f"not recorded (analysed with {src['jax_running']})"
                                     if src.get("jax_running") else qty.UNKNOWN)
    facts += [("JAX", escape(str(jax))), ("Created", escape(str(src.get("created") or qty.UNKNOWN))),
              ("Tool", escape(f"{tool.get('name', 'audit')} {tool.get('version', '')}".strip()))]
    command = src.get("command")
    repro = (f'<div class="repro"><span>Reproduce</span><pre><code id="command">{escape(str(command))}'
             "</code></pre></div>") if command else ""
    badge = '<span class="badge predicted">predicted, not measured</span>' if report.predicted else ""
    return (f'<header class="top"><p class="kicker">Roofline audit{badge}</p>'
            f"<h1>{escape(str(what))}</h1>{_dl(facts)}" + repro + "</header>")


def html_hardware(report: ReportModel) -> str:
    """The chip's ceilings that priced the ops, with their sources and the chip's notes, folded."""
    hw = report.hardware
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in hw.get("notes") or [])
    rows = [("Hardware", f"<strong>{escape(str(hw.get('name') or 'unknown'))}</strong>" + _src(_provenance(hw)))]
    return (f'<details class="hardware" id="hardware"><summary>Hardware: {escape(str(hw.get("name") or "unknown"))}, '
            f"the ceilings that priced the ops and where each comes from</summary>{_dl(rows + _ceilings(hw))}"
            + (f'<ul class="notes">{notes}</ul>' if notes else "") + "</details>")
