"""Parallel layouts as text: per-chip memory and step-time breakdowns, and the ranked search."""

from __future__ import annotations

from typing import Any

from ..costmodel.units import count, figure, nbytes, number, percent, ratio, seconds

_MEMORY_PARTS = ("params", "grads", "optimizer", "activations", "working")


def layout_lines(r: dict[str, Any], heading: str) -> list[str]:
    """One evaluated layout: whether it fits, then its memory and step-time breakdowns."""
    label = r["layout"]["label"]
    if not r["valid"]:
        return [f"{heading} {label}: cannot run: {'; '.join(r['problems'])}"]
    mem, step, sched = r["memory_per_chip_bytes"], r["step_time_s"], r["schedule"]
    fit = "fits" if r["fits"] else "does NOT fit"
    ach = r.get("step_time_achievable_s")
    likely = "" if not ach else (f"; step ~ {seconds(ach['total'])} at {_rates(r)}, MFU ~ "
                                 f"{percent(r['mfu_at_achievable'])}")
    lines = [f"{heading} {label}: {fit} ({nbytes(mem['total'])} of {nbytes(r['hbm_bytes'])} HBM per chip); "
             f"step >= {seconds(step['total'])} (model estimate at peak FLOP/s), MFU <= "
             f"{percent(r['mfu_upper_bound'])}, <= {number(r['tokens_per_s'])} tokens/s{likely}"]
    parts = ", ".join(f"{k} {nbytes(mem[k])}" for k in _MEMORY_PARTS)
    lines.append(f"  memory per chip [model]: {parts} ({count(sched['in_flight_microbatches'])} microbatch(es) of "
                 f"{number(r['tokens_per_microbatch'])} tokens in flight; working = one layer's intermediates + logits)")
    levels = ", ".join(f"{k} {seconds(v)}" for k, v in step["exposed_comm_by_level"].items()) or "none"
    axes = ", ".join(f"{k} {seconds(v)}" for k, v in step["exposed_comm_by_axis"].items()) or "none"
    lines.append(f"  step time [model]: compute {seconds(step['compute'])}, exposed communication {levels} "
                 f"(by axis: {axes}), bubble {seconds(step['bubble'])}")
    if r.get("remat"):
        rm = r["remat"]
        host = f", host link {seconds(rm['host_link_s'])} per step" if rm["host_link_s"] else ""
        lines.append(f"  remat [model]: {rm['note']}; re-runs {figure(rm['recompute_flops_per_step'])} FLOP per "
                     f"step{host}")
    ach = r.get("step_time_achievable_s")
    if ach:
        lines.append(f"  at achievable rates (estimate: {', '.join(ach['figures'])}): step ~ "
                     f"{seconds(ach['total'])}, MFU ~ {percent(r['mfu_at_achievable'])}")
    cal = r.get("calibration")
    if cal:
        factors = ", ".join(f"{k} {ratio(v)} the roofline ({count(cal['ops'][k])} ops)" for k, v in cal["factors"].items())
        lines.append(f"  from your profile [{cal['source']}, {cal['hardware'] or 'hardware unnamed'}]: {factors}; "
                     f"the classes it does not time keep the catalog's achievable rates")
    ops = r.get("ops_per_step")
    if ops:
        classes = ", ".join(f"{k} {seconds(v)}" for k, v in ops["by_class_s"].items())
        rates = "your profile's rates" if cal else "achievable rates"
        lines.append(f"  compute by op class [model, {rates}, estimate]: {classes} "
                     f"= {seconds(ops['total_s'])} per step")
    if sched["name"] != "none":
        flushes = sched.get("flushes", 1)
        lines.append(f"  pipeline: {sched['note']}; {r['microbatches']} microbatches"
                     + (f" in {flushes} flushes (each fills and drains the pipe)" if flushes > 1 else "")
                     + f", bubble {percent(sched['bubble_fraction'])} of the work")
    if r.get("experts_per_chip"):
        lines.append(f"  experts: {r['experts_per_chip']} routed experts per chip")
    lines += [f"  note: {note}" for note in r.get("notes", [])]
    if r.get("versus_best"):
        lines.append(f"  versus the search's best: {r['versus_best']}")
    return lines


def _rates(r: dict[str, Any]) -> str:
    """Whose rates the estimate used: the user's profile, measured ones, or estimates of them."""
    if r.get("calibration"):
        return "your profile's rates"
    sources = r.get("ops_per_step", {}).get("sources", [])
    guessed = any("matmul" in s and "estimate" in s for s in sources)
    return "achievable rates (an estimate: this chip's GEMM rate is not publicly measured)" if guessed \
        else "measured achievable rates"


