"""The lab (lab/: the experiments' patches and scripts) and its records (results/experiments/): well-formed,
their variants correct kernels, each patch applied to the kernel commit it records, and the claims chapters 6,
7b and 8 make from them true of the records. Marked `lab` (tests/conftest.py): `pytest -m lab` runs these
alone, `-m "not lab"` leaves them out; CI runs them with the rest of tests/."""
import collections
import json
import re
import statistics

import pytest

from gemmlab import errors, fusion, kernel, registry, results
from gemmlab.runtime import variants
from lab import experiments
from gemmlab.measure.check import verify

pytestmark = pytest.mark.lab
EXP = results.EXPERIMENTS  # the recorded data: results.json, logs, CSVs, profiler reports
LAB = experiments.LAB      # the code: patches, scripts, READMEs


def _non_diagnostic_variants():
    out = []
    sg = results.experiment("sgemm-vs-cublas")
    for v in sg["variants"]:
        if v["source"] != "step":
            out.append(("sgemm-vs-cublas", "sgemm/11_fragment_prefetch", v["source"][: -len(".patch")], v["params"]))
    hg = results.experiment("hgemm-diagnosis")
    for group in hg["experiments"]:
        skip = set(group.get("diagnostic", [])) | set(group.get("gpu_only", []))
        for name, source in group["sources"].items():
            if name in skip:
                continue
            out.append(("hgemm-diagnosis", experiments.step_of(hg, name).name, source[: -len(".patch")], {}))
    for source in sorted(p.name for p in (LAB / "hgemm-wgmma").glob("*.patch")):
        out.append(("hgemm-wgmma", "hgemm/08_wgmma", source[: -len(".patch")], {}))
    return sorted(set((f, s, n, json.dumps(p, sort_keys=True)) for f, s, n, p in out))


def test_every_experiment_loads_and_says_what_it_asked():
    names = sorted(p.parent.name for p in EXP.glob("*/results.json"))
    assert names == ["fusion-counters", "fusion-kernel-time", "fusion-tf32x3", "fusion-tma", "fusion-wgmma", "hgemm-diagnosis",
                     "hgemm-past-cublas", "hgemm-t4-gap", "hgemm-wgmma", "sgemm-vs-cublas"]
    for name in names:
        exp = results.experiment(name)
        assert exp["gpu"] and exp["date"] and exp["question"] and exp["protocol"]
        assert (LAB / name / "README.md").exists()


def test_unknown_experiment_names_the_recorded_ones():
    with pytest.raises(FileNotFoundError, match="sgemm-vs-cublas"):
        results.experiment("no-such-experiment")


def test_median_of_recorded_runs():
    g = {"runs": {"v": [{"pct": 80.0, "tflops": 8.0, "size": 4096}, {"pct": 90.0, "tflops": 9.0, "size": 4096},
                        {"pct": 10.0, "tflops": 1.0, "size": 1024}]}}
    assert experiments.pct(g, "v", 4096) == 85.0 and experiments.tflops(g, "v", 4096) == 8.5
    assert experiments.pct(g, "v") == 80.0
    with pytest.raises(ValueError, match="no recorded runs of v at size 8192"):
        experiments.pct(g, "v", 8192)


@pytest.mark.parametrize("folder,step,name,params", _non_diagnostic_variants())
def test_recorded_variant_is_a_correct_kernel(folder, step, name, params):
    """Every variant that was timed (not a diagnostic) computes C = A B on the emulator."""
    s = registry.get(step)
    k = kernel.Kernel(s, json.loads(params), "cpu", source_text=experiments.variant_source(folder, s, name))
    assert verify(k).passed


def test_sgemm_claims_of_chapter_6():
    exp = results.experiment("sgemm-vs-cublas")
    ours, theirs = exp["variants"][0]["ncu"], exp["cublas"]
    assert "ffma" in theirs["kernel"]                                  # cuBLAS runs on CUDA cores too
    assert 0.9 < ours["instructions"] / theirs["instructions"] < 1.1   # "nearly the same work"
    assert theirs["issue_active_pct"] > ours["issue_active_pct"] + 5   # the difference is issue
    for reason in ("no_instruction", "dispatch_stall", "wait"):       # "where step 11's warps stall more"
        assert ours["stalls_per_issue"][reason] > theirs["stalls_per_issue"].get(reason, 0.0)
    assert theirs["shared_store_bank_conflicts"] == 0 < ours["shared_store_bank_conflicts"]
    base = [r["pct"] for r in exp["variants"][0]["runs"]]
    spread = max(base) - min(base)
    for v in exp["variants"][1:]:                                      # "none of them closed the gap"
        if v["runs"]:
            assert statistics.median(r["pct"] for r in v["runs"]) <= statistics.median(base) + spread
    xor = next(v for v in exp["variants"] if v["source"] == "xor.patch")
    assert xor["ncu"]["shared_store_bank_conflicts"] < 1e-3 * ours["shared_store_bank_conflicts"]
    for v in exp["variants"]:
        assert v["source"] == "step" or (LAB / "sgemm-vs-cublas" / v["source"]).exists()


def test_hgemm_claims_of_chapter_7b():
    exp = results.experiment("hgemm-diagnosis")
    rows = exp["probe"]["rows"]
    best = max(r["tflops"] for r in rows)
    at_8 = max(r["tflops"] for r in rows if r["warps_per_sm"] == 8 and r["chains"] >= 16)
    assert at_8 > 0.9 * best                                           # occupancy is not the limit
    occ = experiments.group(exp, "occupancy")
    base = experiments.pct(occ, "s07_base")
    assert all(experiments.pct(occ, s) < base + 2 for s in occ["runs"] if s.startswith("s07_lb"))
    d1, d2 = experiments.group(exp, "decomposition"), experiments.group(exp, "decomposition 2")
    assert experiments.pct(d1, "s07_nocopy") > experiments.pct(d1, "s07_pipe") + 20
    assert experiments.pct(d2, "s07_copyonly", 8192) > experiments.pct(d2, "s07_pipe", 8192) + 20
    assert experiments.pct(d2, "s07_nomma", 8192) < experiments.pct(d2, "s07_nomma_nobar", 8192)
    ws = experiments.group(exp, "warp specialization")                 # "the same speed as s07_pipe"
    assert abs(experiments.pct(ws, "s07_ws:EXTRA_THREADS=128") - experiments.pct(ws, "s07_pipe")) < 5
    banks = exp["ncu_banks"]["rows"]                                    # "no part of the L1 path is near its peak"
    assert all(max(r["data_bank_reads_pct"] + r["data_bank_writes_pct"], r["lsu_writeback_pct"],
                   r["l1tex_throughput_pct"]) < 60 for r in banks.values())
    d3 = experiments.group(exp, "decomposition 3")                    # "still slow without ldmatrix"
    tf = {s: experiments.tflops(d3, s) for s in ("s07_copymma", "s07_noldsm", "s07_copyonly")}
    assert tf["s07_copymma"] < 0.75 * min(tf["s07_noldsm"], tf["s07_copyonly"])
    power = {r["variant"]: r for r in exp["power"]["rows"]}           # "copies alone draw the limit"
    assert power["s07_copyonly"]["watts"] >= 0.95 * exp["power"]["limit_w"]
    assert power["s07_copymma"]["sm_mhz"] < min(power["s07_copyonly"]["sm_mhz"], power["s07_noldsm"]["sm_mhz"])
    lat = {(r["chain_warps"], r["copy_warps"]): r["cycles"] for r in exp["ldsm_probe"]["rows"]}
    assert lat[(8, 8)] < 1.5 * lat[(1, 0)]                             # "barely slows down next to copies"
    paths = exp["ncu_paths"]["rows"]                                   # "the path is not full"
    assert paths["s07_nomma"]["shared_wavefronts_pct"] < 60 and paths["s07_nomma"]["tensor_pipe_pct"] == 0
    assert paths["s07_nocopy"]["tensor_pipe_pct"] > paths["s07_pipe"]["tensor_pipe_pct"] + 15
    for group in exp["experiments"]:
        for source in group["sources"].values():
            assert (LAB / "hgemm-diagnosis" / source).exists()


def test_wgmma_claims_of_chapter_7b():
    """Step 08's section: L2 limits the row-major order, bands fix it, wait<1> changes nothing, and the
    recorded benchmark meets issue 7's 70% at 8192."""
    exp = results.experiment("hgemm-wgmma")
    ncu = exp["ncu"]
    row, band = ncu["NUM_STAGES=4, GROUP_M=1"], ncu["NUM_STAGES=4, GROUP_M=16"]
    assert row["l2_busy_pct"] > 95 and row["l2_hit_pct"] < 61                      # "L2 is the bottleneck"
    assert ncu["NUM_STAGES=3, GROUP_M=1"]["duration_ms"] < row["duration_ms"]       # "four stages slower than three"
    assert band["l2_hit_pct"] > row["l2_hit_pct"] + 20 and band["tensor_pipe_pct"] > 85
    il = experiments.group(exp, "interleaved")
    step, g1, wait1 = (experiments.pct(il, s, 8192) for s in ("step", "step:GROUP_M=1", "s08_wait1"))
    assert step > g1 + 10 and abs(wait1 - step) < 1.5 and step > 90
    rec = [r for r in results.load() if r["step"] == "hgemm/08_wgmma" and r["m"] == 8192]
    assert rec and max(r["pct_of_baseline"] for r in rec) >= 70


def _t4_gap_build():
    import importlib.util

    spec = importlib.util.spec_from_file_location("t4_gap_build", LAB / "hgemm-t4-gap" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_t4_gap_record_is_its_logs():
    """results.json of hgemm-t4-gap is exactly what build.py makes of the raw logs beside it (both in
    results/experiments/hgemm-t4-gap; build.py in lab/hgemm-t4-gap)."""
    assert _t4_gap_build().record() == results.experiment("hgemm-t4-gap")


def test_t4_gap_claims_of_chapter_7b():
    """fp16 sums alone change nothing; the seed's kernel 5 tiles gain a few points and stay near a third of
    cuBLAS; fp16 sums cost over 10x the error at K = 8192; the ladder's ratios do not depend on which Hopper."""
    gap = results.experiment("hgemm-t4-gap")
    assert gap["gpus"]
    for g in gap["gpus"].values():
        t = {label: statistics.median(v["8192"]) for label, v in g["tiles"].items()}
        fp32_06, f16_06 = t["06 fp32 acc, 256x128x32, warp 64x64 (step 06)"], t["06 fp16 acc, 256x128x32, warp 64x64"]
        seed5 = t["05 fp16 acc, 256x256x32, warp 128x64 (seed kernel 5)"]
        assert abs(f16_06 - fp32_06) < 2
        assert fp32_06 + 2 < seed5 < 40
        e = g["errors"]
        assert all(x["passed"] for x in e.values())
        assert e["05 fp16 acc, 256x256x32, warp 128x64 (seed kernel 5)"]["uniform_8192"] > \
            10 * e["06 fp32 acc, 256x128x32, warp 64x64 (step 06)"]["uniform_8192"]
        assert statistics.median(g["ladder"]["hgemm/08_wgmma"]["8192"]) > 90
        assert g["probe"]["k8_f32"]["power_w"] < 600  # the probe alone is far under the 700 W limit
    for g in gap["gpus"].values():  # alone: every kernel at the power limit; the T4-compatible steps gain
        sus = {n: {f: statistics.median(x[f] for x in r) for f in r[0]} for n, r in g["sustained"].items()}
        assert min(r["power_w"] for r in sus.values()) > 680
        s04, s08 = sus["hgemm/04_register_prefetch"], sus["hgemm/08_wgmma"]
        assert s04["sm_clock_mhz"] > sus["torch.matmul"]["sm_clock_mhz"] + 100
        assert s04["pct"] > statistics.median(g["ladder"]["hgemm/04_register_prefetch"]["8192"]) + 2
        assert abs(s08["pct"] - statistics.median(g["ladder"]["hgemm/08_wgmma"]["8192"])) < 2
        assert 43 < sus["seed kernel 5 (fp16 sums)"]["pct"] < 50
        t4 = ("hgemm/04_register_prefetch", "hgemm/05_tuned_tiles", "hgemm/06_double_buffer", "s06_pipe 128x128")
        assert max(sus[n]["pct"] for n in t4) < 45
        pj = {n: r["power_w"] / r["tflops"] for n, r in sus.items()}
        assert pj["hgemm/04_register_prefetch"] > 2.5 * pj["torch.matmul"]
    ladders = [{s: statistics.median(v["8192"]) for s, v in g["ladder"].items()} for g in gap["gpus"].values()]
    for other in ladders[1:]:
        for s in ("hgemm/04_register_prefetch", "hgemm/06_double_buffer", "hgemm/07_cp_async"):
            assert abs(other[s] - ladders[0][s]) < 3, s


@pytest.mark.parametrize("step,variant", [("hgemm/05_tuned_tiles", "s05_f16acc"),
                                          ("hgemm/06_double_buffer", "s06_f16acc")])
def test_f16_accumulator_variants_on_the_emulator(step, variant):
    """The fp16-sum variants compute A B on a shape that is no tile multiple, with fp16-sum error: larger
    than the step's own, within fp16's bound, finite."""
    import dataclasses

    import numpy as np

    base = registry.get(step)
    relaxed = dataclasses.replace(base, rules=lambda p: [r for r in base.rules(p) if "fp32 accumulators" not in r])
    tiles = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, WARP_M=64, WARP_N=64)
    f16 = kernel.Kernel(relaxed, tiles, "cpu", source_text=experiments.variant_source(LAB / "hgemm-t4-gap", base, variant))
    f32 = kernel.Kernel(base, tiles, "cpu")
    rng = np.random.default_rng(1)
    a = (rng.random((150, 200)) * 2 - 1).astype(np.float16)
    b = (rng.random((200, 136)) * 2 - 1).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    err16, err32 = (np.abs(k(a, b).astype(np.float64) - want).max() / np.abs(want).max() for k in (f16, f32))
    assert np.isfinite(err16) and err32 < err16 < 1e-2


