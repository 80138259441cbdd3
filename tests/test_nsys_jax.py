"""nsys-jax archives from a real 4-process A100 training step: steps, per-op times matched to the
HLO, the chip from the device metadata, every report format, the pod, diff, and bad archives."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from audit.cli import main
from audit.orchestration.pipeline import analyse_profile
from audit.reports.model.read import read_report
from audit.pod.reduce import PodSettings
from conftest import render, shared_fixture

FOLDER = "gpu-a100-pax-nsys-jax"
QUIET = PodSettings(progress=False, cache="")


def archive(rank: int) -> Path:
    return shared_fixture(f"{FOLDER}/pax_fsdp4_4proc_proc{rank}.zip")


@pytest.fixture(scope="module")
def one() -> dict:
    return analyse_profile(archive(0), pod=QUIET).to_json()


@pytest.fixture(scope="module")
def four() -> dict:
    return analyse_profile(shared_fixture(FOLDER), pod=QUIET).to_json()


def _timed(report: dict) -> list[dict]:
    return [o for o in report["ops"] if o["measured_s"] is not None]


def test_steps_are_the_training_step_executions_without_the_first(one):
    # Five executions of pjit__wrapped_step_fn in the capture; the first carries autotuning and setup.
    assert one["summary"]["steps"] == 4
    assert one["source"]["kind"] == "nsys"
    times = [s["time_s"] for s in one["steps"]]
    assert all(0.12 < t < 0.15 for t in times)
    assert {o["module"] for o in _timed(one)} == {"pjit__wrapped_step_fn"}
    assert any("compilation and autotuning" in w for w in one["warnings"])


def test_a100_detected_from_the_device_metadata(one):
    hw = one["hardware"]
    assert hw["name"] == "a100-40gb" and hw["source"] == "trace"
    # The 40 GB A100 moves 1.555 TB/s, as Nsight's TARGET_INFO_GPU states; the catalog's is the 80 GB part's.
    assert hw["hbm_bytes_per_s"] == pytest.approx(1.5552e12)


def test_per_op_times_are_matched_to_the_step_hlo(one):
    matching = one["matching"]
    assert matching["covered_share"] >= 0.9 and matching["matched_share"] >= 0.9
    ops = _timed(one)
    assert len(ops) > 1000
    gemms = [o for o in ops if o["opcode"] == "custom-call" and o["flops"]]
    assert len(gemms) >= 50 and all(o["expected_s"] for o in gemms)
    # Thunks named after an op inside a fusion or an async computation count for their carrier.
    names = {o["name"] for o in ops}
    assert "reduce-scatter-start" in names and "reduce-scatter.131" not in names
    assert not any(n.startswith("reduce.") for n in names)


def test_gemms_and_collectives_never_beat_their_roofline(four):
    for op in _timed(four):
        if op["expected_s"] and (op["comm_bytes"] or op["custom_call_target"].startswith("__cublas")):
            assert op["measured_s"] >= op["expected_s"], op["name"]


def test_few_timed_ops_beat_their_roofline_by_much(four):
    timed = [o for o in _timed(four) if o["expected_s"] and o["verdict"] != "not judged"]
    beating = [o for o in timed if o["expected_s"] > 1.25 * o["measured_s"]]
    assert len(beating) <= 0.05 * len(timed), [o["name"] for o in beating[:10]]


def test_four_processes_are_one_pod_that_names_the_slowest(four):
    assert four["summary"]["hosts"] == 4 and four["summary"]["devices"] == 4
    slowest = four["pod"]["slowest_hosts"][0]["host"]
    assert slowest in {f"process {i}" for i in range(4)}
    # Separate processes keep separate clocks: a step lasts as long as its slowest device's.
    assert 0.12 < four["summary"]["step_time_s"]["median"] < 0.15
    assert all(s["time_s"] == max(s["per_device_s"].values()) for s in four["steps"])
    assert any("4 waits on other ranks" in w or "waits on other ranks for most of its time" in w
               for w in four["warnings"])


def test_collective_waits_on_other_ranks_are_not_judged(one, four):
    def verdicts(report: dict) -> dict[str, str]:
        return {o["name"]: o["verdict"] for o in _timed(report) if o["comm_bytes"]}

    # One process alone cannot tell its collectives' transfer from its wait for the other three.
    assert set(verdicts(one).values()) == {"not judged"}
    # With all four, the device that waited least shows the transfer; all-gather-start.2 is mostly waiting.
    both = verdicts(four)
    assert both["all-gather-start.2"] == "not judged"
    assert any(v != "not judged" for v in both.values())


def test_every_format_is_written(tmp_path, capsys):
    paths = {fmt: tmp_path / f"r.{fmt}" for fmt in ("json", "csv", "md", "html")}
    code = main(["inspect", str(archive(1)), "--quiet", "--json", str(paths["json"]), "--csv", str(paths["csv"]),
                 "--markdown", str(paths["md"]), "--html", str(paths["html"])])
    assert code == 0, capsys.readouterr().err
    assert json.loads(paths["json"].read_text())["hardware"]["name"] == "a100-40gb"
    assert read_report(paths["json"])["matching"]["matched_share"] > 0.9  # valid against the report schema
    assert "custom-call" in paths["csv"].read_text()
    assert "### Matching" in paths["md"].read_text()
    assert "Matching" in paths["html"].read_text()
    code = main(["inspect", str(archive(1))])
    out = capsys.readouterr().out
    assert code == 0 and "matching: " in out and "a100" in out


@pytest.mark.slow
def test_unpacked_and_combined_archives_read_like_the_zips(tmp_path, four):
    unpacked = tmp_path / "proc2"
    with zipfile.ZipFile(archive(2)) as z:
        z.extractall(unpacked)
    single = analyse_profile(unpacked, pod=QUIET).to_json()
    assert single["summary"]["steps"] == 4 and single["hardware"]["name"] == "a100-40gb"
    combined = _combine(tmp_path / "combined.zip", [archive(i) for i in range(4)])
    report = analyse_profile(combined, pod=QUIET).to_json()
    assert report["summary"]["hosts"] == 4
    assert report["summary"]["measured_s"] == pytest.approx(four["summary"]["measured_s"], rel=1e-6)


def _combine(out: Path, inputs: list[Path]) -> Path:
    """nsys-jax-combine's layout: a file the same in every input is kept once; a file that
    differs becomes a folder with one member per input, named by the input's stem."""
    contents: dict[str, dict[str, bytes]] = {}
    for path in inputs:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.startswith("sources/") or name.startswith("protos/"):
                    continue
                contents.setdefault(name, {})[path.stem] = z.read(name)
    with zipfile.ZipFile(out, "w") as z:
        for name, by_input in contents.items():
            if len(set(by_input.values())) == 1 and len(by_input) == len(inputs):
                z.writestr(name, next(iter(by_input.values())))
            else:
                for stem, data in by_input.items():
                    z.writestr(f"{name}/{stem}", data)
    return out