def search_lines(found: dict[str, Any]) -> list[str]:
    """The ranked layouts of the search, each with its step and memory parts, the winner's full
    breakdown and why it wins."""
    lines = [f"layout search: {found['candidates']} layouts, {found['valid']} runnable, {found['fitting']} fit, "
             "ranked by the step at achievable rates (~); the parts are the bound's, at peak FLOP/s (>=)"]
    if not found["layouts"]:
        return lines + [f"  {found['why']}"]
    levels = found["best"]["levels"]
    fast, slow = levels["fast"][:8], levels["slow"][:10]
    lines.append(f"  {'#':>2} {'layout':<50}{'step ~':>9}{'step >=':>9}{'compute':>9}{fast:>9}{slow:>11}{'bubble':>9}"
                 f"{'MFU<=':>7}{'weights+opt':>12}{'activ.':>9}")
    for i, r in enumerate(found["layouts"], 1):
        s, m = r["step_time_s"], r["memory_per_chip_bytes"]
        by_level = s["exposed_comm_by_level"]
        state = m["params"] + m["grads"] + m["optimizer"]
        est = r.get("step_time_achievable_s")
        lines.append(f"  {i:>2} {r['layout']['label']:<50}{(seconds(est['total']) if est else '-'):>9}"
                     f"{seconds(s['total']):>9}{seconds(s['compute']):>9}"
                     f"{seconds(by_level.get(levels['fast'], 0.0)):>9}{seconds(by_level.get(levels['slow'], 0.0)):>11}"
                     f"{seconds(s['bubble']):>9}{percent(r['mfu_upper_bound']):>7}"
                     f"{nbytes(state):>12}{nbytes(m['activations'] + m['working']):>9}")
    lines += layout_lines(found["best"], "best layout")
    lines.append(f"  why: {found['why']}")
    return lines


def serve_layout_lines(r: dict[str, Any]) -> list[str]:
    """A serving layout: memory per chip and the decode step's parts per stage and microbatch."""
    label = r["layout"]["label"]
    if not r["valid"]:
        return [f"serving layout {label}: cannot run: {'; '.join(r['problems'])}"]
    mem, d = r["memory_per_chip_bytes"], r["decode"]
    part = d["per_stage_microbatch_s"]
    fit = "fits" if r["fits"] else "does NOT fit"
    comm = ", ".join(f"{k[:-7]} {seconds(v)}" for k, v in part.items() if k.endswith("_comm_s")) or "none"
    return [f"serving layout {label}: {fit} (params {nbytes(mem['params'])} + KV {nbytes(mem['kv_cache'])} = "
            f"{nbytes(mem['total'])} of {nbytes(r['hbm_bytes'])} per chip)",
            f"  decode step >= {seconds(d['step_s'])} (model estimate), {d['bound_by']}-bound, "
            f"{number(d['tokens_per_s'])} tokens/s, {number(d['tokens_per_s_per_chip'])} tokens/s/chip",
            f"  per stage and microbatch of {r['sequences_per_microbatch']} sequences: KV {seconds(part['kv_s'])} + "
            f"max(weights {seconds(part['weights_s'])}, FLOPs {seconds(part['flops_s'])}) + communication {comm}"
            + (f"; stage-to-stage send {seconds(d['pipeline_send_s'])}" if d["pipeline_send_s"] else "")]


def disaggregated_lines(r: dict[str, Any]) -> list[str]:
    """How many prefill and decode servers a traffic needs."""
    ratio = "" if r["decode_per_prefill"] is None else f" ({figure(r['decode_per_prefill'])} decode per prefill)"
    move = "" if r["kv_transfer_s"] is None else (f"; each prompt's KV cache ({nbytes(r['kv_transfer_bytes_per_request'])}) "
                                                  f"moves in {seconds(r['kv_transfer_s'])} over the scale-out network")
    return [f"{number(r['requests_per_s'])} requests/s of {r['prompt_tokens']} prompt + {r['output_tokens']} output tokens: "
            f"{r['prefill_servers']} prefill + {r['decode_servers']} decode servers of {r['chips_per_server']} chips"
            f"{ratio} = {r['total_chips']} chips",
            f"  per server: {number(r['prefill_requests_per_s_per_server'])} prefills/s, "
            f"{number(r['decode_requests_per_s_per_server'])} completions/s; {r['note']}{move}"]


def serve_search_lines(found: dict[str, Any]) -> list[str]:
    """Serving layouts that fit, fastest decode step first."""
    lines = [f"serving layouts: {found['candidates']} tried, {found['fitting']} fit (decode steps are model "
             "estimates: lower bounds)"]
    for i, r in enumerate(found["layouts"], 1):
        d = r["decode"]
        lines.append(f"  {i:>2} {r['layout']['label']:<28}{seconds(d['step_s']):>10}{number(d['tokens_per_s']):>10} tok/s"
                     f"{nbytes(r['memory_per_chip_bytes']['total']):>11}/chip  {d['bound_by']}")
    return lines