def test_mma_tile_budget_by_hand():
    # one warp, 64 x 64 x 16: ldmatrix reads (64*16 + 16*64) * 2 bytes, cp.async writes the same
    b = experiments.mma_tile_budget(64, 64, 16, 64, 64, mma_tflops=1.0, sms=1, clock_hz=1e12)
    assert b["ldmatrix_bytes"] == 4096 and b["copy_bytes"] == 4096
    assert b["smem_cycles"] == 8192 / experiments.SMEM_BYTES_PER_CLOCK
    assert b["flops"] == 2 * 64 * 64 * 16 and b["mma_cycles"] == pytest.approx(b["flops"])  # 1 FLOP per clock


def test_fusion_claims_of_chapter_8():
    from gemmlab import fusion, hardware
    kt = results.experiment("fusion-kernel-time")
    fused_ns, cublas = experiments.fusion_kernel_times(kt, 512)
    assert fused_ns < sum(k["duration_ns"] for k in cublas)            # "faster than the baseline's kernels"
    assert len(cublas) == 4 and sum("split_k" in k["kernel"] for k in cublas) == 2  # GEMM + reduction, twice
    need_tflops = fusion.flops(512) / (sum(k["duration_ns"] for k in cublas) / 3 * 1e-9) / 1e12
    ffma = hardware.load_hardware(kt["gpu"])["peaks"]["ffma"]["tflops"]
    assert need_tflops > 0.5 * ffma                                    # "out of reach" on CUDA cores


def test_seed_measure_claims():
    """profiler.py (8b, 'The seed's own measure'): every call's kernels recorded, cuBLAS's four at 512 (a split-K GEMM
    and its reduction per product) and the fused steps' one; the steps checked within fp32 error. By kernel time the
    fused kernel is faster than cuBLAS's at every N but short of 3x at 512, where 3x asks for less than step 08's body
    with only its wgmmas left (limits.py); the same run's event times give a larger ratio at 512, on a host slower to
    issue a @ b @ c than the lane's, and the eager call's kernels span far longer than they run. The README's table
    is the record's."""
    pf = results.experiment("fusion-kernel-time")["profiler"]["NVIDIA H200"]
    med = statistics.median
    ks = {int(n): {name: med(k["sum_us"]) for name, k in calls.items()} for n, calls in pf["kernels"].items()}
    ev = {int(n): {name: med(us) for name, us in calls.items()} for n, calls in pf["us"].items()}
    assert sorted(ks) == sorted(ev) == [256, 512, 1024, 2048, 4096]
    base, steps = ("torch a@b@c", "cupy a@b@c"), ("07", "08")
    ratio = {n: min(k[b] for b in base) / min(k[s] for s in steps) for n, k in ks.items()}
    for n, calls in pf["kernels"].items():
        assert all(len(k["sum_us"]) == len(k["span_us"]) == 3 for k in calls.values())
        assert calls["07"]["per_call"] == calls["08"]["per_call"] == 1
    assert all(s["max_rel_error"] < 1e-6 for at_n in pf["steps"].values() for s in at_n.values())
    names = pf["names"]["512"]["torch a@b@c"]
    assert len(names) == 4 and sum("split_k" in name for name in names) == 2
    assert all(r > 1 for r in ratio.values()) and 1.7 < ratio[512] < 2.3     # "about half cuBLAS's kernel time"
    lim = {k: med(v) for k, v in _tma_experiment()[1]["limits"]["NVIDIA H200"]["us"]["512"].items()}
    assert min(ks[512][b] for b in base) / 3 < lim["08 only the wgmmas"] - lim["08 returns at once"]
    e_ratio = min(ev[512][b] for b in base) / min(ev[512][s] for s in steps)
    assert e_ratio > ratio[512]
    records = fusion.load("NVIDIA H200")
    lane = fusion.baseline(records, 512)
    assert ev[512]["torch a@b@c"] > lane["median_s"] * 1e6                 # "the quieter of the two"
    span = med(pf["kernels"]["512"]["torch a@b@c"]["span_us"])
    assert span > 1.5 * ks[512]["torch a@b@c"]
    readme = (LAB / "fusion-kernel-time" / "README.md").read_text()
    table = readme[readme.index("## The seed's own measure"):]
    graphs = fusion.lookup(records, "torch graph a@b@c", 512)["median_s"] / fusion.lookup(
        records, "fused/08_tile_flags", 512)["graph_median_s"]
    said = [f"{graphs:.1f}x", f"{ratio[512]:.2f}x", f"{ks[512]['torch a@b@c']:.2f} µs", f"{ks[512]['08']:.2f} µs",
            f"{min(ratio[n] for n in ks if n >= 1024):.2f}x to {max(ratio[n] for n in ks if n >= 1024):.2f}x",
            f"{ratio[256]:.2f}x at 256", f"{e_ratio:.2f}x at 512", f"{ev[512]['torch a@b@c']:.1f} µs",
            f"({lane['median_s'] * 1e6:.1f} µs in the lane)", f"spanned {span:.1f} µs"]
    assert all(s in table for s in said), [s for s in said if s not in table]
    for n, k in ks.items():
        row = re.search(rf"^\| {n} \|(.+)\|$", table, re.M).group(1).split("|")
        want = [f"{k[name]:.2f}" for name in (*base, *steps)] + [f"{ratio[n]:.2f}x"]
        assert [c.strip() for c in row] == want, n


def test_tables_render():
    sg = results.experiment("sgemm-vs-cublas")
    text = experiments.counters({"step 11": sg["variants"][0]["ncu"], "cuBLAS": sg["cublas"]})
    assert "issue slots used (%)" in text and "no_instruction" in text
    assert "expected:" in experiments.variants(sg)
    hg = results.experiment("hgemm-diagnosis")
    table = experiments.runs_table(experiments.group(hg, "decomposition"), size=8192)
    assert "(diagnostic)" in table and "s07_pipe" in table
    with pytest.raises(KeyError):
        experiments.group(hg, "no such group")


def test_apply_patch_and_its_errors():
    from gemmlab.runtime.source import apply_patch
    text = "a\nb\nc\nd\n"
    patch = "--- x\n+++ y\n@@ -2,2 +2,3 @@\n b\n-c\n+C\n+c2\n d\n"
    assert apply_patch(text, patch) == "a\nb\nC\nc2\nd\n"
    assert apply_patch(text, "--- x\n+++ y\n@@ -0,0 +1 @@\n+top\n") == "top\n" + text
    with pytest.raises(ValueError, match="has changed"):
        apply_patch("a\nB\nc\nd\n", patch, label="x.patch")


def test_variant_of_the_step_itself_is_the_step():
    s = registry.get("hgemm/07_cp_async")
    assert experiments.variant_source("hgemm-diagnosis", s, "s07_base") is None
    assert experiments.variant_source("sgemm-vs-cublas", registry.get("sgemm/11_fragment_prefetch"), "step") is None


def test_variant_specs_and_their_errors():
    exp = results.experiment("hgemm-diagnosis")
    assert experiments.step_of(exp, "s06_pipe").name == "hgemm/06_double_buffer"
    with pytest.raises(KeyError, match="step prefixes"):
        experiments.step_of(exp, "x07_pipe")
    s = registry.get("hgemm/07_cp_async")
    k = experiments.variant_kernel("hgemm-diagnosis", s, "!s07_pipe:NUM_STAGES=4,EXTRA_THREADS=128", backend="cpu")
    assert k.params["NUM_STAGES"] == 4 and k.params["BLOCK_M"] == s.params["BLOCK_M"].default
    assert k.launch_config(256, 256, 256).threads == registry.get("hgemm/07_cp_async").launch(256, 256, 256, k.params).threads + 128
    with pytest.raises(errors.ConfigError, match="NAME=INTEGER"):
        experiments.variant_kernel("hgemm-diagnosis", s, "s07_pipe:NUM_STAGES=four", backend="cpu")
    with pytest.raises(FileNotFoundError, match="s07_missing.patch"):
        experiments.variant_source("hgemm-diagnosis", s, "s07_missing")


def _check_as_measured(kern, **kw):
    """fusion.check without its Inf case: the lab's fused variants were measured (and are rebuilt) from kernels that
    predate the 3xTF32 steps' Inf handling (ebbeb35's clamp, now the epilogue's repair_nans), so an Inf in them
    becomes NaN, as then."""
    return fusion.check(kern, cases=[c for c in fusion.default_cases(kern) if c.kind != "inf"], **kw)


def _history(rec):
    """The kernel's text at the commit a patch records, or a skip where git has no history (an installed package,
    a shallow clone)."""
    try:
        return experiments.kernel_at(rec.commit, rec.kernel)
    except LookupError as e:
        pytest.skip(f"no git history to read {rec.kernel} at {rec.commit[:12]}: {e}")