@pytest.mark.slow
def test_diff_between_two_nsys_jax_runs(tmp_path, capsys):
    code = main(["diff", str(archive(0)), str(archive(1)), "--json", str(tmp_path / "d.json")])
    err = capsys.readouterr().err
    assert code in (0, 1), err
    diff = json.loads((tmp_path / "d.json").read_text())
    assert diff["verdict"] in ("no change", "regression", "improvement", "inconclusive")
    # Two processes of one job run the same program; their collectives' waits differ, and each
    # moved op is called slower or faster as its time went, never both.
    moved = diff["measured"]["changed_ops"]
    assert moved
    assert main(["diff", str(archive(0)), str(archive(1))]) in (0, 1)
    lines = [ln.strip() for ln in capsys.readouterr().out.splitlines() if "[trace]" in ln and " -> " in ln]
    assert len(lines) == len(moved)
    for line, op in zip(lines, moved):
        word = "slower" if op["head_s"] > op["base_s"] else "faster"
        assert line.startswith(f"{word} {op['name']}: "), line


def test_truncated_archive_exits_2_with_one_line(tmp_path, capsys):
    data = archive(0).read_bytes()
    bad = tmp_path / "truncated.zip"
    bad.write_bytes(data[: len(data) // 2])
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "truncated or damaged" in err


def test_foreign_zip_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "photos.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("cat.txt", "meow")
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not an nsys-jax output" in err


def test_archive_without_xla_ranges_says_what_is_missing(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"Name": ["my range"], "Projected Start": [1], "Projected Duration": [2], "RangeId": [1.0],
                      "ParentId": [None], "TID": [1], "NumGPUOps": [1]})
    folder = tmp_path / "no_xla"
    (folder / "nvtx_gpu_proj_trace").mkdir(parents=True)
    pq.write_table(table, folder / "nvtx_gpu_proj_trace" / "trace.parquet")
    assert main(["inspect", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no XLA module or thunk ranges" in err


def _edited_archive(folder: Path, edit) -> Path:
    """Proc 0's archive unpacked to `folder` (trace, devices, the step's HLO) with its ranges edited."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    with zipfile.ZipFile(archive(0)) as z:
        for name in z.namelist():
            if name in ("nvtx_gpu_proj_trace/trace.parquet", "device-metadata.parquet") or (
                    name.startswith("dump/module_0040.") and "after_optimizations.hlo.pb" in name):
                z.extract(name, folder)
    path = folder / "nvtx_gpu_proj_trace" / "trace.parquet"
    frame: pd.DataFrame = edit(pq.read_table(path).to_pandas())
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return folder


def test_unmatched_ranges_are_listed_with_what_they_are(tmp_path, one):
    def rename(frame):
        names = frame["Name"].fillna("")
        names = names.str.replace("hlo_op=loop_convert_fusion.20#", "hlo_op=memcpy_d2d.1#", regex=False)
        frame["Name"] = names.str.replace("hlo_op=loop_convert_fusion.14#", "hlo_op=mystery.7#", regex=False)
        return frame

    report = analyse_profile(_edited_archive(tmp_path / "renamed", rename), pod=QUIET).to_json()
    matching = report["matching"]
    rows = {r["name"]: r for r in matching["largest"]}
    assert rows["memcpy_d2d.1"]["status"] == "explained" and "copy" in rows["memcpy_d2d.1"]["what"]
    assert rows["mystery.7"]["status"] == "unmatched" and "not an instruction" in rows["mystery.7"]["what"]
    assert matching["unmatched_s"] == pytest.approx(rows["mystery.7"]["measured_s"])
    assert matching["matched_share"] < matching["covered_share"] < 1.0
    assert matching["measured_s"] == pytest.approx(one["matching"]["measured_s"], rel=1e-9)


def test_a_thunk_that_contains_thunks_counts_through_its_children(tmp_path, one):
    import pandas as pd

    def wrap(frame):
        # A while-loop thunk around the first three thunks of every step execution.
        names = frame["Name"].fillna("")
        steps = frame[names.str.startswith("TSL:XlaModule:") & names.str.contains("program_id=40#")]
        rows = []
        next_id = frame["RangeId"].max() + 1
        for module_id in steps["RangeId"]:
            kids = frame.index[frame["ParentId"] == module_id][:3]
            start = frame.loc[kids, "Projected Start"].min()
            end = (frame.loc[kids, "Projected Start"] + frame.loc[kids, "Projected Duration"]).max()
            rows.append({"Name": "TSL:Thunk:#hlo_op=while.99#", "Projected Start": start,
                         "Projected Duration": end - start, "RangeId": next_id, "ParentId": module_id,
                         "TID": frame.loc[kids[0], "TID"], "PID": frame.loc[kids[0], "PID"], "NumGPUOps": 3})
            frame.loc[kids, "ParentId"] = next_id
            next_id += 1
        return pd.concat([frame, pd.DataFrame(rows)], ignore_index=True)

    report = analyse_profile(_edited_archive(tmp_path / "nested", wrap), pod=QUIET).to_json()
    names = {o["name"] for o in report["ops"] if o["measured_s"] is not None}
    assert "while.99" not in names
    assert report["summary"]["measured_s"] == pytest.approx(one["summary"]["measured_s"], rel=1e-9)


def _corrupt_member(tmp_path: Path) -> Path:
    """Proc 0's zip with bytes of its trace flipped: the member's CRC no longer holds."""
    data = bytearray(archive(0).read_bytes())
    with zipfile.ZipFile(archive(0)) as z:
        info = z.getinfo("nvtx_gpu_proj_trace/trace.parquet")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 1000
    data[start:start + 64] = bytes(b ^ 0xFF for b in data[start:start + 64])
    bad = tmp_path / "corrupt.zip"
    bad.write_bytes(bytes(data))
    return bad


def _truncated_trace_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "unpacked"
    with zipfile.ZipFile(archive(0)) as z:
        z.extract("nvtx_gpu_proj_trace/trace.parquet", folder)
    trace = folder / "nvtx_gpu_proj_trace" / "trace.parquet"
    trace.write_bytes(trace.read_bytes()[:5000])
    return folder


@pytest.mark.parametrize("make", [_corrupt_member, _truncated_trace_folder, lambda p: p / "empty.zip",
                                  lambda p: p / "empty.sqlite"])
def test_damaged_inputs_exit_2_with_one_line(tmp_path, capsys, make):
    bad = make(tmp_path)
    if not bad.exists():
        bad.write_bytes(b"")
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"audit: error: {bad}: ") and "Traceback" not in err
    assert "truncated" in err or "damaged" in err


def test_the_newer_start_end_trace_layout_reads_the_same(tmp_path, one):
    """Newer Nsight versions write the projection as Text/Start/End/Range ID/Parent ID..., with
    range names lacking the TSL: prefix; the ops and steps are the same."""
    import pandas as pd

    def relayout(frame):
        frame = frame.dropna(subset=["RangeId"])
        start = frame["Projected Start"].astype("int64")
        return pd.DataFrame({
            "Text": frame["Name"].fillna("").str.removeprefix("TSL:"), "Start": start,
            "End": start + frame["Projected Duration"].astype("int64"), "Children Count": frame["NumChild"],
            "Range ID": frame["RangeId"].astype("int64"), "Parent ID": frame["ParentId"], "PID": frame["PID"],
            "Range Stack": [[int(x) for x in s.split(":") if x] for s in frame["RangeStack"].fillna("")],
            "Stack Level": frame["Lvl"].fillna(0).astype("int64"), "TID": frame["TID"], "Rank": frame["Rank"]})

    report = analyse_profile(_edited_archive(tmp_path / "newer", relayout), pod=QUIET).to_json()
    assert report["summary"]["steps"] == one["summary"]["steps"]
    assert report["summary"]["measured_s"] == pytest.approx(one["summary"]["measured_s"], rel=1e-9)
    assert report["matching"]["matched_share"] == pytest.approx(one["matching"]["matched_share"])


def test_a_process_driving_several_gpus_places_ranges_by_launcher_thread(tmp_path):
    """With one process per node, XLA launches each GPU's work from a thread named
    `XlaLauncher:#global=N,...#`; ranges of other threads belong to the first device."""
    import pandas as pd

    from audit.parsers.nsys.archive import Archive, _device_of_ranges, device_rows

    threads = pd.DataFrame({"Name": ["python", "XlaLauncher:#global=4,local=0,process=1,slice=0#",
                                     "XlaLauncher:#global=5,local=1,process=1,slice=0#"],
                            "Priority": [20, 20, 20], "PID": [7, 7, 7], "TID": [7, 8, 9]}).set_index(["PID", "TID"])
    threads.to_parquet(tmp_path / "thread-metadata.parquet")
    devices = device_rows(pd.DataFrame({
        ("TARGET_INFO_GPU", "name"): ["NVIDIA A100-SXM4-40GB"] * 2,
        ("TARGET_INFO_NVTX_CUDA_DEVICE", "name"): ["Xla:#global=4,local=0,process=1,slice=0#",
                                                   "Xla:#global=5,local=1,process=1,slice=0#"]}))
    assert [d["global"] for d in devices] == [4, 5] and {d["process"] for d in devices} == {1}
    ranges = pd.DataFrame({"tid": [8, 9, 7, 9]})
    assert _device_of_ranges(Archive(tmp_path), "", ranges, devices).tolist() == [4, 5, 4, 5]


def test_a_folder_of_archives_and_xplane_captures_is_refused_naming_the_captures(tmp_path, capsys):
    # Reading only the archive would drop the MI300X capture beside it without a word.
    (tmp_path / "proc0.zip").write_bytes(archive(0).read_bytes())
    (tmp_path / "xprof").mkdir()
    (tmp_path / "xprof" / "gpu.xplane.pb").write_bytes(shared_fixture("gpu-mi300x/attention.xplane.pb").read_bytes())
    assert main(["inspect", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "nsys-jax archives and XPlane captures" in err and "xprof/gpu.xplane.pb" in err


def test_collective_waits_stay_not_judged_when_the_gpu_profile_is_projected_onto_another_chip(capsys):
    # The NCCL kernel's wait for the other ranks is in the measurement, whatever chip the
    # report is projected onto: with --hardware tpu-v5e the single process's reduce-scatter was
    # judged (and flagged) on a time that is mostly waiting.
    assert main(["inspect", str(archive(0)), "--hardware", "tpu-v5e", "--json", "-", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    rs = next(o for o in report["ops"] if o["name"] == "reduce-scatter-start")
    assert rs["verdict"] == "not judged" and not rs["flagged"]
    assert rs["reasons"][0].startswith("spans devices the profile does not show")


def test_whether_an_async_collective_overlapped_is_unknown_not_no(four):
    # Thunk ranges carry no -done event bounding the collective's window, so the trace cannot
    # tell whether compute ran beside it: the report says unknown, and the reduce-scatter the schedule
    # hides is neither flagged nor told to "overlap this collective with compute" on a fact nobody measured.
    assert four["collectives"] and all(c["overlapped"] is None for c in four["collectives"])
    assert "Overlapped unknown" in render(four, "terminal") and "| unknown |" in render(four, "markdown")
    assert not any(o["suggestion"].startswith("Overlap this collective") for o in four["ops"])
    rs = next(o for o in four["ops"] if o["name"] == "reduce-scatter-start")
    assert not rs["flagged"] and rs["reasons"][0].startswith("hidden by the schedule, overlap not measured")


def test_ranges_read_the_same_whatever_their_frame_index(one):
    """Each distinct range name is matched once and spread back to its rows: rows keep their own names
    and ops whatever labels the frame's index carries (a reader may drop rows before)."""
    import pandas as pd

    from audit.parsers.nsys.archive import Archive, _ranges
    from audit.parsers.nsys.nvtx import read_xla_ranges

    ranges = _ranges(Archive(archive(0)), "").assign(device=0).drop(columns=["tid"])
    plain = read_xla_ranges(ranges, "h").events
    shuffled = ranges.set_axis(pd.Index(range(len(ranges)))[::-1] * 3 + 7)  # labels far from positions
    again = read_xla_ranges(shuffled, "h").events
    assert len(plain) > 1000
    pd.testing.assert_frame_equal(plain.reset_index(drop=True), again.reset_index(drop=True))
