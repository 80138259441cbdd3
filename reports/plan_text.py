"""`audit plan` as text: the model, training and serving plans, each number with its unit."""

from __future__ import annotations

from typing import Any

from ..costmodel.units import count, figure, nbytes, number, percent, ratio, seconds, share
from .plan_layout_text import (disaggregated_lines, layout_lines, search_lines, serve_layout_lines,
                               serve_search_lines)


def model_text(r: dict[str, Any]) -> list[str]:
    p = r["params"]
    act = r["activation_bytes_per_token"]
    lines = [f"model {r['config']['name']}: {figure(p['total'])} parameters ({figure(p['active'])} active per token)"]
    lines += [f"  {k:<11}{figure(p[k]):>10}  {share(p[k], p['total']):>6}" for k in ("attention", "mlp", "embeddings", "norms")]
    lines += [f"FLOPs per token at seq {r['seq']}: forward {figure(r['forward_flops_per_token'])} FLOP, "
              f"training {figure(r['training_flops_per_token'])} FLOP (6N = {figure(r['six_n_flops_per_token'])})",
              f"attention FLOPs overtake the matmuls beyond seq {number(r['attention_crossover_seq'])} tokens",
              f"KV cache: {nbytes(r['kv_bytes_per_token'])} per token in {r['kv_dtype']}",
              f"saved activations per token: {nbytes(act['no_remat'])} without remat, "
              f"{nbytes(act['remat'])} with {count(act['checkpoints_per_layer'])} checkpoint(s) per layer"]
    if act.get("by_policy"):
        lines.append("kept on the chip per token by remat policy: "
                     + ", ".join(f"{k} {nbytes(v)}" for k, v in act["by_policy"].items()))
    return lines


def train_text(r: dict[str, Any]) -> list[str]:
    s, m = r["setup"], r["memory_bytes"]
    lines = [f"train {r['model']['name']} on {s['chips']} x {r['hardware']['name']}: "
             f"{figure(s['tokens'])} tokens, {figure(s['batch_tokens'])} tokens per batch",
             f"total {figure(r['total_flops'])} FLOP; {figure(r['time_s'] / 86400)} days ({seconds(r['time_s'])}) "
             f"at {percent(s['mfu'])} MFU",
             f"memory: params {nbytes(m['params'])}, optimizer {nbytes(m['optimizer'])}, activations "
             f"{nbytes(m['activations'])} = {nbytes(m['total'])}; at least {r['min_chips_by_memory']} chips",
             f"{'strategy':<9}{'degrees':<26}{'T_math/T_comms':>15}{'crit. tok/chip':>15}{'mem/chip':>11}  bound"]
    for row in r["strategies"]:
        deg = ",".join(f"{k}={v}" for k, v in row["degrees"].items())
        crit = "-" if row["critical_batch_per_chip"] is None else number(row["critical_batch_per_chip"])
        fits = "" if row["fits"] else " (does not fit)"
        if not row.get("feasible", True):
            fits += " (degrees not allowed for this model)"
        lines.append(f"{row['strategy']:<9}{deg:<26}{ratio(row['ratio']):>15}{crit:>15}"
                     f"{nbytes(row['memory_per_chip_bytes']):>11}  {row['bound']}{fits}")
    lines.append(f"batch per chip {number(r['strategies'][0]['batch_per_chip'])} tokens")
    lines.append(f"recommendation: {r['recommendation']['reason']}")
    if r.get("layout_search") is not None:
        lines += search_lines(r["layout_search"])
    if r.get("layout") is not None:
        lines += layout_lines(r["layout"], "your layout")
    return lines


def serve_text(r: dict[str, Any]) -> list[str]:
    s, m, d = r["setup"], r["memory_bytes"], r["decode"]
    fit = "fits" if r["fits"] else "does NOT fit"
    lines = [f"serve {r['model']['name']} on {s['chips']} x {r['hardware']['name']}: batch {s['batch']}, "
             f"context {s['context']}, params {s['param_dtype']}, KV {s['kv_dtype']}",
             f"memory: params {nbytes(m['params'])} + KV {nbytes(m['kv_cache'])} = {nbytes(m['total'])} "
             f"of {nbytes(r['hbm_bytes'])}: {fit}; largest batch {r['max_batch']}; smallest slice "
             f"{r['smallest_slice']['topology']} ({r['smallest_slice']['chips']} chips)",
             f"decode step >= {seconds(d['step_s'])} (KV {seconds(d['kv_load_s'])} + max(weights "
             f"{seconds(d['weight_load_s'])}, FLOPs {seconds(d['flops_s'])})), {d['bound_by']}-bound; "
             f"{number(d['tokens_per_s'])} tokens/s, {number(d['tokens_per_s_per_chip'])} tokens/s/chip"]
    mp = r["model_parallel"]
    if mp:
        link = mp.get("link", "ICI")
        lines.append(f"model parallel {mp['model_parallel_degree']}-way: {link}-bound beyond "
                     f"{number(mp['max_degree_compute_bound'])} (compute-bound) / {number(mp['max_degree_memory_bound'])} "
                     f"(memory-bound) ways; {'' if mp['ici_bound'] else 'not '}{link}-bound here")
        if mp.get("degree_note"):
            lines.append(f"  {mp['degree_note']}")
    if r["prefill"]:
        p = r["prefill"]
        lines.append(f"prefill {p['tokens']} tokens at {percent(s['mfu'])} MFU: {seconds(p['time_s'])} "
                     f"(matmuls alone {seconds(p['matmul_s'])})")
    lines.append(f"{'batch':>6}{'memory':>11}{'step':>11}{'tokens/s':>11}{'tok/s/chip':>12}  bound")
    for row in r["latency_table"]:
        mark = "" if row["fits"] else "  (does not fit)"
        lines.append(f"{row['batch']:>6}{nbytes(row['memory_bytes']):>11}{seconds(row['step_s']):>11}"
                     f"{number(row['tokens_per_s']):>11}{number(row['tokens_per_s_per_chip']):>12}  {row['bound_by']}{mark}")
    if r.get("layout_search") is not None:
        lines += serve_search_lines(r["layout_search"])
    if r.get("layout") is not None:
        lines += serve_layout_lines(r["layout"])
    if r.get("disaggregated") is not None:
        lines += disaggregated_lines(r["disaggregated"])
    cal = r.get("calibrated")
    if cal:
        factors = ", ".join(f"{k} {ratio(v)}" for k, v in cal["factors"].items())
        prefill = f"; prefill {seconds(cal['prefill_s'])}" if "prefill_s" in cal else ""
        lines.append(f"at your profile's rates [{cal['source']}: {factors} the roofline]: decode step ~ "
                     f"{seconds(cal['decode_step_s'])}, {number(cal['tokens_per_s'])} tokens/s{prefill} (estimate)")
    return lines