def test_every_patch_records_the_kernel_commit_it_applies_to(tmp_path):
    """Each patch in lab/ names, on its first line, the kernel file and the commit it was measured against, and
    applies to that commit's text, by gemmlab's reader and by `git apply --check` alike."""
    import subprocess

    patches = sorted(LAB.rglob("*.patch"))
    assert len(patches) >= 54
    for patch in patches:
        text = patch.read_text()
        rec = experiments.measured_against(text)
        assert rec and len(rec.commit) == 40 and rec.kernel.startswith("kernels/"), f"{patch}: no measured-against line"
        base = _history(rec)
        experiments.apply_patch(base, text, label=patch.name)  # a ValueError if not
        (tmp_path / "k.cu").write_text(base)
        body = text.split("\n", 1)[1].split("\n")
        assert body[0].startswith("--- ") and body[1].startswith("+++ "), patch
        (tmp_path / "p.patch").write_text("\n".join([text.split("\n", 1)[0], "--- a/k.cu", "+++ b/k.cu"] + body[2:]))
        out = subprocess.run(["git", "apply", "--check", "p.patch"], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, f"{patch}: {out.stderr}"


def _kernel_changed(tmp_path, monkeypatch, file):
    """The current text of kernel `file`, as gemmlab.experiments reads it, edited (a line added at the top and a
    comment at the end of every line: no hunk's lines match anywhere, at any offset), as if the kernel had been
    edited since its experiments ran; returns the edited copy."""
    from gemmlab.runtime.source import kernel_path

    real = kernel_path(file)
    edited = tmp_path / real.name
    edited.write_text("// edited after the experiment ran\n" + "".join(
        line + "  // edited\n" for line in real.read_text().splitlines()))
    monkeypatch.setattr(variants, "kernel_path", lambda f: edited if kernel_path(f) == real else kernel_path(f))
    assert variants.kernel_path(file) == edited
    return edited


def test_a_patch_still_applies_and_builds_after_its_kernel_changes(tmp_path, monkeypatch):
    """A variant is built from its kernel's text at the commit its patch records, not from the current file: with
    the step's .cu edited so that the patch no longer applies to it, the variant still builds and checks."""
    step = registry.get("sgemm/11_fragment_prefetch")
    patch = LAB / "sgemm-vs-cublas" / "xor.patch"
    rec = experiments.measured_against(patch.read_text())
    _history(rec)
    edited = _kernel_changed(tmp_path, monkeypatch, step.file)
    with pytest.raises(ValueError, match="has changed"):
        experiments.apply_patch(edited.read_text(), patch.read_text())
    text = experiments.variant_source("sgemm-vs-cublas", step, "xor")
    measured = experiments.apply_patch(experiments.kernel_at(rec.commit, rec.kernel), patch.read_text())
    assert text == experiments.without_moved_helpers(measured)  # less what common.cuh now holds
    assert "load_float4_guarded(const float* src" in measured and "load_float4_guarded(const float* src" not in text
    assert "edited after the experiment" not in text
    assert verify(kernel.Kernel(step, {}, "cpu", source_text=text)).passed


def test_without_history_a_patch_applies_to_the_current_kernel_or_says_why_not(tmp_path, monkeypatch):
    """Where git cannot give the recorded commit (an installed package, a shallow clone) the patch is applied to
    the current kernel file; if that changed where the patch touches it, the error says what and what to do."""
    from gemmlab.runtime.source import kernel_path

    step = registry.get("sgemm/11_fragment_prefetch")
    patch = (LAB / "sgemm-vs-cublas" / "xor.patch").read_text()
    rec = experiments.measured_against(patch)
    _history(rec)
    as_measured = tmp_path / "as_measured" / kernel_path(step.file).name  # the kernel as the patch was made against
    as_measured.parent.mkdir()
    as_measured.write_text(experiments.kernel_at(rec.commit, rec.kernel))

    def no_history(commit, kernel):
        raise LookupError("no history here")

    monkeypatch.setattr(variants, "kernel_at", no_history)
    real = kernel_path(step.file)
    monkeypatch.setattr(variants, "kernel_path", lambda f: as_measured if kernel_path(f) == real else kernel_path(f))
    current = experiments.variant_source("sgemm-vs-cublas", step, "xor")  # the step is as measured: it applies
    assert current == experiments.without_moved_helpers(experiments.apply_patch(as_measured.read_text(), patch))
    monkeypatch.undo()
    monkeypatch.setattr(variants, "kernel_at", no_history)
    _kernel_changed(tmp_path, monkeypatch, step.file)
    with pytest.raises(ValueError, match=r"measured against kernels/sgemm/11_fragment_prefetch.cu at commit [0-9a-f]{12}, "
                                         r"which cannot be read here \(no history here\).*not --depth 1"):
        experiments.variant_source("sgemm-vs-cublas", step, "xor")


def test_stamp_records_the_latest_kernel_commit_a_new_patch_applies_to(tmp_path):
    """`python lab/run.py FOLDER stamp VARIANT` (experiments.stamp) writes the measured-against line of a new patch:
    for a patch whose kernel has not changed since, the commit already recorded."""
    patch = LAB / "sgemm-vs-cublas" / "xor.patch"
    rec = experiments.measured_against(patch.read_text())
    _history(rec)
    if experiments.git("log", "--format=%H", "-1", "--", rec.kernel).strip() != rec.commit or experiments.git(
            "status", "--porcelain", "--", rec.kernel).strip():
        pytest.skip(f"{rec.kernel} changed since {rec.commit[:12]}")
    new = tmp_path / "xor.patch"
    new.write_text(patch.read_text().split("\n", 1)[1])  # as written, before it was stamped
    assert experiments.measured_against(new.read_text()) is None
    assert experiments.stamp(new) == rec
    assert new.read_text() == patch.read_text()


def test_gpu_only_variants_compile_for_hopper():
    """Variants the emulator cannot run (named barriers) still compile for sm_90 with NVRTC."""
    s = registry.get("hgemm/07_cp_async")
    for group in results.experiment("hgemm-diagnosis")["experiments"]:
        for name in group.get("gpu_only", []):
            inst = kernel.Instance(s, {}, source_text=experiments.variant_source("hgemm-diagnosis", s, name))
            assert inst.resources("sm_90").registers > 0


# ------------------------------------------------------------------------------------------------
# fusion-tf32x3: fused step 05's accumulation and split (chapter 8)
# ------------------------------------------------------------------------------------------------
def _tf32x3_source(name):
    from gemmlab import fusion
    return experiments.variant_source("fusion-tf32x3", fusion.get("fused/05_tf32x3"), name)


def test_tf32x3_variants_apply_and_compile():
    from gemmlab import fusion, nvrtc
    names = [p.stem for p in (LAB / "fusion-tf32x3").glob("*.patch")]
    assert sorted(names) == ["1x", "a32_loads", "before", "block_bar", "cvt", "cvt_guard", "interleave", "nosplit",
                            "one_accumulator", "tile_timeline", "timeline", "trunc"]
    for name in names:
        text = _tf32x3_source(name)
        if nvrtc.available():  # cvt and cvt_guard use inline PTX the emulator has no twin for: sm_90 only
            assert fusion.resources("fused/05_tf32x3", "sm_90", source=text).spill_stores == 0


def test_tf32x3_chunks_stop_the_truncation_drift_on_the_emulator():
    """The emulator's TF32 mma rounds toward zero like the tensor cores: one running accumulator drifts."""
    import numpy as np
    from gemmlab import fusion
    a, b, c = fusion.make_inputs("random", 256, 256, 256, 256)
    want = fusion.reference(a, b, c)
    err = {}
    for name in ("step", "one_accumulator"):
        kern = fusion.step("fused/05_tf32x3", backend="cpu", source=_tf32x3_source(name))
        err[name] = float(np.abs(kern(a, b, c) - want).max() / np.abs(want).max())
    f32 = ((a @ b) @ c).astype(np.float32)
    assert err["one_accumulator"] > 2 * err["step"]
    assert err["step"] < 2 * float(np.abs(f32 - want).max() / np.abs(want).max())  # fp32's level


def test_tf32x3_claims_of_the_record():
    exp = results.experiment("fusion-tf32x3")
    first = experiments.tf32x3_rows(exp, "variants-split-cvt.log", 4096, "b128")
    landed = experiments.tf32x3_rows(exp, "variants-split-3op.log", 4096, "b128")
    torch_err = exp["logs"]["variants-split-cvt.log"]["torch_max_rel_error"]["4096"]
    # "tens of times step 04's" / "back to fp32's level, below PyTorch's"
    assert first["old"]["max_rel_error"] > 20 * first["chunk"]["max_rel_error"]
    assert first["chunk"]["max_rel_error"] < torch_err and landed["cur"]["max_rel_error"] < torch_err
    # "well under half of 100 TFLOP/s, slower than cuBLAS" for the first version
    assert first["chunk"]["tflops"] < 50 and first["chunk"]["speedup"] < 1 and first["old"]["speedup"] < 1
    # "about a quarter faster" without the guard; the landed split "within about 10% of !nosplit"
    assert 1.2 < first["noguard"]["tflops"] / first["chunk"]["tflops"] < 1.35
    assert landed["cur"]["tflops"] > 0.88 * landed["!nosplit"]["tflops"] and landed["cur"]["speedup"] > 1
    assert landed["!nosplit"]["tflops"] == max(r["tflops"] for v, r in landed.items() if v != "!1x")
    # "!trunc: a few % faster"
    assert 1.0 <= landed["!trunc"]["tflops"] / landed["cur"]["tflops"] < 1.1
    ncu = exp["ncu"]
    for rec in (ncu[k] for k in ncu if k.startswith("ncu-cvt_guard")):  # "the ALU pipe is the busiest" (cvt split)
        assert rec["alu_pipe_pct"] > max(rec["fma_pipe_pct"], rec["lsu_pipe_pct"], rec["tensor_pipe_pct"])


def test_tf32x3_timeline_claims():
    """Chapter 8: at 512 a phase of step 05 takes several times its TF32-ceiling floor, and the floors of
    the launch, both phases and the barrier leave no room under 3x the baseline ("every part at its floor")."""
    from gemmlab import fusion
    exp, kt = results.experiment("fusion-tf32x3"), results.experiment("fusion-kernel-time")
    tl = exp["timeline_us"]["512 best512"]
    best = fusion.best([r for r in fusion.load("NVIDIA H100 80GB HBM3") if "pct_of_baseline" in r], "fused/05_tf32x3", 512)
    floor = 3 * 2 * 512**3 / (exp["peaks"]["mma_m16n8k8_tf32"]["tflops"] * 1e12 * min(best["grid"], 132) / 132) * 1e6
    phase = (tl["phase 1 (median block)"] + tl["phase 2 (median block)"]) / 2
    assert phase > 2 * floor                                                  # "that leaves room"
    best_case = (kt["event_times_us"]["512"]["empty RawKernel | median event time"] + 2 * floor
                 + tl["barrier (last arrival -> last release)"])
    assert best_case > 0.9 * best["baseline_median_s"] * 1e6 / 3             # "every part at its floor at once"
    assert tl["first start -> last phase-2 end"] < best["median_s"] * 1e6     # the kernel inside the event time


def test_tf32x3_tile_timeline_claims():
    """Chapter 8: inside a phase at 512 the K loop is the largest part, below half the TF32 ceiling."""
    exp = results.experiment("fusion-tf32x3")
    for phase in exp["tile_timeline_us"]["512 best512"].values():
        others = sum(t for what, t in phase.items() if what != "K loop")
        assert phase["K loop"] > 2 * others
    floor = 3 * 2 * 512**3 / (exp["peaks"]["mma_m16n8k8_tf32"]["tflops"] * 1e12 * 128 / 132) * 1e6
    assert floor / exp["tile_timeline_us"]["512 best512"]["phase 1"]["K loop"] < 0.5


def test_tf32x3_interleave_claims():
    """'no change beyond run-to-run noise at any size'; 'larger or smaller BLOCK_K at 512: no change either'."""
    exp = results.experiment("fusion-tf32x3")
    rows = exp["logs"]["variants-interleave.log"]["rows"]
    pairs = {}
    for r in rows:
        pairs.setdefault((r["n"], r["config"]), {})[r["variant"]] = r["us"]
    assert len(pairs) >= 6
    for times in pairs.values():
        assert abs(times["interleave"] / times["step"] - 1) < 0.1
    at512 = [t["step"] for (n, cfg), t in pairs.items() if n == 512 and cfg.startswith("best512")]
    assert len(at512) == 3 and max(at512) / min(at512) < 1.05


def test_tf32x3_splitk8_claim():
    """'More warps per tile (SPLIT_K = 8): no faster than the sweep's winner' (same run)."""
    exp = results.experiment("fusion-tf32x3")
    rows = {r["config"]: r["us"] for r in exp["logs"]["variants-splitk8.log"]["rows"]}
    assert set(rows) >= {"best512", "k8w32", "k8w64"}
    assert min(rows["k8w32"], rows["k8w64"]) >= 0.98 * rows["best512"]


def test_fusion_launch_path_claims():
    """Chapter 8, 'The launch path' (H200): packing the arguments once takes several times the empty
    kernel's saving off step 05's call at 512; the one-word barrier and C's prefetch are within a few %."""
    launch = results.experiment("fusion-kernel-time")["launch"]["NVIDIA H200"]
    med = {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in launch["us"].items()}
    at = med[512]
    assert at["05 rawkernel"] - at["05 packed"] > 2 * (at["empty rawkernel"] - at["empty packed"]) > 0
    assert med[1024]["05 rawkernel"] > med[1024]["05 packed"]                 # the same host time at 1024
    for variant in ("old_barrier packed", "prefetch_c packed"):
        assert abs(at[variant] / at["05 packed"] - 1) < 0.03, variant         # "did not show"
    assert at["05 graph"] < at["05 packed"] < at["torch a@b@c"] / 2
    assert all(e < 1e-5 for e in launch["max_rel_error"]["512"].values())


def test_fusion_h200_record_claims():
    """Chapter 8's verdict from the H200 lane it reads: short of 3x at 512, not slower from 1024 on."""
    from gemmlab import fusion
    recs = [r for r in fusion.load("NVIDIA H200") if "pct_of_baseline" in r]
    fastest = {n: fusion.best(recs, "fused/05_tf32x3", n) for n in (512, 1024, 2048, 4096)}
    assert 1 < fusion.speedup(fastest[512]) < 3
    assert all(fusion.speedup(fastest[n]) >= 1 for n in (1024, 2048, 4096))
    at512 = [fusion.best(recs, s, 512) for s in fusion.DEFAULT_STEPS]
    assert 1 < max(fusion.speedup(r) for r in at512 if r) < 3  # "the seed's 3x at 512 is still out of reach"
    assert all(r["max_rel_error"] < 2e-6 for r in recs if r["step"] == "fused/05_tf32x3")
    # "the fastest fused step ... is not slower from 1024 on": step 07 or 08 at its fastest tiles
    for n in (1024, 2048, 4096):
        top = min((fusion.best(recs, s, n) for s in fusion.DEFAULT_STEPS if fusion.best(recs, s, n)),
                  key=lambda r: r["median_s"])
        assert top["step"] in ("fused/07_tma_tf32x3", "fused/08_tile_flags")
        assert fusion.speedup(top) > 1.3 and top["max_rel_error"] < 2e-6
    # the graph launch: recorded beside the direct call for 07 and 08, and faster than it at 512
    graphed = [r for r in recs if "graph_median_s" in r and r["m"] == 512]
    assert {r["step"] for r in graphed} >= {"fused/07_tma_tf32x3", "fused/08_tile_flags"}
    assert min(r["graph_median_s"] for r in graphed) < min(r["median_s"] for r in graphed)


def test_launch_paths_claims():
    """Chapter 8, 'Launching from a CUDA graph': a graph launch costs the host less than cuLaunchKernel, and
    takes time off step 07's event time and the empty kernel's."""
    pa = results.experiment("fusion-kernel-time")["paths"]["NVIDIA H200"]
    med = {k: statistics.median(v) for k, v in pa["us"].items()}
    assert pa["host_us"]["07 graph"] < pa["host_us"]["07 direct"]
    assert pa["host_us"]["empty graph"] < pa["host_us"]["empty direct"]
    assert med["07 graph"] < med["07 direct"] and med["empty graph"] < med["empty direct"]


def test_tile_flags_claims():
    """Chapter 8, step 08: within a few percent of step 07 at the same tiles (the wait moved, it did not go
    away), launched directly or from a graph; the first try, a counter per K tile taken in turn by one thread,
    slower everywhere than step 07 in its own run."""
    _, exp = _tma_experiment()
    fl, pk = exp["flags"]["NVIDIA H200"], exp["perktile"]["NVIDIA H200"]
    assert sorted(int(n) for n in fl["us"]) == sorted(int(n) for n in pk["us"]) == [512, 1024, 2048, 4096]
    for n, calls in fl["us"].items():
        med = {k: statistics.median(v) for k, v in calls.items()}
        first = {k: statistics.median(v) for k, v in pk["us"][n].items()}
        for t in [k[3:] for k in med if k.startswith("07 ")]:
            assert abs(med["08 " + t] / med["07 " + t] - 1) < 0.05, (n, t)
            if not t.endswith(" graph"):
                assert first["08 " + t] > 1.1 * first["07 " + t], (n, t)


def test_perktile_patch_applies():
    """The experiment's first try of step 08 (perktile.patch) still applies to the kernel and compiles."""
    mod, _ = _tma_experiment()
    src = mod.perktile_source()
    assert "take_flag(&ready[kt * TILE_K / BLOCK_N])" in src and "wait_counters" not in src
    from gemmlab import nvrtc
    if nvrtc.available():
        assert fusion.resources("fused/08_tile_flags", "sm_90", source=src).spill_stores == 0


def test_overlap_patch_applies_and_keeps_wgmmas_async():
    """overlap.patch still applies to step 08, matches float64 in the emulator, and compiles for sm_90a with the
    wgmmas asynchronous (no C7514/C7518/C7519 serialization) and no spills at the configurations it was timed at."""
    mod, _ = _tma_experiment()
    src = mod.overlap_source()
    assert "mbarrier_arrive_if(&empty[stage], tid == 0)" in src and "SplitB<BLOCK_N> (&split)[2]" in src
    assert "PASS" in str(_check_as_measured(mod.overlap_kernel(backend="cpu", BLOCK_N=64, SPLIT_K=2, NUM_STAGES=4)))
    assert mod.overlap_step().smem(dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=8)) > \
        fusion.get("fused/08_tile_flags").smem(dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=8), None)
    from gemmlab import nvrtc
    if nvrtc.available():
        for bn, sk, ns in {c for confs in mod.OVERLAP_CONFIGS.values() for c in confs}:
            res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            assert not res.wgmma_serialized and res.spill_stores == 0, (bn, sk, ns, res)


def test_overlap_claims():
    """Chapter 8, the overlap experiment (H200, one run, both checked): the patch is slower than step 08 at every
    configuration timed, by most with one group at 1024; with one group at 1024 its split costs the call more
    than 1.5x what step 08's does; without the split it is still slower, and without its proxy fence too."""
    mod, exp = _tma_experiment()
    run = exp["overlap"]["NVIDIA H200"]
    assert sorted(int(n) for n in run["us"]) == [512, 1024, 2048, 4096]
    change = {}
    for n, calls in run["us"].items():
        med = {k: statistics.median(v) for k, v in calls.items()}
        assert all(len(v) == 3 for v in calls.values())
        for t in [k[3:] for k in med if re.fullmatch(r"08 n\d+ k\d+ s\d+", k)]:
            change[(int(n), t)] = med["overlap " + t] / med["08 " + t] - 1
            assert change[(int(n), t)] > 0, (n, t)
            assert med["overlap " + t + " graph"] > med["08 " + t + " graph"], (n, t)
            assert med["overlap no split " + t] > med["08 no split " + t], (n, t)
            assert med["overlap no fence " + t] > med["08 " + t], (n, t)
            if (int(n), t) == (1024, "n64 k1 s4"):
                split08, split_ov = med["08 " + t] - med["08 no split " + t], med["overlap " + t] - med["overlap no split " + t]
                assert split_ov > 1.5 * split08
    assert max(change, key=change.get) == (1024, "n64 k1 s4")
    errors = _log_errors(run)
    assert len(errors) == 2 * sum(len(c) for c in mod.OVERLAP_CONFIGS.values()) and max(errors) < 2e-6


def test_limits_variants_and_multicast_patch_compile():
    """limits.py's variants of step 08 still find their text, multicast.patch still applies (cluster-scope release,
    or CTA scope when asked), and every kernel compiles for sm_90a with the wgmmas asynchronous and no spills (the
    checked ones; a timed-only diagnostic may spill a little), as does the wgmma rate probe (rate.cu)."""
    from gemmlab import nvrtc
    from gemmlab.runtime.source import assemble
    mod, _ = _tma_experiment("limits.py")
    sources = {name: mod.variant_source(name) for name in mod.VARIANTS}
    assert "if (M > 0) return;" in sources["returns at once"] and "tma_map_acquire" not in sources["no map fences"]
    cluster, cta = mod.multicast_source(), mod.multicast_source(cta_scope=True)
    assert mod.CLUSTER_ARRIVE in cluster and mod.CLUSTER_ARRIVE not in cta and mod.CTA_ARRIVE in cta
    assert "__cluster_dims__(CLUSTER, 1, 1)" in cluster and ".multicast::cluster" in cluster
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    for name, src in sources.items():  # the timed-only diagnostics may spill a little (no A fragments: 20 B with
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **mod.TILES_512)  # the H200's NVRTC)
        assert not res.wgmma_serialized and (res.spill_stores == 0 or not mod.VARIANTS[name][2]), (name, res)
    for n_cluster in (2, 4):
        st = mod.multicast_step(n_cluster)
        for src in (cluster, cta):
            for tiles in (mod.TILES_512, mod.TILES_2048):
                p = st.resolve({**tiles, "CLUSTER": n_cluster})
                res = nvrtc.compile(assemble(st.file, src), st.name_expression(p), st.target("sm_90"), label="multicast").resources
                assert not res.wgmma_serialized and res.spill_stores <= 8, (n_cluster, tiles, res)  # n64: 8 B, once
    probe = mod.rate_source()
    for n in (32, 64):
        assert not nvrtc.compile(probe, f"wgmma_rate<{n}, 3>", "sm_90a", label="rate").resources.wgmma_serialized


def test_fp16_variants_compile():
    """limits.py fp16: step 08 and two of its variants are there with FP16 (the variants also without; the fp16 ones with
    six m64n32k16 wgmmas a K tile and the A fragments split into fp16 pairs), and all compile for sm_90a with the
    wgmmas asynchronous and no spills, as does rate.cu with its fp16 wgmmas."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment("limits.py")
    sources = mod.fp16_sources()
    assert sorted(sources) == ["as it is fp16", "no split", "no split fp16", "only the wgmmas", "only the wgmmas fp16"]
    for name, src in sources.items():
        assert ("m64n32k16.f32.f16.f16" in src and "split_f16x2(" in src) == name.endswith("fp16"), name
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    for name, src in sources.items():
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **mod.TILES_512)
        assert not res.wgmma_serialized and res.spill_stores == 0, (name, res)
    res = nvrtc.compile(mod.rate_source(fp16=True), "wgmma_rate<32, 3, true>", "sm_90a", label="rate").resources
    assert not res.wgmma_serialized, res


def test_limits_claims():
    """Chapter 8, 'What bounds step 08 at 512' (H200, one run, every kernel that computes E checked): no copies
    saves under 1.5 us at 512 and under 2% at 2048; multicast with the cluster-scope release is slower than
    step 08 at both sizes, with clusters of 4 the slowest; the wgmmas alone run near the TF32 peak (N = 64) and at
    about 900 FMA per clock per SM with N = 32, so a phase's wgmmas would take well under step 07's K loop at 512;
    each of no copies, no split and no A fragments saves less than all three at once; and against the
    a @ b @ c (timed in the same run) the kernel's work takes longer than the room 3x leaves it beside the launch."""
    mod, exp = _tma_experiment("limits.py")
    run, rate = exp["limits"]["NVIDIA H200"], exp["rate"]["NVIDIA H200"]
    med = {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    assert sorted(med) == [512, 2048] and all(len(v) == 3 for c in run["us"].values() for v in c.values())
    m = med[512]
    assert 0 < m["08"] - m["08 no copies"] < 1.5 and 1 - med[2048]["08 no copies"] / med[2048]["08"] < 0.02
    assert m["08 returns at once"] < m["08"] / 2
    for n in (512, 2048):
        assert med[n]["multicast 2 cluster"] > 1.1 * med[n]["08"]
        assert med[n]["multicast 2 cta"] < med[n]["multicast 2 cluster"]
    assert m["multicast 4 cluster"] > m["multicast 2 cluster"] and m["multicast 4 cta"] > m["multicast 2 cta"]
    r32, r64 = rate["n"]["32"]["3"], rate["n"]["64"]["3"]
    assert 850 < r32["fma_per_clock"] < r64["fma_per_clock"] <= 1030 and r64["fma_per_clock"] > 1000
    wg_us = 16 * 12 * 64 * 32 * 8 / (r32["tflops"] * 1e12 / 2 / 132) * 1e6
    marks = exp["timeline"]["NVIDIA H200"]["marks"]["as it is"]
    kloop = statistics.mean([marks["p1 K loop done"][1] - marks["p1 first data"][1],
                             marks["p2 K loop done"][1] - marks["p2 first data"][1]])
    assert wg_us < 0.6 * kloop
    assert m["08"] - m["08 only the wgmmas"] > max(m["08"] - m[f"08 {v}"] for v in ("no copies", "no split", "no A fragments"))
    same_run = m["torch a@b@c"]  # the 3x against the a @ b @ c timed in this run (one comparison, one run)
    body, room = m["08"] - m["08 returns at once"], same_run / 3 - m["08 returns at once"]
    assert body > room > 2 * wg_us  # not met in these records (the chapter computes which verdict it prints)
    assert run["clusters"] == {"2": 66, "4": 30}  # clusters of 4: 120 blocks for 128 tiles
    errors = _log_errors(run)
    assert len(errors) == 1 + 2 + 4 + 1 + 2 and max(errors) < 2e-6
    assert (EXP / "fusion-tma" / run["log"]).read_text().count("PASS: fused/08_tile_flags") == 4


def test_tf32x3_loop_claims():
    """Chapter 8, 'Two cuts in the K loop' (H200, every recorded run): with the sweep's tiles at 512 both
    changes take time off; at 2048 and 4096 (SPLIT_K = 1) they move the step by under 1%."""
    runs = results.experiment("fusion-tf32x3")["loop"]["NVIDIA H200"]
    assert len(runs) >= 2
    for run in runs:
        med = {key: {k: statistics.median(v) for k, v in calls.items()} for key, calls in run["us"].items()}
        at = med["512 best512"]
        assert at["both (step 05)"] < 0.99 * at["before"], run["log"]
        assert at["group barrier only"] < at["before"] and at["ldmatrix A only"] < at["before"], run["log"]
        for key in ("2048 best2048", "4096 b128"):
            assert abs(med[key]["both (step 05)"] / med[key]["before"] - 1) < 0.01, (run["log"], key)


def test_tf32x3_groups_claim():
    """'eight (SPLIT_K = 8) are still slower than four at 512' (groups.py, the step with per-group barriers)."""
    run = results.experiment("fusion-tf32x3")["groups"]["NVIDIA H200"]
    med = {k: statistics.median(v) for k, v in run["us"].items()}
    k4 = min(t for k, t in med.items() if k.startswith("k4"))
    assert min(t for k, t in med.items() if k.startswith("k8")) > k4


def test_fusion_kernel_time_variants_apply_and_check():
    """launch.py's variants (old_barrier, prefetch_c) still apply to step 05 as it is, and pass the check."""
    from gemmlab import fusion
    st = fusion.get("fused/05_tf32x3")
    names = sorted(p.stem for p in (LAB / "fusion-kernel-time").glob("*.patch"))
    assert names == ["old_barrier", "prefetch_c"]
    for name in names:
        kern = fusion.step(st.name, backend="cpu", source=experiments.variant_source("fusion-kernel-time", st, name))
        assert fusion.check(kern, cases=[fusion.Case("random", 40, 33, 36, 20)]).passed


# ------------------------------------------------------------------------------------------------
# fusion-wgmma: fused step 06 (chapter 8, "Step 06: the right operand through wgmma")
# ------------------------------------------------------------------------------------------------
def test_wgmma_variants_apply_and_compile():
    from gemmlab import nvrtc
    st = fusion.get("fused/06_wgmma_tf32x3")
    names = sorted(p.stem for p in (LAB / "fusion-wgmma").glob("*.patch"))
    assert names == ["loads_before_split", "nofence", "round_timeline"]
    for name in names:
        text = experiments.variant_source("fusion-wgmma", st, name)
        if nvrtc.available():
            assert fusion.resources(st.name, "sm_90", source=text).spill_stores == 0
    for name in ("loads_before_split", "nofence"):  # round_timeline reads clock64: GPU only
        kern = fusion.step(st.name, backend="cpu", source=experiments.variant_source("fusion-wgmma", st, name))
        assert _check_as_measured(kern).passed


def _wgmma_medians():
    exp = results.experiment("fusion-wgmma")
    run = exp["steps"]["NVIDIA H200"]
    return exp, {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}


def test_wgmma_step_claims():
    """Chapter 8: step 06 is faster than step 05 at 512 but slower from 1024 on (same run), still short of 3x."""
    exp, med = _wgmma_medians()
    assert sorted(med) == [512, 1024, 2048, 4096]
    for n, calls in med.items():
        assert all(len(v) == 3 for v in exp["steps"]["NVIDIA H200"]["us"][str(n)].values())  # three rounds
        six = min(v for k, v in calls.items() if k.startswith("06 "))
        if n == 512:
            assert six < calls["05 best"]
        else:
            assert six > calls["05 best"], f"step 06 at {n}"
    # each configuration was checked at full size before it was timed
    log = (EXP / "fusion-wgmma" / exp["steps"]["NVIDIA H200"]["log"]).read_text()
    errors = [float(x) for x in re.findall(r"error ([\d.e+-]+)$", log, re.M)]
    assert errors and max(errors) < 2e-6


def test_wgmma_timeline_and_variant_claims():
    """'The multiply was never the long part'; moving the copies after the split helps; the fence costs a little."""
    exp = results.experiment("fusion-wgmma")
    tl = exp["timeline"]["NVIDIA H200"]["parts"]["512 n32 k4 s3"]
    for phase in tl.values():
        us = {k: v["us"] for k, v in phase.items()}
        mma = us["the wgmmas and the chunk's add"]
        assert mma < us["waiting for the round's tiles"] + us["issuing the next loads"]
        assert mma < us["the split of B"] and mma < us["the whole tile"] / 4
        assert sum(v for k, v in us.items() if k != "the whole tile") <= us["the whole tile"] * 1.01
    var = {k: statistics.median(v) for k, v in exp["variants"]["NVIDIA H200"]["us"].items()}
    for c in ("n32 k4 s3", "n32 k4 s2"):
        assert var[f"loads_before_split {c}"] > var[f"step {c}"]   # "took ... off the call"
        assert var[f"!nofence {c}"] < var[f"step {c}"]             # "the fence costs a little"
        assert var[f"step {c}"] / var[f"!nofence {c}"] < 1.05


# ------------------------------------------------------------------------------------------------
# fusion-tma: what step 06's parts cost, and fused step 07 (chapter 8, "Step 07: the tiles by TMA")
# ------------------------------------------------------------------------------------------------
def _log_errors(run: dict, pattern: str = r"error ([\d.e+-]+)$") -> list[float]:
    """The max relative errors a fusion-tma log printed for its checked kernels (run: its results.json entry)."""
    return [float(x) for x in re.findall(pattern, (EXP / "fusion-tma" / run["log"]).read_text(), re.M)]


def _tma_experiment(script: str = "steps.py"):
    """(the fusion-tma script as a module, the experiment's results.json)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("tma_" + script[:-3], LAB / "fusion-tma" / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, results.experiment("fusion-tma")


def test_tma_parts_still_apply_and_compile():
    """Each 'part taken out' of steps.py parts still finds its text in step 06 exactly once and compiles."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment()
    for name in mod.PARTS:
        text = mod.part_source(name)
        if nvrtc.available():
            fusion.resources("fused/06_wgmma_tf32x3", "sm_90", source=text, **mod.STEP06_512)


def test_tma_parts_claims():
    """Chapter 8: of the single parts, the copies cost step 06's call the most at 512; the pieces of the call
    (empty launch, phase 1, barrier, phase 2) are each positive."""
    _, exp = _tma_experiment()
    run = exp["parts"]["NVIDIA H200"]
    med = {k[3:]: statistics.median(v) for k, v in run["us"]["512"].items() if k.startswith("06 ")}
    assert all(len(v) == 3 for v in run["us"]["512"].values())
    saved = {k: med["as it is"] - v for k, v in med.items() if k.startswith("no ")}
    singles = ("no copies", "no split of B", "no wgmmas", "no A fragment loads")
    assert max(singles, key=saved.get) == "no copies"
    assert all(saved[k] > 0 for k in singles)
    assert 0 < med["returns at once"] < med["phase 1 only"] < med["phase 1 and the barrier"] < med["as it is"]


def test_tma_step_claims():
    """Chapter 8: step 07 is a little faster than 06 at 512 (less than the copies cost); faster than step 05
    (and so the fastest fused step) at 1024, 2048 and 4096."""
    _, exp = _tma_experiment()
    run = exp["steps"]["NVIDIA H200"]
    med = {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    assert sorted(med) == [512, 1024, 2048, 4096]
    parts = exp["parts"]["NVIDIA H200"]["us"]["512"]
    copies = statistics.median(parts["06 as it is"]) - statistics.median(parts["06 no copies"])
    seven = {n: min(v for k, v in calls.items() if k.startswith("07 ")) for n, calls in med.items()}
    assert 0 < med[512]["06 best"] - seven[512] < copies
    for n in (1024, 2048, 4096):
        assert seven[n] < min(med[n]["05 best"], med[n]["06 best"])
    assert fusion.resources("fused/07_tma_tf32x3", "sm_90").registers < fusion.resources("fused/06_wgmma_tf32x3", "sm_90").registers


def test_tma_serialized_still_applies():
    """The experiment's first split of step 07's A fragments still applies, and ptxas still serializes it
    (C7519) where step 07 as it is does not."""
    mod, _ = _tma_experiment()
    p = dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=8)
    assert fusion.resources("fused/07_tma_tf32x3", "sm_90", source=mod.serialized_source(), **p).wgmma_serialized
    assert not fusion.resources("fused/07_tma_tf32x3", "sm_90", **p).wgmma_serialized


def test_tma_serialized_claims():
    """Chapter 8 ("Read ptxas' warnings"): at every size and configuration timed that ptxas does not spill,
    step 07 as it is is faster than with its first split (same run, three rounds); where it spills, the first
    split is the faster (the chapter says so), and that tiling is not the fastest of the lane at any size.
    All checked first. (That ptxas serializes the first split is test_tma_serialized_still_applies.)"""
    _, exp = _tma_experiment()
    run = exp["serialized"]["NVIDIA H200"]
    assert sorted(int(n) for n in run["us"]) == [512, 1024, 2048, 4096]
    spilled = set()
    for n, calls in run["us"].items():
        assert all(len(v) == 3 for v in calls.values())
        configs = {k[:-len(" as it is")] for k in calls if k.endswith(" as it is")}
        assert configs
        for cfg in configs:
            bn, sk, ns = (int(x[1:]) for x in cfg.split()[1:])
            spills = fusion.resources("fused/07_tma_tf32x3", "sm_90", BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns).spills > 0
            after, before = (statistics.median(calls[cfg + s]) for s in (" as it is", " split first"))
            assert (after > before) if spills else (after < before), (n, cfg)
            if spills:
                spilled.add((int(n), (bn, sk, ns)))
    assert spilled  # the chapter names the spilling tiling
    recs = fusion.load("NVIDIA H200")
    for n, (bn, sk, ns) in spilled:
        assert fusion.best(recs, "fused/07_tma_tf32x3", n)["params"] != dict(BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
    errors = _log_errors(run)
    assert errors and max(errors) < 2e-6


def test_tma_ring_still_applies():
    """The ring's marks and the element-by-element split still apply to step 07, and step 07 loads its B
    elements before it stores any (eight LDS, then the STS) where the old split interleaved them."""
    mod, _ = _tma_experiment()
    assert "RING(6);" in mod.patched07(mod.RING_MARKS) and len(mod.RING_PARTS) == 6
    assert "RING(6);" in mod.patched07(mod.RING_MARKS + mod.ELEMENTWISE)
    from gemmlab import nvrtc
    from gemmlab.runtime.source import assemble

    st = fusion.get("fused/07_tma_tf32x3")
    p = st.resolve(dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=8))

    def split_ops(source):
        sass = nvrtc.sass(nvrtc.compile(source, st.name_expression(p), arch="sm_90a"))
        body = sass.split("FENCE.VIEW.ASYNC.S")[1]  # the first one is the mbarrier init's
        body = body[body.rindex("BAR.SYNC"):]  # from the group barrier before the split
        return [op for op in re.findall(r"\b(LDS|STS)\b", body)]
    now, before = split_ops(assemble(st.file)), split_ops(assemble(st.file, mod.patched07(mod.ELEMENTWISE)))
    assert now == ["LDS"] * 8 + ["STS"] * 16
    assert before[:3] == ["LDS", "STS", "STS"] and before.count("LDS") == 8


def test_tma_ring_claims():
    """Chapter 8 ("Where a K tile's time goes"): the split of B and the whole K tile are shorter as it is than
    element by element; the split is still about as long as issuing the wgmmas; both variants checked."""
    _, exp = _tma_experiment()
    ring = exp["ring"]["NVIDIA H200"]["parts"]
    before, after = ring["split element by element"], ring["as it is"]
    assert list(after) == ["group barrier", "split of B", "A fragments", "barrier, release", "wgmmas issued",
                           "wgmmas done", "tile, in all"]
    assert after["split of B"] < 0.7 * before["split of B"]
    assert after["tile, in all"] < before["tile, in all"]
    assert 0.5 < after["split of B"] / after["wgmmas issued"] < 2
    errors = _log_errors(exp["ring"]["NVIDIA H200"], r"error ([\d.e+-]+);")
    assert len(errors) == 2 and max(errors) < 2e-6


def test_tma_loads_claims():
    """Chapter 8: step 07 as it is is faster than with its split element by element at every configuration
    timed (same run, three rounds, both checked), and by more than 10% with n64 k2 from 1024 on; without the
    split's work (timed only) it is faster still, and still short of 3x at 512."""
    _, exp = _tma_experiment()
    run = exp["loads"]["NVIDIA H200"]
    assert sorted(int(n) for n in run["us"]) == [512, 1024, 2048, 4096]
    for n, calls in run["us"].items():
        configs = {k[:-len(" as it is")] for k in calls if k.endswith(" as it is")}
        assert configs and all(len(v) == 3 for v in calls.values())
        for cfg in configs:
            after, before = (statistics.median(calls[cfg + s]) for s in (" as it is", " split element by element"))
            assert after < before, (n, cfg)
            if int(n) > 512 and "n64 k2" in cfg:
                assert after < 0.9 * before, (n, cfg)
            assert statistics.median(calls[cfg + " no split"]) < after, (n, cfg)  # timed only
    # the chapter compares the call without a split with the lane's a @ b @ c (another run), and says whether
    # that ratio passes 3x; whichever way, it is more than 2x
    recs = fusion.load("NVIDIA H200")
    base = fusion.baseline(recs, 512)["median_s"] * 1e6
    no_split = min(statistics.median(v) for k, v in run["us"]["512"].items() if k.endswith(" no split"))
    assert base / no_split > 2
    errors = _log_errors(run)
    assert errors and max(errors) < 2e-6


def test_tma_timeline_still_applies():
    """The timeline's marks and the empty launch still apply to step 07 (each substitution exactly once)."""
    mod, _ = _tma_experiment()
    assert "MARK(10);" in mod.patched07(mod.TIMELINE_MARKS) and len(mod.MARKS) == 11  # ValueError if not
    assert "if (M > 0) return;" in mod.patched07(mod.RETURNS)


def test_tma_timeline_claims():
    """Chapter 8 ("Where the call goes now"): the marks come in order; the blocks run for less than the call;
    3x would leave the blocks less time, after the empty launch, than they run; the K loops and the rest add
    up to the blocks' time; the verdict the chapter picks (K loops at the spec sheet's TF32 peak enough, with
    everything around them as it is, or not) is the data's."""
    _, exp = _tma_experiment()
    tl = exp["timeline"]["NVIDIA H200"]
    marks, no_split = tl["marks"]["as it is"], tl["marks"]["phase 2 without the split"]
    assert list(no_split) == list(marks)
    # "phase 2's K loop takes ... instead of ...": shorter without the split, phase 1 about the same
    loop = lambda m, p: m[f"p{p} K loop done"][1] - m[f"p{p} first data"][1]
    assert loop(no_split, 2) < 0.9 * loop(marks, 2) and abs(loop(no_split, 1) / loop(marks, 1) - 1) < 0.05
    assert list(marks) == ["start", "init done", "p1 first data", "p1 K loop done", "p1 stored", "before barrier",
                           "after barrier", "p2 first data", "p2 K loop done", "p2 stored", "end"]
    medians = [v[1] for v in marks.values()]
    assert medians == sorted(medians) and all(lo <= mid <= hi for lo, mid, hi in marks.values())
    call, empty = (statistics.median(tl["us"]["512"][k]) for k in ("07 as it is", "07 returns at once"))
    body = marks["end"][2] - marks["start"][0]
    assert 0 < empty < call and body < call
    k_loops = loop(marks, 1) + loop(marks, 2)
    recs = fusion.load("NVIDIA H200")
    base = fusion.baseline(recs, 512)["median_s"] * 1e6
    room = base / 3 - empty
    assert 0 < room < body                                       # "... µs less than they run"
    from gemmlab import hardware
    h200 = hardware.spec_for("NVIDIA H200")
    assert tl["blocks"] == 128  # 64 x 32 tiles at 512, one block per SM
    peak_loops = 3 * 2 * 2 * 512**3 / (h200.fp16_tensor_tflops / 2 * 1e12 * tl["blocks"] / h200.sms) * 1e6
    outside = body - k_loops
    assert 0 < peak_loops < k_loops and outside > 0
    # 3x leaves the K loops less than they take; whether loops at the peak would fit (the chapter's verdict picks
    # its sentence from the data) turns on the lane's baseline, which moved by a few us between lanes of a day
    assert room - outside < k_loops
    errors = _log_errors(tl)
    assert errors and max(errors) < 2e-6


@pytest.mark.parametrize("params", [dict(BLOCK_M=32, SPLIT_K=2, NUM_STAGES=2), dict(BLOCK_M=64, SPLIT_K=3, NUM_STAGES=3)])
def test_tma_transposed_checks_on_the_emulator(params):
    """The transposed variant (transposed.patch, against step 07) matches float64 in the emulator, edges and
    NaN included; the patch and its ring marks still apply."""
    mod, _ = _tma_experiment()
    assert _check_as_measured(mod.transposed_kernel("cpu", **params), raise_on_fail=False).passed
    text = mod.transposed_source()
    for old, _ in mod.TRANSPOSED_RING_MARKS:
        assert text.count(old) == 1


def test_tma_transposed_claims():
    """Chapter 8: the transposed variant, checked on the GPU, is within 10% of step 07 at every size (each at
    its fastest tiles timed, same run), its split as long as 07's with three groups, and 07's split longer
    with each group that shares the SM."""
    _, exp = _tma_experiment()
    tr = exp["transposed"]["NVIDIA H200"]
    assert sorted(int(n) for n in tr["us"]) == [512, 1024, 2048, 4096]
    for n, calls in tr["us"].items():
        meds = {k: statistics.median(v) for k, v in calls.items()}
        b07 = min(v for k, v in meds.items() if k.startswith("07 "))
        btr = min(v for k, v in meds.items() if k.startswith("transposed "))
        assert abs(btr / b07 - 1) < 0.1, n
    parts = tr["parts"]
    assert 0.8 < parts["transposed k3"]["split of B"] / parts["07 k3"]["split of B"] < 1.25
    assert parts["07 k1"]["split of B"] < parts["07 k2"]["split of B"] < parts["07 k3"]["split of B"]
    assert "PASS: fused/transposed_tf32x3" in (EXP / "fusion-tma" / tr["log"]).read_text()
    errors = _log_errors(tr)
    assert len(errors) == 9 and max(errors) < 2e-6  # each configuration timed, checked at full size


def test_operand_kernels_check_and_compile():
    """operand.py: register_operand.patch (against step 08: each tile transposed, the right operand loaded into registers) and
    inflight.patch (against step 08: two K tiles' wgmmas in flight) match float64 in the emulator, edges and NaN
    included; the no-loads diagnostic still finds its text; every kernel timed compiles for sm_90a with the
    wgmmas asynchronous and no spills (the in-flight patch: a few bytes with the H200's NVRTC)."""
    from gemmlab import nvrtc
    from gemmlab.runtime.source import assemble
    mod, _ = _tma_experiment("operand.py")
    assert _check_as_measured(mod.register_operand_kernel("cpu", BLOCK_M=32, SPLIT_K=3, NUM_STAGES=12), raise_on_fail=False).passed
    assert _check_as_measured(mod.register_operand_kernel("cpu", BLOCK_M=64, SPLIT_K=2, NUM_STAGES=4), raise_on_fail=False).passed
    assert _check_as_measured(mod.inflight_kernel("cpu", BLOCK_N=64, SPLIT_K=2, NUM_STAGES=4), raise_on_fail=False).passed
    no_loads = mod.steps.replaced(mod.register_operand_source(), mod.NO_LOADS, "register_operand.patch")
    assert "__ldg" not in no_loads
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    reg, inflight = mod.register_operand_step(), mod.steps.overlap_step()
    for p08, p_reg in mod.CONFIGS.values():
        for st, src, p in ((reg, mod.register_operand_source(), p_reg), (reg, no_loads, p_reg),
                           (inflight, mod.inflight_source(), p08)):
            res = nvrtc.compile(assemble(fusion.get("fused/08_tile_flags").file, src), st.name_expression(st.resolve(p)),
                                st.target("sm_90"), label="operand").resources
            spill_ok = 64 if st is inflight else 0  # the GPU's NVRTC spills 36-40 B of the patch's two fragment sets
            assert not res.wgmma_serialized and res.spill_stores <= spill_ok, (st.name, p, res)


def test_operand_claims():
    """Chapter 8, 'Two more suspects' (H200, one run, every kernel that computes E checked): with a K tile's
    shared-memory traffic cut from 44 to 24 KB and nothing added (no loads), step 08's call at 512 is under 1.5 us
    shorter; loading the right operand from global memory makes it slower than step 08 at every size; two K tiles'
    wgmmas in flight are no faster than step 08 anywhere, and less accurate."""
    mod, exp = _tma_experiment("operand.py")
    run = exp["operand"]["NVIDIA H200"]
    med = {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    assert sorted(med) == sorted(mod.CONFIGS) and all(len(v) == 3 for c in run["us"].values() for v in c.values())
    for n, m in med.items():
        p08, p_reg = mod.CONFIGS[n]
        t08, reg, inflight = m[mod.tag("08", p08)], m[mod.tag("register operand", p_reg)], m[mod.tag("inflight", p08)]
        no_loads = m[mod.tag("register operand no loads", p_reg)]
        assert reg > 1.2 * t08 and inflight > 0.99 * t08 and no_loads < t08, n
        assert t08 - no_loads < (1.5 if n == 512 else 0.06 * t08), n
    text = (EXP / "fusion-tma" / run["log"]).read_text()
    assert "check register operand: PASS" in text and "check inflight: PASS" in text
    errors = dict(re.findall(r"^config n=512 (\S+).*error ([\d.e+-]+)$", text, re.M))
    assert float(errors["inflight"]) > 2 * float(errors["08"])


def test_splitter_checks_and_compiles():
    """limits.py handover: splitter.patch (against step 08: a fourth warpgroup splits every K tile into a ring of its
    own) matches float64 in the emulator, edges and NaN included, with two and three consumer groups; its
    no-split diagnostic still finds its text; both compile for sm_90a with the wgmmas asynchronous and no spills.
    The hand-over variants of step 08 still find their text."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment("limits.py")
    for split_k in (3, 2):
        assert _check_as_measured(mod.splitter_kernel("cpu", BLOCK_N=32, SPLIT_K=split_k, NUM_STAGES=12), raise_on_fail=False).passed
    assert mod.SPLITTER_CALL not in mod.splitter_source(split=False)
    assert len(mod.handover_sources()) == len(mod.HANDOVER) + 3  # each substitution raises if 08 lost its text
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    for split in (True, False):
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=mod.splitter_source(split), **mod.TILES_512)
        assert not res.wgmma_serialized and res.spill_stores == 0, (split, res)


def test_fp16_claims():
    """Chapter 8, 'Would fp16's faster tensor pipe help?' (H200, one run): alone, the fp16 wgmmas run at about twice
    the TF32 ones' rate; in step 08 (as it is, without the split, with only the wgmmas) they move the call by under a
    microsecond, directly and from a graph, and make it slower without the split; the empty kernel takes as long as
    step 08 returning at once; and in this run a @ b @ c took much longer than in the hand-over run while step 08
    took about as long, so that the speed-up is over 3x here and under it there."""
    _, exp = _tma_experiment("limits.py")
    run = exp["fp16"]["NVIDIA H200"]
    m = {k: statistics.median(v) for k, v in run["us"]["512"].items()}
    assert all(len(v) == 3 for v in run["us"]["512"].values())
    assert 1.8 < run["fp16"]["32"]["3"]["fma_per_clock"] / run["n"]["32"]["3"]["fma_per_clock"] < 2.2
    for g in ("", " graph"):
        for v, tf32 in (("as it is", "08"), ("no split", "08 no split"), ("only the wgmmas", "08 only the wgmmas")):
            assert abs(m[f"08 {v} fp16{g}"] - m[tf32 + g]) < 1.0, (v, g)
        assert m["08 no split fp16" + g] > m["08 no split" + g], g
        assert abs(m["empty kernel" + g] - m["08 returns at once" + g]) < 0.3, g
    ho = {k: statistics.median(v) for k, v in exp["handover"]["NVIDIA H200"]["us"]["512"].items()}
    assert m["torch a@b@c"] > ho["torch a@b@c"] + 10 and abs(m["08"] - ho["08"]) < 3
    assert m["torch a@b@c"] / m["08"] > 3 > ho["torch a@b@c"] / ho["08"]


def test_ordered_variant_compiles():
    """limits.py ordered: step 08 with its groups taking turns at the tensor pipe has one wait (bar.sync) before each
    K tile's wgmmas and one arrival (bar.arrive) after them, each on barrier 11 + a K tile's index modulo SPLIT_K, and
    compiles for sm_90a with the wgmmas asynchronous and no spills at every tiling it was timed at; with the ring's
    marks too."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment("limits.py")
    src = mod.ordered_source()
    assert src.count('"bar.sync %0, %1;" :: "r"(11 + kt % SPLIT_K)') == 1
    assert src.count('"bar.arrive %0, %1;" :: "r"(11 + (kt + 1) % SPLIT_K)') == 1
    assert src.index("bar.sync %0") < src.index("WgmmaTf32<BLOCK_N>::mma(") < src.index("bar.arrive %0")
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    tilings = {cfg for configs in mod.ORDERED_CONFIGS.values() for cfg in configs}
    for marks in (False, True):
        for bn, sk, ns in sorted(tilings):
            if marks and (bn, sk, ns) != tuple(mod.TILES_512.values()):
                continue
            res = fusion.resources("fused/08_tile_flags", "sm_90", source=mod.ordered_source(marks),
                                   BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            assert not res.wgmma_serialized and res.spill_stores == 0, (marks, bn, sk, ns, res)


def test_ordered_claims():
    """results/experiments/fusion-tma, 'Do step 08's consumer groups get in each other's way?' and chapter 8 (H200,
    one run, every kernel checked): in step 08 consecutive groups start their split a third of a group's K tile apart;
    taking turns makes the split shorter, the wgmmas' part (with the wait for the turn) and the K tile longer, and the
    call no faster at 512 and 2048 with 08's tiles (at 1024 within half a microsecond), slower with two or four groups;
    a K tile's parts add up to about 0.16 us less than its period."""
    _, exp = _tma_experiment("limits.py")
    run = exp["ordered"]["NVIDIA H200"]
    (lag, period), (_, period_o) = run["stagger"]["08"], run["stagger"]["ordered"]
    assert abs(lag - period / 3) < 0.02 and period_o > period
    p08, pord = run["parts"]["08"], run["parts"]["ordered"]
    assert pord["split of B"] < p08["split of B"] and pord["wgmmas issued"] > p08["wgmmas issued"]
    assert abs(period - p08["tile, in all"] - 0.16) < 0.02
    m = {n: {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    assert all(len(v) == 3 for calls in run["us"].values() for v in calls.values())
    change = {(n, tag): m[n]["ordered " + tag] - m[n]["08 " + tag] for n in m for tag in
              (k[len("08 "):] for k in m[n] if k.startswith("08 ") and not k.endswith(" graph"))}
    assert [round(change[k], 1) for k in (("512", "n32 k3 s12"), ("512", "n32 k2 s12"), ("512", "n32 k4 s12"),
                                          ("1024", "n64 k2 s8"))] == [0.2, 0.4, 1.1, -0.4]
    at_2048 = change["2048", "n64 k2 s8"]
    assert round(at_2048) == 7 and round(100 * at_2048 / m["2048"]["08 n64 k2 s8"], 1) == 1.7
    assert change["1024", "n32 k3 s8"] > 0


def test_marks_claims():
    """results/experiments/fusion-tma, 'Where a K tile's time goes with one thing taken out', and chapter 8 (H200, one
    run, step 08 checked): the marked variants are step 08 and three of the timed-only ones; without the copies the
    parts of a K tile take as long, the groups' splits start less than half as far apart and a K tile is longer; with
    only the wgmmas they start within the timer's step; the gap between a K tile's parts and its period is 0.16 to
    0.22 us in every variant; and step 08's figures agree with the ordered run's."""
    mod, exp = _tma_experiment("limits.py")
    assert mod.MARKED_VARIANTS == ("08", "no copies", "no split", "only the wgmmas")
    for name in mod.MARKED_VARIANTS:
        src = mod.variant_source(name, marks=True)
        assert src.count("RING(") == 8 and ("tma_load_2d(stages" in src) == (name not in ("no copies", "only the wgmmas"))
    run = exp["marks"]["NVIDIA H200"]
    parts, stagger = run["parts"], run["stagger"]
    assert sorted(parts) == sorted(stagger) == sorted(mod.MARKED_VARIANTS)
    assert parts["no copies"]["tile, in all"] == parts["08"]["tile, in all"]
    assert stagger["no copies"][0] < stagger["08"][0] / 2 and stagger["no copies"][1] > stagger["08"][1]
    assert stagger["only the wgmmas"][0] <= 0.032
    assert [round(stagger[v][1] - parts[v]["tile, in all"], 2) for v in mod.MARKED_VARIANTS] == [0.16, 0.19, 0.22, 0.16]
    ordered = exp["ordered"]["NVIDIA H200"]
    assert parts["08"] == ordered["parts"]["08"] and stagger["08"] == ordered["stagger"]["08"]



def test_waits_variants_compile():
    """limits.py waits: the marks and the variants find their text; no ring leaves no mbarrier wait or arrival in the K
    loops; the producer sleeps before its wait for a free stage; every source compiles for sm_90a with no spills and
    the wgmmas asynchronous."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment("limits.py")
    sources = {name: mod.variant_source(name, waits=True) for name in mod.WAITED_VARIANTS}
    for name, src in sources.items():
        assert src.count("RING(") == 9 and src.count("FETCH(") == 4, name
    no_ring = sources["only the wgmmas, no ring"]
    assert "mbarrier_wait(" not in no_ring.split("__global__")[0] and "mbarrier_arrive(" not in no_ring
    sources.update({f"sleeps {ns}": mod.slowed_source(ns, waits) for ns in mod.SLOWED_NS for waits in (False, True)})
    slept = sources["sleeps 50"]
    assert slept.index("__nanosleep(50);") < slept.index("mbarrier_wait(&empty[stage]") < slept.index(
        "tma_load_2d(stages")
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    for name, src in sources.items():
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **mod.TILES_512)
        assert not res.wgmma_serialized and res.spill_stores == 0, (name, res)


def test_waits_claims():
    """results/experiments/fusion-tma, 'Where the gap in each K tile goes', and chapter 8 (H200, one run, step 08 and
    its slowed producer checked): the end of the wgmmas to the loop's top and the full wait make up the 0.16 us gap;
    the wait reads 0.064 us without copies although the producer arrived 0.7 us or more before, 0.032 with no wait at
    all; no ring saves 1.06 / 0.90 us; in step 08's phase 2 the copies go out 0.096 us before the consumer comes and
    land 0.224 after; the producer's K tile is about the consumers' (a group's over three); a sleeping producer is
    overtaken and the call grows 0.9, 1.0 and 1.7 us; and these marks lengthen a K tile against the ring's alone."""
    mod, exp = _tma_experiment("limits.py")
    run = exp["waits"]["NVIDIA H200"]
    w = run["waits"]
    assert sorted(w) == sorted(list(mod.WAITED_VARIANTS) + [f"producer sleeps {ns}" for ns in mod.SLOWED_NS])
    top, wait = w["08"]["wgmmas done to the loop's top"], w["08"]["wait for a full stage"]
    gap = exp["marks"]["NVIDIA H200"]["stagger"]["08"][1] - exp["marks"]["NVIDIA H200"]["parts"]["08"]["tile, in all"]
    assert round(top[0] + wait[0], 3) == round(gap, 3) == 0.16
    assert [top[0], top[2], wait[0], wait[2], wait[3]] == [0.096, 0.064, 0.064, 0.096, 0.148]
    assert w["08"]["share of K tiles that wait 64 ns or more"][1::2] == [0.764, 0.951]
    nc = w["no copies"]
    assert nc["wait for a full stage"][::2] == [0.064, 0.064]
    assert min(nc["copies issued before the consumer came"][::2]) > 0.7
    assert w["only the wgmmas, no ring"]["wait for a full stage"][::2] == [0.032, 0.032]
    m = {k: statistics.median(v) for k, v in run["us"]["512"].items()}
    assert all(len(v) == 3 for v in run["us"]["512"].values())
    ring = [m["08 only the wgmmas, no hand-over" + g] - m["08 only the wgmmas, no ring" + g] for g in ("", " graph")]
    assert [round(x, 2) for x in ring] == [1.06, 0.90]
    phase_2 = [w["08"][k][2] for k in ("copies issued before the consumer came",
                                       "copies issued to the consumer past its wait")]
    assert phase_2 == [0.096, 0.224]
    group = w["08"]["a group's K tile, one to the next"]
    producer = w["08"]["producer, one K tile to the next"]
    assert [producer[1], producer[3], w["08"]["producer's issue"][0]] == [0.262, 0.278, 0.16]
    assert abs(producer[1] - group[1] / 3) < 0.01 and abs(producer[3] - group[3] / 3) < 0.01
    slept = [w[f"producer sleeps {ns}"] for ns in mod.SLOWED_NS]
    assert all(s["copies issued before the consumer came"][0] < -0.2 for s in slept)
    assert [round(m[f"producer sleeps {ns}"] - m["08"], 1) for ns in mod.SLOWED_NS] == [0.9, 1.0, 1.7]
    assert group[0] == 0.8 > exp["marks"]["NVIDIA H200"]["stagger"]["08"][1] == 0.768
    assert nc["producer, one K tile to the next"][0] == 0.16 and round(m["08"] - m["08 no copies"], 1) == 1.3


def test_producers_variant():
    """limits.py producers: step 08 with a producer warp per operand expects two arrivals a stage, waits for T only
    in the left operand's fetcher, computes E on the emulator (structured, off-grid and NaN shapes), and compiles for
    sm_90a at 08's tiles for 512 and 2048 with no spills and the wgmmas asynchronous."""
    from gemmlab import nvrtc
    mod, _ = _tma_experiment("limits.py")
    k = mod.producers_kernel("cpu", **mod.TILES_512)
    assert "mbarrier_init(&full[s], 2)" in k.source and "threadIdx.x < SPLIT_K * 128 + 32) {" in k.source
    assert k.step.threads(k.params) == 3 * 128 + 64
    assert _check_as_measured(k).passed
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here: the compile-only half of this test did not run")
    for tiles in (mod.TILES_512, mod.TILES_2048):
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=mod.producers_kernel("cpu", **tiles).source, **tiles)
        assert not res.wgmma_serialized and res.spill_stores == 0, (tiles, res)


def test_producers_claims():
    """results/experiments/fusion-tma, 'A producer warp per operand', and chapter 8 (H200, one run, every kernel
    checked): the ring's marks are step 08's; the call moves by 0.0 / -0.3 us at 512, +0.5 / +0.4 and +1.2 / +0.9 us
    at 1024, +1.4% at 2048 and +1.7% at 4096."""
    _, exp = _tma_experiment("limits.py")
    run = exp["producers"]["NVIDIA H200"]
    assert run["parts"]["producers"] == run["parts"]["08"] and run["stagger"]["producers"] == run["stagger"]["08"]
    assert run["stagger"]["08"] == [0.256, 0.768]
    assert all(len(v) == 3 for calls in run["us"].values() for v in calls.values())
    m = {n: {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    two = lambda n, tag, g="": m[n]["producers " + tag + g] - m[n]["08 " + tag + g]  # noqa: E731
    assert [round(two(n, tag, g), 1) for n, tag in (("512", "n32 k3 s12"), ("1024", "n64 k2 s8"), ("1024", "n32 k3 s8"))
            for g in ("", " graph")] == [0.0, -0.3, 0.5, 0.4, 1.2, 0.9]
    assert [round(100 * two(n, "n64 k2 s8") / m[n]["08 n64 k2 s8"], 1) for n in ("2048", "4096")] == [1.4, 1.7]


def test_early_variant_and_claims():
    """limits.py early: a group's first K tile waits at the loop's top, the others after the previous K tile's wgmmas
    are committed; it computes E on the emulator and compiles for sm_90a with no spills and the wgmmas asynchronous.
    'Waiting for the next stage while the wgmmas run' (H200, one run, every kernel checked): the wgmmas' end and the K
    tile grow, and the call moves by +0.2 / +0.3 us at 512, +0.4 / +0.5 and -0.3 / -0.4 us at 1024, +0.4% at 2048
    and 4096."""
    from gemmlab import nvrtc
    mod, exp = _tma_experiment("limits.py")
    src = mod.steps.substituted("fused/08_tile_flags", mod.EARLY)
    assert src.index("if (kt == group) mbarrier_wait(&full[stage]") < src.index("wgmma_commit();") < src.index(
        "mbarrier_wait(&full[(ring_pos + SPLIT_K) % NUM_STAGES]") < src.index("wgmma_wait<0>();")
    assert _check_as_measured(fusion.step("fused/08_tile_flags", backend="cpu", source=src, **mod.TILES_512)).passed
    if nvrtc.available():
        res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **mod.TILES_512)
        assert not res.wgmma_serialized and res.spill_stores == 0, res
    run = exp["early"]["NVIDIA H200"]
    assert run["stagger"]["08"] == [0.256, 0.768] and run["stagger"]["early"][1] == 0.832
    assert [run["parts"][v]["wgmmas done"] for v in ("08", "early")] == [0.032, 0.128]
    assert all(len(v) == 3 for calls in run["us"].values() for v in calls.values())
    m = {n: {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    moved = lambda n, tag, g="": m[n]["early " + tag + g] - m[n]["08 " + tag + g]  # noqa: E731
    assert [round(moved(n, tag, g), 1) for n, tag in (("512", "n32 k3 s12"), ("1024", "n64 k2 s8"), ("1024", "n32 k3 s8"))
            for g in ("", " graph")] == [0.2, 0.3, 0.4, 0.5, -0.3, -0.4]
    assert [round(100 * moved(n, "n64 k2 s8") / m[n]["08 n64 k2 s8"], 1) for n in ("2048", "4096")] == [0.4, 0.4]
    assert m["1024"]["early n32 k3 s8"] - m["1024"]["08 n64 k2 s8"] > 15

def test_wide_variants_and_claims():
    """limits.py wide: phase 1 alone keeps phase 1's call and drops phase 2's; the wide tiles compile for sm_90a with
    the wgmmas asynchronous, and only SPLIT_K 3 at 64 columns spills. 'Wider tiles over half the K tiles' (H200, one
    run, phase 1 checked): BLOCK_N 64 over half the K tiles takes 0.6 / 0.6 us off phase 1, as much without the
    split, 0.2 / 0.3 us with only the wgmmas; SPLIT_K 3 is 2.7 us slower; twice the saving leaves step 08's lane
    call above 3x's."""
    from gemmlab import nvrtc
    mod, exp = _tma_experiment("limits.py")
    for name in mod.WIDE_VARIANTS:
        src, no_split = mod.phase1_source(name), name != "08" and mod.VARIANTS[name][1]
        assert mod.PHASE_1 in src and mod.PHASE_2 not in src and (mod.steps.SPLIT_LOOP_START in src) != no_split
    if nvrtc.available():
        for label, _, (bn, split_k, stages) in mod.WIDE_CONFIGS:
            res = fusion.resources("fused/08_tile_flags", "sm_90", source=mod.phase1_source("08"), BLOCK_N=bn,
                                   SPLIT_K=split_k, NUM_STAGES=stages)
            assert not res.wgmma_serialized and (res.spill_stores > 0) == (bn == 64 and split_k == 3), (label, res)
    run = exp["wide"]["NVIDIA H200"]
    assert all(len(v) == 3 for v in run["us"]["512"].values())
    m = {k: statistics.median(v) for k, v in run["us"]["512"].items()}
    saved = lambda what="", g="": (m[f"phase 1 K512 n32 k3 s12{what}{g}"]  # noqa: E731
                                   - m[f"phase 1 K256 n64 k2 s8{what}{g}"])
    assert [round(saved(w, g), 1) for w in ("", " no split", " only the wgmmas") for g in ("", " graph")] == [
        0.6, 0.6, 0.6, 0.6, 0.2, 0.3]
    assert round(m["phase 1 K256 n64 k3 s8"] - m["phase 1 K512 n32 k3 s12"], 1) == 2.7
    recs = fusion.load("NVIDIA H200")
    lane = fusion.baseline(recs, 512)["median_s"] * 1e6
    call = fusion.lookup(recs, "fused/08_tile_flags", 512)["median_s"] * 1e6
    assert call - 2 * saved() > lane / 3  # the benchmark run's step 08 against that run's a @ b @ c
    limits = {k: statistics.median(v) for k, v in exp["limits"]["NVIDIA H200"]["us"]["512"].items()}
    assert limits["08"] - 2 * saved() > limits["torch a@b@c"] / 3  # the limits run's call against its own a @ b @ c
    text = (EXP / "fusion-tma" / run["log"]).read_text()
    errors = [float(e) for e in re.findall(r"error of T ([\d.e+-]+)$", text, re.M)]
    assert len(errors) == len(mod.WIDE_CONFIGS) and max(errors) < 1e-6


def test_stalls_claims():
    """results/experiments/fusion-tma, 'Where step 08's warps wait at 512' (one sampled launch on an H200): the
    consumers' waits for a full stage and barrier 9 (the groups' uneven share of K tiles) are the two largest named
    places, each between a tenth and a fifth of the samples, the split and the rest still the most; with only the
    wgmmas left their issue and wait take more and barrier 9 as much."""
    mod, _ = _tma_experiment("stalls.py")
    shares = {}
    for name in ("08", "only-the-wgmmas"):
        rows = mod.rows_of(EXP / "fusion-tma" / f"ncu-src-{name}-nvidia-h200-2026-11-25.csv.gz")
        reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
        total = sum(mod.number(r[mod.SAMPLES]) for r in rows)
        places = collections.Counter()
        for i in range(len(rows)):
            places.update(mod.places(rows, i, reasons))
        assert 0.9 * total < sum(places.values()) <= total and total > 1000  # a few samples have no reason column
        shares[name] = {k: v / total for k, v in places.items()}
    s08, only = shares["08"], shares["only-the-wgmmas"]
    named = sorted((v, k) for k, v in s08.items() if not k.startswith("the rest"))
    assert {k for _, k in named[-2:]} == {"consumers wait for a full stage", "groups hand over their sums (barrier 9)"}
    assert all(0.1 < v < 0.2 for v, _ in named[-2:]) and s08["the rest (split, addresses, epilogue, producer)"] > 0.4
    for k in ("wgmmas issued", "wait for the wgmmas"):
        assert only[k] > s08[k], k
    assert abs(only["groups hand over their sums (barrier 9)"] - s08["groups hand over their sums (barrier 9)"]) < 0.02


def test_handover_claims():
    """Chapter 8, 'Where the call goes, phase by phase' (H200, one run, step 08 and the splitter checked): at 512
    leaving out the wait for T moves step 08's call by under a microsecond either way; each phase alone takes most
    of the body; taking the split out saves more than a microsecond, and out of either phase alone less than that;
    the splitter warpgroup is slower than step 08 with two and with three consumer groups, and about as fast as step
    08 once its split is taken out."""
    _, exp = _tma_experiment("limits.py")
    run = exp["handover"]["NVIDIA H200"]
    m = {k: statistics.median(v) for k, v in run["us"]["512"].items()}
    assert all(len(v) == 3 for v in run["us"]["512"].values())
    for g in ("", " graph"):
        floor, body = m["08 returns at once" + g], m["08" + g] - m["08 returns at once" + g]
        assert abs(m["08" + g] - m["08 no wait" + g]) < 1.0, g
        assert all(0.4 * body < m[f"08 phase {p} alone{g}"] - floor < 0.6 * body for p in (1, 2)), g
        assert m["08" + g] - m["08 no split" + g] > 1.0 and m["08 only the wgmmas" + g] < m["08 no split" + g], g
        assert all(0.3 < m["08" + g] - m[f"08 no split in phase {p}{g}"] < m["08" + g] - m["08 no split" + g] for p in (1, 2)), g
        assert m["splitter k3" + g] > m["splitter k2" + g] > m["08" + g] + 1.0, g
        assert abs(m["splitter k3 no split" + g] - m["08" + g]) < 1.0, g
    text = (EXP / "fusion-tma" / run["log"]).read_text()
    assert "splitter: PASS" in text and re.search(r"^n=512 splitter k2: .*error [\d.]+e-07$", text, re.M)


def test_presplit_variants_and_claims():
    """limits.py presplit: presplit.patch (B and C split once, up front, into K-major copies that TMA brings) matches
    float64 on the emulator, edges and NaN included, with C split and with B and C; its diagnostics still find their
    text, the checked ones pass and the ones that read copies nobody wrote fail; all compile for sm_90a with the wgmmas
    asynchronous and no spills, the marked ones too. 'Splitting B and C once, up front' (H200, one run, every kernel
    checked): the same kernel on step 08's path is within 0.3 us of step 08 with its stages; reading C split saves
    0.3 us over splitting it in the loop, less than phase 2 without its split in `handover`, and neither the right
    operand's bytes twice over nor an early release make up the difference; the split up front costs 2.4 us (the
    median block ends it 3.1 us after the first block starts, and phase 1 ends 2.7 us later than step 08's); the
    patch is 2.5 us slower at 512 (5.9 with B split too), +9.7% at 1024, and within 1% at 2048 and 4096."""
    from gemmlab import nvrtc
    mod, exp = _tma_experiment("limits.py")
    tiles = {**mod.TILES_512, "NUM_STAGES": 11}
    for split_b in (False, True):
        assert _check_as_measured(mod.presplit_kernel("cpu", split_b, **tiles), raise_on_fail=False).passed
    for label, subs, checked in mod.PRESPLIT_VARIANTS:
        src = mod.steps.replaced(mod.presplit_source(), subs, "presplit.patch")
        assert _check_as_measured(mod.presplit_kernel("cpu", source=src, **tiles), raise_on_fail=False).passed == checked, label
        if nvrtc.available():
            res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **tiles)
            assert not res.wgmma_serialized and res.spill_stores == 0, (label, res)
    marked = [mod.steps.replaced(mod.presplit_source(), mod.PRESPLIT_MARKS + subs, "presplit.patch")
              for subs in ([], mod.NOT_READ, mod.NOT_READ + mod.NOT_SPLIT)]
    marked.append(mod.steps.substituted("fused/08_tile_flags", mod.STEP_08_MARKS))
    assert all("MARK(0);" in src and "MARK(3);" in src for src in marked)
    if nvrtc.available():
        for src in marked:
            assert fusion.resources("fused/08_tile_flags", "sm_90", source=src, **tiles).spill_stores == 0
    run = exp["presplit"]["NVIDIA H200"]
    assert all(len(v) == 3 for calls in run["us"].values() for v in calls.values())
    m = {n: {k: statistics.median(v) for k, v in calls.items()} for n, calls in run["us"].items()}
    at = lambda v, ref="presplit raw": m["512"][v] - m["512"][ref]  # noqa: E731
    assert round(at("presplit raw", "08 s11"), 1) == 0.3 and round(at("presplit read, unsplit"), 1) == -0.3
    no_split_p2 = statistics.median(exp["handover"]["NVIDIA H200"]["us"]["512"]["08"]) - statistics.median(
        exp["handover"]["NVIDIA H200"]["us"]["512"]["08 no split in phase 2"])
    gap = no_split_p2 + at("presplit read, unsplit")  # what reading split tiles fails to save
    extra = at("presplit raw, twice the bytes")
    early = m["512"]["presplit read, unsplit, released early"] - m["512"]["presplit read, unsplit"]
    assert gap > 0.5 and abs(extra) < gap / 2 and abs(early) < gap / 2
    assert round(at("presplit split, unread"), 1) == 2.4
    assert [round(at(v, "08 s11"), 1) for v in ("presplit", "presplit B and C")] == [2.5, 5.9]
    moved = {n: 100 * (m[n]["presplit n64 k2 s6"] / m[n]["08 n64 k2 s6"] - 1) for n in ("1024", "2048", "4096")}
    assert round(moved["1024"], 1) == 9.7 and all(abs(moved[n]) < 1 for n in ("2048", "4096"))
    marks = run["marks"]
    assert marks["as it is"]["split done"][1] == 3.1
    assert round(marks["as it is"]["phase 1 done"][1] - marks["08"]["phase 1 done"][1], 1) == 2.7
    assert abs(marks["raw"]["end"][1] - marks["08"]["end"][1]) < 0.5
    text = (EXP / "fusion-tma" / run["log"]).read_text()
    assert text.count(": PASS: fused/08_tile_flags") == 4
    errors = [float(e) for e in re.findall(r"error ([\d.]+e[+-]\d+)", text)]  # 7 calls at 512, 2 per larger config
    assert len(errors) == 7 + 2 * 4 and max(errors) < 1e-6


def test_readsplit_marks_and_claims():
    """limits.py readsplit (8b, 'Why reading split tiles saves so little'): its marks still find their text in
    presplit.patch's source on both paths and in step 08, and compile for sm_90a with the wgmmas asynchronous and no
    spills. The record (H200, one run, the checked kernels within fp32 error): without phase 2's split a consumer
    group's own work on a K tile is at most two thirds of the split's and it waits longer for a full stage; three times
    the producer's K tile period is within 6% of a group's period in every kernel; the read path's producer issues and
    delivers its K tiles more slowly than step 08's without the split, its phase 2 K loops take longer and its call
    saves less; phase 1, the control, is within 0.2 us everywhere. The README's table is the record's."""
    from gemmlab import nvrtc
    mod, exp = _tma_experiment("limits.py")
    sources = [mod.readsplit_source(subs) for _, subs, _ in mod.READSPLIT_VARIANTS]
    sources += [mod.variant_source("08", waits=True, extra=extra) for extra in ([], mod.NO_SPLIT_P2)]
    assert all(all(f"RING({i});" in src for i in range(8)) and "FETCH(2);" in src for src in sources)
    if nvrtc.available():
        for src, stages in zip(sources, [11] * 3 + [12] * 2):
            res = fusion.resources("fused/08_tile_flags", "sm_90", source=src, **{**mod.TILES_512, "NUM_STAGES": stages})
            assert not res.wgmma_serialized and res.spill_stores == 0, res
    run = exp["readsplit"]["NVIDIA H200"]
    waits, parts = run["waits"], run["parts"]
    p2 = lambda v, what: waits[v][what][3]  # noqa: E731
    own = lambda v: parts[f"{v} phase 2"]["tile, in all"]  # noqa: E731
    lean, split = ("read, unsplit", "08, no split in phase 2"), ("raw", "08")
    assert max(own(v) for v in lean) <= 2 / 3 * min(own(v) for v in split)
    assert min(p2(v, "wait for a full stage") for v in lean) > max(p2(v, "wait for a full stage") for v in split)
    for v in waits:
        period, fetch = p2(v, "a group's K tile, one to the next"), p2(v, "producer, one K tile to the next")
        assert abs(3 * fetch / period - 1) < 0.06, v
    read, nosplit = "read, unsplit", "08, no split in phase 2"
    for what in ("producer's issue", "producer, one K tile to the next", "K loops, first full stage to last wgmmas"):
        assert p2(read, what) > p2(nosplit, what), what
    assert p2(read, "a group's K tile, one to the next") >= p2("raw", "a group's K tile, one to the next")
    p1 = [waits[v]["K loops, first full stage to last wgmmas"][1] for v in ("08", nosplit, "raw", read)]
    assert max(p1) - min(p1) < 0.2
    m = {k: statistics.median(v) for k, v in run["us"]["512"].items()}
    saved_read, saved_nosplit = m["presplit raw"] - m["presplit read, unsplit"], m["08"] - m["08 no split in phase 2"]
    assert saved_nosplit > 0.5 and saved_read < saved_nosplit / 2
    text = (EXP / "fusion-tma" / run["log"]).read_text()
    errors = [float(e) for e in re.findall(r"error ([\d.]+e[+-]\d+)", text)]  # 3 marked kernels (2 phases each), 3 calls
    assert len(errors) == 3 * 2 + 3 and max(errors) < 1e-6
    # the README's table, row by row, against the record
    readme = (LAB / "fusion-tma" / "README.md").read_text()
    table = readme[readme.index("## Why reading split tiles saves so little"):]
    cols = ("08", nosplit, "raw", read)
    calls = ("08", "08 no split in phase 2", "presplit raw", "presplit read, unsplit")
    want = {"a group's own work on a K tile": [(own(v), 3) for v in cols],
            "its wait for a full stage": [(p2(v, "wait for a full stage"), 3) for v in cols],
            "a group's K tile, one to the next": [(p2(v, "a group's K tile, one to the next"), 3) for v in cols],
            "the producer's issue of a K tile": [(p2(v, "producer's issue"), 3) for v in cols],
            "the producer, one K tile to the next": [(p2(v, "producer, one K tile to the next"), 3) for v in cols],
            "K loops, first full stage to last `wgmma`s":
                [(p2(v, "K loops, first full stage to last wgmmas"), 2) for v in cols],
            "the call, direct (median of three rounds)": [(m[c], 2) for c in calls]}
    for row, values in want.items():
        cells = re.search(rf"^\| {re.escape(row)} \|(.+)\|$", table, re.M).group(1).split("|")
        assert [c.strip() for c in cells] == [f"{x:.{d}f}" for x, d in values], row


def test_a_hunk_that_moved_is_found_at_an_offset():
    """Lines added above a hunk move it: the patch still applies there (GNU patch's offset), and a hunk whose
    lines changed still does not."""
    text = "".join(f"line {i}\n" for i in range(20))
    patch = "--- a/f\n+++ b/f\n@@ -5,3 +5,3 @@\n line 4\n-line 5\n+LINE 5\n line 6\n@@ -15,2 +15,2 @@\n-line 14\n+LINE 14\n line 15\n"
    moved = "new\nnew\n" + text
    assert experiments.apply_patch(moved, patch) == moved.replace("line 5\n", "LINE 5\n").replace("line 14\n", "LINE 14\n")
    with pytest.raises(ValueError, match="has changed"):
        experiments.apply_patch(moved.replace("line 6\n", "line six\n"), patch)
