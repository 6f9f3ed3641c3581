"""Chapter 8: the fused A x B x C steps against float64 on the CPU emulator, bad inputs, records, the command line."""
import json
import re

import numpy as np
import pytest

import gemmlab
from gemmlab import bench, fusion, gpu, registry
from lab import experiments
from gemmlab.measure import results
from gemmlab.runtime import backends
from gemmlab.__main__ import main as cli
from gemmlab.runtime.source import kernel_path
from gemmlab.errors import ConfigError, InputError, ShapeError, VerificationError

STEPS = [s.name for s in fusion.FUSED_STEPS]


@pytest.fixture(scope="module")
def kernels():
    return {name: fusion.step(name, backend="cpu") for name in STEPS}


def _inputs(m, k, l, n, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, s).astype(np.float32) for s in ((m, k), (k, l), (l, n)))


def _assert_matches(kern, a, b, c):
    bad, _ = fusion.compare(np.asarray(kern(a, b, c)), a, b, c)
    assert not bad.any(), f"{kern.label}: {int(bad.sum())} elements off the float64 reference"


@pytest.mark.parametrize("name", STEPS)
def test_check_default_cases(kernels, name):
    report = fusion.check(kernels[name])
    assert report.passed
    assert str(report).startswith(f"PASS: {name} matches the float64 reference on 6 shapes")
    assert any(c.kind == "identity" for c in report.cases[:1]), "structured inputs come first"


@pytest.mark.parametrize("name", STEPS)
@pytest.mark.parametrize("n", [17, 64, 100])
def test_square_sizes_off_the_tile(kernels, name, n):
    _assert_matches(kernels[name], *_inputs(*fusion.get(name).fit((n, n, n, n)), seed=n))  # 07: K, L, N to 4s


@pytest.mark.parametrize("name, params", [
    ("fused/02_row_panel", {"PANEL_M": 4, "BLOCK_N": 32, "BLOCK_K": 8, "THREAD_M": 1, "THREAD_N": 2}),
    ("fused/03_two_phase", {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 8, "THREAD_M": 4, "THREAD_N": 4}),
    ("fused/03_two_phase", {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32, "THREAD_M": 4, "THREAD_N": 8}),
    ("fused/04_split_k", {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 8, "SPLIT_K": 3}),  # rounds past the last K tile
    ("fused/04_split_k", {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16, "THREAD_M": 8, "SPLIT_K": 2}),
    ("fused/05_tf32x3", {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 8, "WARP_N": 8, "SPLIT_K": 3}),  # rounds past the end
    ("fused/05_tf32x3", {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16, "WARP_M": 32, "WARP_N": 16, "SPLIT_K": 1,
                         "NUM_STAGES": 4}),
    ("fused/05_tf32x3", {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "WARP_M": 32, "WARP_N": 32, "NUM_STAGES": 3}),
    ("fused/06_wgmma_tf32x3", {"BLOCK_N": 64, "SPLIT_K": 3, "NUM_STAGES": 2}),  # rounds past the last K tile
    ("fused/06_wgmma_tf32x3", {"BLOCK_N": 32, "SPLIT_K": 1, "NUM_STAGES": 4}),
    ("fused/07_tma_tf32x3", {"BLOCK_N": 64, "SPLIT_K": 3, "NUM_STAGES": 3}),  # a group with one K tile fewer
    ("fused/07_tma_tf32x3", {"BLOCK_N": 32, "SPLIT_K": 1, "NUM_STAGES": 2}),  # the ring wraps within a tile
    ("fused/07_tma_tf32x3", {"BLOCK_N": 32, "SPLIT_K": 2, "NUM_STAGES": 12}),
    ("fused/08_tile_flags", {"BLOCK_N": 64, "SPLIT_K": 3, "NUM_STAGES": 3}),  # a tile of T spans 2 K tiles
    ("fused/08_tile_flags", {"BLOCK_N": 32, "SPLIT_K": 1, "NUM_STAGES": 2}),
])
def test_other_tiles_and_rectangular_shapes(name, params):
    kern = fusion.step(name, backend="cpu", **params)
    for dims in [(130, 64, 33, 70), (5, 7, 9, 3), (70, 200, 96, 40)]:
        dims = kern.step.fit(dims)
        _assert_matches(kern, *_inputs(*dims, seed=sum(dims)))


@pytest.mark.parametrize("name", STEPS)
def test_nan_propagates(kernels, name):
    a, b, c = _inputs(40, 24, 36, 20)  # K, L, N multiples of 4: every step takes it
    a[7, 3] = np.nan
    c[5, 11] = np.nan  # T's column 5 is finite, so E's column 11 becomes NaN
    e = np.asarray(kernels[name](a, b, c))
    assert np.isnan(e[7]).all(), "a NaN in row 7 of A must fill row 7 of E"
    assert np.isnan(e[:, 11]).all(), "a NaN in column 11 of C must fill column 11 of E"
    rest = np.delete(np.delete(e, 7, axis=0), 11, axis=1)
    assert np.isfinite(rest).all(), "NaN must not leak into other rows or columns"
    bad, _ = fusion.compare(e, a, b, c)
    assert not bad.any()


def test_compare_rejects_nan_and_wrong_values():
    a, b, c = _inputs(8, 8, 8, 8)
    want = fusion.reference(a, b, c).astype(np.float32)
    assert not fusion.compare(want, a, b, c)[0].any()
    for broken in (np.where(np.eye(8, dtype=bool), np.nan, want), want * 1.001, want.T):
        assert fusion.compare(broken.astype(np.float32), a, b, c)[0].any()


def test_a_broken_kernel_fails_the_check():
    src = kernel_path(fusion.get("fused/03_two_phase").file).read_text()
    broken = src.replace("acc[m][n] += a[m] * b[n];", "acc[m][n] += a[m] * b[n] * 1.001f;", 1)
    assert broken != src
    kern = fusion.step("fused/03_two_phase", backend="cpu", source=broken)
    with pytest.raises(VerificationError, match=r"FAIL: fused/03_two_phase on the identity input"):
        fusion.check(kern)


@pytest.mark.parametrize("name", STEPS)
def test_bad_inputs_then_a_good_call(kernels, name):
    kern = kernels[name]
    a, b, c = _inputs(*kern.step.fit((9, 10, 11, 12)))
    bad_calls = [
        ((a.astype(np.float64), b, c), InputError, "float32"),
        ((a, b[:5], c), InputError, "do not chain"),
        ((a, b, np.ascontiguousarray(c[:5])), InputError, "do not chain"),
        ((a, b, np.asfortranarray(c)), InputError, "C-contiguous"),
        ((a, b.ravel(), c), InputError, "2-D"),
        ((a, b, [[1.0]]), InputError, "NumPy or CuPy array"),
    ]
    for args, error, text in bad_calls:
        with pytest.raises(error, match=text):
            kern(*args)
    _assert_matches(kern, a, b, c)


def test_empty_inner_dimension_gives_zeros(kernels):
    a, b, c = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), np.ones((4, 5), np.float32)
    assert (kernels["fused/03_two_phase"](a, b, c) == 0).all()


def test_naive_rejects_a_row_that_does_not_fit(kernels):
    kern = kernels["fused/01_naive_row"]
    a, b, c = np.ones((1, 1), np.float32), np.ones((1, 12289), np.float32), np.ones((12289, 1), np.float32)
    with pytest.raises(ShapeError, match=r"L <= 12288"):
        kern(a, b, c)
    _assert_matches(kern, *_inputs(3, 3, 3, 3))


def test_panel_rejects_a_panel_that_does_not_fit():
    kern = fusion.step("fused/02_row_panel", backend="cpu", PANEL_M=32, THREAD_M=4)
    a, b, c = np.ones((2, 2), np.float32), np.ones((2, 4096), np.float32), np.ones((4096, 2), np.float32)
    with pytest.raises(ShapeError, match=r"smaller PANEL_M, or step 03"):
        kern(a, b, c)


@pytest.mark.parametrize("name, params, text", [
    ("fused/01_naive_row", {"THREADS": 48}, "whole number of warps"),
    ("fused/02_row_panel", {"PANEL_M": 2, "THREAD_M": 4}, "THREAD_M=4 must divide PANEL_M=2"),
    ("fused/02_row_panel", {"PANEL_M": 32, "THREAD_M": 1, "BLOCK_N": 256, "THREAD_N": 1}, "exceeds the hardware limit"),
    ("fused/03_two_phase", {"THREAD_M": 6}, "multiple of 4"),
    ("fused/04_split_k", {"BLOCK_M": 128, "BLOCK_N": 128, "SPLIT_K": 8}, "1024"),
    ("fused/04_split_k", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 8}, "48 KB"),
    ("fused/03_two_phase", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, "48 KB"),
    ("fused/03_two_phase", {"BLOCK_M": 128, "BLOCK_N": 128, "THREAD_M": 16, "THREAD_N": 16}, "accumulators"),
    ("fused/03_two_phase", {"PANEL_M": 8}, "no template parameter"),
    ("fused/05_tf32x3", {"WARP_M": 24}, "multiple of 16"),
    ("fused/05_tf32x3", {"BLOCK_M": 32, "WARP_M": 64}, "whole warp tiles"),
    ("fused/05_tf32x3", {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 64, "WARP_N": 64}, "accumulators"),
    ("fused/05_tf32x3", {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 16, "WARP_N": 16}, "1024"),
    ("fused/05_tf32x3", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "WARP_M": 64, "WARP_N": 32,
                         "SPLIT_K": 2, "NUM_STAGES": 4}, "shared memory"),
    ("fused/05_tf32x3", {"NUM_STAGES": 1}, "NUM_STAGES at least 2"),
    ("fused/06_wgmma_tf32x3", {"BLOCK_N": 16}, "32 or 64"),
    ("fused/06_wgmma_tf32x3", {"SPLIT_K": 16}, "1 to 8"),
    ("fused/06_wgmma_tf32x3", {"BLOCK_N": 64, "SPLIT_K": 8, "NUM_STAGES": 2}, "shared memory"),
    ("fused/06_wgmma_tf32x3", {"BLOCK_M": 128}, "no template parameter"),
    ("fused/07_tma_tf32x3", {"BLOCK_N": 16}, "32 or 64"),
    ("fused/07_tma_tf32x3", {"SPLIT_K": 8}, "1 to 7"),
    ("fused/07_tma_tf32x3", {"SPLIT_K": 4, "NUM_STAGES": 3}, "at least SPLIT_K=4"),
    ("fused/07_tma_tf32x3", {"BLOCK_N": 64, "SPLIT_K": 6, "NUM_STAGES": 12}, "shared memory"),
])
def test_impossible_configurations_are_rejected(name, params, text):
    with pytest.raises(ConfigError, match=text):
        fusion.step(name, backend="cpu", **params)
    assert fusion.config_problem(name, **params) is not None
    assert fusion.slider_report(name, 17, **params).startswith("cannot run:")


def test_persistent_grid_is_limited_to_resident_blocks(kernels, monkeypatch):
    kern = kernels["fused/03_two_phase"]
    workers = fusion.cpu_workers()
    dims = (200, 200, 200, 200)
    assert kern.grid_for(dims) == min(workers, kern.tiles(dims))
    with pytest.raises(ConfigError, match="cannot all be resident"):
        kern.grid_for(dims, grid=workers + 1)
    a, b, c = _inputs(33, 20, 40, 18)
    e = np.zeros((33, 18), np.float32)
    kern.run(a, b, c, e, grid=1)  # one block walks every tile; the barrier passes at once
    assert not fusion.compare(e, a, b, c)[0].any()
    monkeypatch.setenv("GEMMLAB_CPU_THREADS", "1")
    assert fusion.cpu_workers() == 1


def test_models():
    assert fusion.intensity(512) == 128.0  # 4 N^3 FLOPs over 16 N^2 bytes
    assert fusion.intensity(512, fused=False) == pytest.approx(512 / 6)
    assert fusion.document_intensity(4096) == pytest.approx(4096 / 16, rel=1e-3)
    assert fusion.traffic_bytes(100, fused=False) - fusion.traffic_bytes(100) == 8 * 100 * 100  # T written + read
    assert fusion.ideal_time_s(512, 67.0, 3350.0) == pytest.approx(4 * 512**3 / 67e12)


def test_records_round_trip_and_benchmark_without_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)  # the records live where results.py says
    monkeypatch.setattr(backends, "_forced", "cpu")  # recorded mode, also on a GPU machine
    assert fusion.benchmark(verbose=False) == []
    rec = {"step": "torch a@b@c", "params": {}, "kind": "benchmark", "m": 512, "k": 512, "l": 512, "n": 512,
           "median_s": 7e-5, "gpu": "Test GPU", "date": "2026-01-01"}
    fusion.save([rec, dict(rec, step="fused/03_two_phase", params={"BLOCK_M": 64}, median_s=2e-5)])
    fusion.save([dict(rec, median_s=6e-5)])  # replaces the record with the same key
    stored = json.loads((tmp_path / "test-gpu.fusion.json").read_text())
    assert len(stored) == 2
    got = fusion.benchmark(sizes=(512,), verbose=False)
    assert {r["step"] for r in got} == {"torch a@b@c", "fused/03_two_phase"}
    assert all(r["source"] == "recorded" for r in got)
    assert fusion.lookup(got, "torch a@b@c", 512)["median_s"] == 6e-5
    assert fusion.best(got, "fused/03_two_phase", 512)["median_s"] == 2e-5


def test_slider_report_checks_on_the_cpu():
    text = fusion.slider_report("fused/02_row_panel", 33, PANEL_M=4, THREAD_M=2)
    assert "PASS: fused/02_row_panel matches the float64 reference on 2 shapes" in text
    assert "cpu backend" in text


def test_tf32x3_needs_its_small_terms():
    """One TF32 mma per product is off by ~2^-11: the fp32 check must reject it; 3xTF32 passes it."""
    a, b, c = fusion.make_inputs("random", 64, 64, 64, 64)
    errors = {}
    for drop in (False, True):  # the experiment's 1x.patch drops the two small-term mmas
        one = experiments.variant_source("fusion-tf32x3", fusion.get("fused/05_tf32x3"), "1x") if drop else None
        kern = fusion.step("fused/05_tf32x3", backend="cpu", source=one)
        bad, ratio = fusion.compare(np.asarray(kern(a, b, c)), a, b, c)
        errors[drop] = float(ratio.max())
        assert bad.any() == drop
    assert errors[False] < 0.05 < 1 < errors[True]  # well inside the bound, and far outside it


def test_tf32x3_needs_sm80_and_fits_where_it_runs():
    from gemmlab import nvrtc
    from gemmlab.errors import ArchError
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    big = {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 64, "WARP_N": 32, "SPLIT_K": 1, "NUM_STAGES": 3}
    for params in ({}, big):
        with pytest.raises(ArchError, match="needs sm_80"):
            fusion.resources("fused/05_tf32x3", "sm_75", **params)
        for arch in ("sm_80", "sm_90"):
            r = fusion.resources("fused/05_tf32x3", arch, **params)
            assert r.spill_stores == 0 and r.spill_loads == 0, f"{params} spills on {arch}"


def test_step05_record_claims():
    """Chapter 8's claims about step 05 from the recorded H100 lane: winners by size, speed-ups, accuracy."""
    recs = [r for r in fusion.load("NVIDIA H100 80GB HBM3") if r["step"] == "fused/05_tf32x3"]
    if not recs:
        pytest.skip("no recorded step 05 run")
    sweeps = [r for r in recs if r["kind"] == "sweep"]
    best = {n: fusion.best(sweeps, "fused/05_tf32x3", n)["params"] for n in (512, 1024, 2048, 4096)}
    # "32-row tiles with four K groups at 512, 64 x 64 at 1024, 128-row tiles at 2048 and 4096"
    assert best[512]["BLOCK_M"] == 32 and best[512]["SPLIT_K"] == 4
    assert (best[1024]["BLOCK_M"], best[1024]["BLOCK_N"]) == (64, 64)
    assert best[2048]["BLOCK_M"] == best[4096]["BLOCK_M"] == 128
    fastest = {n: fusion.best(recs, "fused/05_tf32x3", n) for n in (512, 1024, 2048, 4096)}
    assert all(fusion.speedup(fastest[n]) >= 1 for n in (1024, 2048, 4096))   # "not slower from 1024 on"
    assert fusion.speedup(fastest[512]) < 3                                   # "short of the 3x"
    assert all(r["max_rel_error"] < 2e-6 for r in recs)                  # fp32-level at every size timed


def test_step05_is_refused_on_a_t4_before_compiling(monkeypatch):
    """On a GPU without cp.async and the TF32 mma (a T4, sm_75): a clear ArchError, nothing compiled."""
    from gemmlab import gpu
    from gemmlab.errors import ArchError
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(gpu, "device", lambda: {"cc": 75, "name": "Tesla T4", "sms": 40, "shared_per_block_optin": 65536})
    with pytest.raises(ArchError, match=r"needs compute capability 8.0 or newer.*Tesla T4, is 7.5.*fused/04_split_k"):
        fusion.step("fused/05_tf32x3", backend="gpu")
    assert not fusion.gpu_arch_ok(fusion.get("fused/05_tf32x3")) and fusion.gpu_arch_ok(fusion.get("fused/04_split_k"))


@pytest.mark.parametrize("name", ["fused/05_tf32x3", "fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3",
                                  "fused/08_tile_flags"])
def test_tf32x3_inf_input_gives_what_float64_gives(kernels, name):
    """05_tf32x3.cu's header: the Inf's NaN sums are recomputed in fp32 in the epilogue, so E has Inf (or NaN)
    exactly where float64 has, in the Inf's row of E only."""
    a, b, c = _inputs(40, 24, 36, 20, seed=4)
    a[3, 2] = np.inf
    b[5, 7], c[9, 4] = 1.0, 1.0
    e = np.asarray(kernels[name](a, b, c))
    assert not fusion.compare(e, a, b, c)[0].any()
    assert not np.isfinite(e[3]).any() and np.isfinite(np.delete(e, 3, axis=0)).all()


def test_step07_takes_tma_shapes_only(kernels):
    """TMA reads rows whose stride is a multiple of 16 bytes: K, L or N off a multiple of 4 is refused
    before launch with what to do, and the next call works."""
    kern = kernels["fused/07_tma_tf32x3"]
    for dims in [(8, 17, 8, 8), (8, 8, 18, 8), (8, 8, 8, 19)]:
        with pytest.raises(ShapeError, match=r"multiples of 4: TMA.*fused/06_wgmma_tf32x3, which takes any shape"):
            kern(*_inputs(*dims))
    _assert_matches(kern, *_inputs(7, 8, 12, 4))
    assert [c.dims for c in fusion.default_cases(kern)][:2] == [(64, 64, 68, 68), (65, 136, 36, 64)]


@pytest.mark.parametrize("params", [{"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 8},
                                    {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 6}])
@pytest.mark.parametrize("dims", [(130, 68, 100, 72), (200, 36, 264, 40)])
@pytest.mark.parametrize("grid", [1, 2])
def test_step08_waits_on_its_own_tiles(params, dims, grid):
    """08_tile_flags.cu: with fewer blocks than tiles a block computes several tiles of T and then waits, in
    phase 2, on counters it released itself or that another block has not released yet; L off a multiple
    of BLOCK_N gives a last tile of T that spans fewer K tiles (its count of reads is smaller)."""
    kern = fusion.step("fused/08_tile_flags", backend="cpu", **params)
    a, b, c = _inputs(*dims, seed=grid)
    e = np.zeros((dims[0], dims[3]), np.float32)
    kern.run(a, b, c, e, grid=grid)
    bad, _ = fusion.compare(e, a, b, c)
    assert not bad.any(), f"{kern.label} grid {grid} {dims}: {int(bad.sum())} elements off"


def test_step08_counts_the_reads_it_waits_for():
    """The count a tile of T announces is the number of phase-2 K tiles that read it, so that every counter
    is back at zero at the end of a launch (the next launch relies on it): checked here by the kernel's
    text, on the GPU by reading the counters after launches (tests/test_gpu_agreement.py)."""
    src = kernel_path(fusion.get("fused/08_tile_flags").file).read_text()
    assert "const u32 reads = cdiv(N, BLOCK_N) * k_tiles_in(cols - col);" in src  # what a tile of T announces
    assert "[&](int j) { return k_tiles_in(L - j * BLOCK_N); }" in src  # what each tile of E takes from it
    assert "grid_barrier" not in src.split("#include")[1], "08 has no grid barrier"


def test_step07_ring_parity_rule():
    """07_tma_tf32x3.cu: a group may wait for a stage only one fill ahead, so NUM_STAGES >= SPLIT_K; the
    rule and the kernel's static_assert say the same."""
    src = kernel_path(fusion.get("fused/07_tma_tf32x3").file).read_text()
    assert "NUM_STAGES >= SPLIT_K" in src
    assert fusion.config_problem("fused/07_tma_tf32x3", SPLIT_K=5, NUM_STAGES=4)
    assert fusion.config_problem("fused/07_tma_tf32x3", SPLIT_K=4, NUM_STAGES=4) is None


def test_step06_needs_sm90a_and_fits_where_it_runs():
    from gemmlab import nvrtc
    from gemmlab.errors import ArchError
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    for arch in ("sm_75", "sm_80"):
        with pytest.raises(ArchError, match=r"needs sm_90a\).*wgmma"):
            fusion.resources("fused/06_wgmma_tf32x3", arch)
    for params in ({}, {"BLOCK_N": 32, "SPLIT_K": 2, "NUM_STAGES": 4}, {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 3}):
        r = fusion.resources("fused/06_wgmma_tf32x3", "sm_90", **params)  # compiled for sm_90a
        assert r.spill_stores == 0 and r.spill_loads == 0, f"{params} spills"
        assert not r.wgmma_serialized, f"06 {params}: ptxas waits for each wgmma (C7519)"
    for name in ("fused/07_tma_tf32x3", "fused/08_tile_flags"):
        for params in ({}, {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 6}, {"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 8},
                       {"BLOCK_N": 32, "SPLIT_K": 2, "NUM_STAGES": 12}):
            r = fusion.resources(name, "sm_90", **params)
            assert r.spill_stores == 0 and r.spill_loads == 0, f"{name} {params} spills"
            assert not r.wgmma_serialized, f"{name} {params}: ptxas waits for each wgmma (C7519)"
    # The limit the kernel's header names: six warpgroups and the producer (800 threads, at most 80 registers
    # each) leave too few registers for the A fragments beside the sums, and ptxas serializes again.
    assert fusion.resources("fused/07_tma_tf32x3", "sm_90", BLOCK_N=32, SPLIT_K=6, NUM_STAGES=8).wgmma_serialized


@pytest.mark.parametrize("cc, name", [(80, "NVIDIA A100"), (100, "NVIDIA B200")])
def test_step06_is_refused_off_hopper_before_compiling(monkeypatch, cc, name):
    """wgmma exists on sm_90a only: an A100 and a Blackwell GPU both get a clear ArchError naming step 05."""
    from gemmlab import gpu
    from gemmlab.errors import ArchError
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(gpu, "device", lambda: {"cc": cc, "name": name, "sms": 100, "shared_per_block_optin": 232448})
    with pytest.raises(ArchError, match=r"sm_90a.*compute capability 9.0 only.*fused/05_tf32x3"):
        fusion.step("fused/06_wgmma_tf32x3", backend="gpu")
    with pytest.raises(ArchError, match=r"fused/07_tma_tf32x3 is compiled for sm_90a.*Use fused/05_tf32x3"):
        fusion.step("fused/07_tma_tf32x3", backend="gpu")  # not 06, which is Hopper-only too
    assert not fusion.gpu_arch_ok(fusion.get("fused/06_wgmma_tf32x3"))
    monkeypatch.setattr(gpu, "device", lambda: {"cc": 90, "name": "NVIDIA H200", "sms": 132, "shared_per_block_optin": 232448})
    assert fusion.gpu_arch_ok(fusion.get("fused/06_wgmma_tf32x3"))


def test_sized_tiles_pick_by_the_larger_output_side():
    """Steps 07 and 08 take 32-column tiles from 512 and 64 x 64 from 1024; below 512, and for steps without
    sized tiles, the parameters' defaults."""
    st = fusion.get("fused/08_tile_flags")
    assert st.sized_tiles == fusion.get("fused/07_tma_tf32x3").sized_tiles
    assert st.tiles_for((256,) * 4) == {} and fusion.get("fused/05_tf32x3").tiles_for((4096,) * 4) == {}
    assert st.tiles_for((512,) * 4) == st.tiles_for((1000,) * 4) == {"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 12}
    assert st.tiles_for((1024,) * 4) == st.tiles_for((4096,) * 4) == {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 8}
    assert st.tiles_for((64, 4096, 64, 2048)) == st.tiles_for((2048, 64, 64, 64))  # K does not count
    for from_n, p in st.sized_tiles:
        st.resolve(p)  # every configuration runs (its rules hold)


def test_sized_tiles_are_the_recorded_sweeps_fastest():
    """On the H200, at each size the sweeps timed, the configuration tiles_for picks is within 5% of the fastest
    configuration of the same sweep (one run: the same baseline, the same machine), and the benchmark record of
    the step at that size used it."""
    recs = fusion.load("NVIDIA H200")
    for name in ("fused/07_tma_tf32x3", "fused/08_tile_flags"):
        st = fusion.get(name)
        sizes = sorted({r["m"] for r in recs if r["step"] == name and r["kind"] == "sweep"})
        assert sizes == [512, 1024, 2048, 4096], name
        for n in sizes:
            sweep = [r for r in recs if r["step"] == name and r["kind"] == "sweep" and r["m"] == n]
            picked = st.resolve(st.tiles_for((n,) * 4))
            mine = next(r for r in sweep if r["params"] == picked)
            assert mine["median_s"] < 1.05 * min(r["median_s"] for r in sweep), (name, n, picked)
            assert fusion.lookup(recs, name, n)["params"] == picked, (name, n)


def test_a_new_benchmark_record_replaces_the_old_whatever_its_tiles(tmp_path, monkeypatch):
    """fusion.save: the benchmark keeps one record per step and size (a step timed at new tiles replaces the old
    record); sweep records stay one per configuration."""
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    base = {"gpu": "Test GPU", "step": "fused/08_tile_flags", "m": 512, "k": 512, "l": 512, "n": 512, "median_s": 1.0}
    old = [dict(base, kind="benchmark", params={"BLOCK_N": 32, "SPLIT_K": 4, "NUM_STAGES": 8}),
           dict(base, kind="sweep", params={"BLOCK_N": 32, "SPLIT_K": 4, "NUM_STAGES": 8}),
           dict(base, kind="benchmark", m=1024, params={"BLOCK_N": 32, "SPLIT_K": 4, "NUM_STAGES": 8})]
    fusion.save(old)
    fusion.save([dict(base, kind="benchmark", median_s=0.5, params={"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 12}),
                 dict(base, kind="sweep", median_s=0.7, params={"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 12})])
    rows = json.loads(fusion.records_path("Test GPU").read_text())
    bench512 = [r for r in rows if r["kind"] == "benchmark" and r["m"] == 512]
    assert len(bench512) == 1 and bench512[0]["median_s"] == 0.5
    assert len([r for r in rows if r["kind"] == "sweep"]) == 2
    assert [r["m"] for r in rows if r["kind"] == "benchmark"] == [512, 1024]  # other sizes untouched


# --- the one command line: python -m gemmlab takes the fused steps (issue 42) ------------------------------
@pytest.fixture
def cli_backend():
    """`verify --backend` sets the backend for the process: put the automatic choice back after the test."""
    yield
    gemmlab.set_backend(None)


def test_cli_steps_lists_every_fused_step_after_the_gemm_steps(capsys):
    assert cli(["steps", "--names"]) == 0
    assert capsys.readouterr().out.split() == [s.name for s in registry.steps()] + STEPS
    assert cli(["steps"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    for s in fusion.FUSED_STEPS:
        defaults = ", ".join(f"{k}={v.default}" for k, v in s.params.items())
        assert f"ch{registry.chapter_label(s):2s} float32 " in lines[s.name] and f"<{defaults}>" in lines[s.name], lines[s.name]
        assert lines[s.name].endswith(s.summary.removesuffix(f" ({s.arch_tag})")), lines[s.name]


def test_cli_verifies_a_fused_step_on_the_cpu(capsys, cli_backend):
    assert cli(["verify", "fused/01_naive_row", "--backend", "cpu", "--param", "THREADS=64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: fused/01_naive_row matches the float64 reference on 6 shapes") and out.count("\n") == 1
    assert cli(["verify", "01_naive_row", "--backend", "cpu"]) == 0  # a short name, as the old fusion command line took
    assert capsys.readouterr().out.startswith("PASS: fused/01_naive_row")


@pytest.mark.parametrize("args, message", [
    (["verify", "fused/03_two_phase", "--backend", "cpu", "--param", "FOO=1"],
     r"no template parameter FOO here \(fused/03_two_phase has BLOCK_M, BLOCK_N, BLOCK_K, THREAD_M, THREAD_N\)"),
    (["verify", "fused/01_naive_row", "--backend", "cpu", "--param", "THREADS=48"], r"THREADS=48"),
    (["verify", "fused/99_magic", "--backend", "cpu"], r"no step called 'fused/99_magic'; the steps are: .*fused/08"),
    (["bench", "fused/08_tile_flags", "sgemm/01_naive", "--size", "512"], r"GEMM steps .* or fused steps .* not both"),
    (["counters", "fused/01_naive_row"], r"fused/01_naive_row is a fused step"),
])
def test_cli_bad_fused_input_is_one_line_with_status_2(args, message, capsys, cli_backend):
    rc = cli(args)
    out, err = capsys.readouterr()
    assert rc == 2 and "PASS" not in out
    assert re.search(message, err) and err.startswith("error: ") and err.count("\n") == 1, err


def test_cli_bench_of_a_fused_step_without_a_gpu_says_what_the_gemm_bench_says(capsys):
    if gpu.available():
        pytest.skip("a GPU is here")
    assert cli(["bench", "sgemm/01_naive", "--size", "512"]) == 2
    gemm_err = capsys.readouterr().err
    assert cli(["bench", "fused/08_tile_flags", "--size", "512"]) == 2
    assert capsys.readouterr().err == gemm_err
    assert cli(["run", "fused/03_two_phase", "--size", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "GPU" in err, err



# --- one Python API and one record schema for every step (issue 42) ------------------------------------------------
GEMM_FIELDS = ("step", "params", "dtype", "m", "n", "k", "median_s", "tflops", "gpu", "date")


def test_gemmlab_step_and_verify_take_a_fused_name_on_the_cpu():
    kern = gemmlab.step("fused/01_naive_row", backend="cpu", THREADS=64)
    assert isinstance(kern, fusion.FusedKernel) and kern.params == {"THREADS": 64}
    report = gemmlab.verify(kern)
    assert report.passed and str(report).startswith("PASS: fused/01_naive_row")
    assert gemmlab.verify("01_naive_row", backend="cpu", raise_on_fail=False).passed  # by name, parameters too
    assert isinstance(gemmlab.step("sgemm/01_naive", backend="cpu"), gemmlab.Kernel)  # a GEMM name as before
    with pytest.raises(ConfigError, match="no step called 'fused/99_magic'"):
        gemmlab.step("fused/99_magic", backend="cpu")


def test_one_place_tells_fused_steps_from_gemm_steps():
    assert registry.is_fused("fused/03_two_phase") and registry.is_fused(fusion.get("fused/03_two_phase"))
    assert not registry.is_fused("sgemm/01_naive") and not registry.is_fused(registry.get("sgemm/01_naive"))
    assert registry.all_step_names() == [s.name for s in registry.steps()] + STEPS
    assert all(not registry.is_fused(s) for s in gemmlab.steps())  # the chapters' listing stays GEMM-only
    assert registry.all_fused(["fused/08_tile_flags"], "x") and not registry.all_fused(["sgemm/01_naive"], "x")
    with pytest.raises(ConfigError, match="not both"):
        gemmlab.benchmark(["fused/08_tile_flags", "sgemm/01_naive"], sizes=[512])


def test_gemmlab_instance_of_a_fused_step_is_compile_only():
    from gemmlab import nvrtc
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    inst = gemmlab.instance("fused/03_two_phase", BLOCK_M=32, BLOCK_N=32)
    assert isinstance(inst, fusion.FusedInstance) and inst.params["BLOCK_M"] == 32
    assert inst.resources().registers == fusion.resources("fused/03_two_phase", "sm_90", BLOCK_M=32,
                                                          BLOCK_N=32).registers
    fit = inst.fit("sm_75")  # the T4 question a GEMM instance answers, for a fused step too
    assert fit.ok and fit.threads == fusion.get("fused/03_two_phase").threads(inst.params)
    big = gemmlab.instance("fused/07_tma_tf32x3")
    assert big.fit().ok and big.fit().dynamic_shared > 64 * 1024  # an H100's shared memory, not a T4's
    with pytest.raises(gemmlab.errors.ArchError, match="needs sm_90a"):  # said, as for a GEMM step
        big.fit("sm_75")


def test_benchmark_and_sweep_of_fused_steps_without_a_gpu_return_the_fusion_records(monkeypatch):
    monkeypatch.setattr(backends, "_forced", "cpu")  # recorded mode, also on a GPU machine
    from gemmlab import bench
    got = gemmlab.benchmark(["fused/08_tile_flags"], sizes=[512], gpu="NVIDIA H200", verbose=False)
    assert got == fusion.benchmark(sizes=(512,), gpu="NVIDIA H200", verbose=False) and got
    assert fusion.lookup(got, "fused/08_tile_flags", 512)
    swept = bench.sweep("fused/08_tile_flags", {"NUM_STAGES": [8]}, size=512)
    assert swept == fusion.sweep("fused/08_tile_flags", sizes=(512,)) and swept
    assert {r["step"] for r in swept} == {"fused/08_tile_flags"} and {r["kind"] for r in swept} == {"sweep"}


def test_committed_fusion_records_have_the_gemm_records_fields():
    """results/*.fusion.json as committed (not as load() upgrades them): one schema with results/<gpu>.json."""
    files = sorted(results.RESULTS.glob("*" + fusion.SUFFIX))
    assert files
    for path in files:
        rows = json.loads(path.read_text())
        for r in rows:
            assert "impl" not in r and "speedup" not in r, (path.name, r)
            assert all(f in r for f in GEMM_FIELDS + ("l", "kind")), (path.name, r)
            assert r["dtype"] == "float32" and results.is_fused(r)
            assert r["baseline"] in fusion.BASELINES and r["pct_of_baseline"] == 100.0 * r["baseline_median_s"] / r["median_s"]
            assert fusion.speedup(r) == r["baseline_median_s"] / r["median_s"]
        assert results.upgraded(rows[0]) is rows[0]  # nothing left to convert
    gemm = results.load("NVIDIA H200")[0]
    assert set(GEMM_FIELDS + ("baseline", "baseline_median_s", "pct_of_baseline")) <= set(gemm)


def test_a_record_the_lane_writes_has_the_gemm_field_names(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    env = {"gpu": "Test GPU", "cc": 90}
    base = {"torch a@b@c": {"median_s": 6e-5}, "cupy a@b@c": {"median_s": 7e-5}}
    rec = bench.record_fused("fused/08_tile_flags", {"BLOCK_N": 32}, "benchmark", 512, {"median_s": 2e-5}, base, env,
                         grid=128)
    fusion.save([rec])
    stored, = json.loads(fusion.records_path("Test GPU").read_text())
    assert all(f in stored for f in GEMM_FIELDS) and "impl" not in stored and "speedup" not in stored
    assert stored["step"] == "fused/08_tile_flags" and stored["baseline"] == "torch a@b@c"
    assert stored["baseline_median_s"] == 6e-5 and stored["pct_of_baseline"] == pytest.approx(300.0)
    assert stored["baselines"] == {"torch a@b@c": 6e-5, "cupy a@b@c": 7e-5}  # every baseline, as a GEMM record's
    assert stored["baseline_tflops"] == pytest.approx(fusion.flops(512) / 6e-5 / 1e12)
    assert (stored["l"], stored["kind"], stored["grid"]) == (512, "benchmark", 128)
    assert results.load("Test GPU", fusion.SUFFIX)[0]["source"] == "recorded"


def test_a_fusion_file_in_the_old_schema_still_loads_and_merges(tmp_path, monkeypatch):
    """A reader's results/<gpu>.fusion.json written before issue 42 (impl, speedup) loads in the one schema, and a
    new record replaces its old one with the same key when saved."""
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    old = {"impl": "fused/03_two_phase", "params": {"BLOCK_M": 64}, "kind": "benchmark", "m": 512, "k": 512,
           "l": 512, "n": 512, "median_s": 2e-5, "baseline": "torch a@b@c", "baseline_median_s": 6e-5, "speedup": 3.0,
           "gpu": "Test GPU", "date": "2026-01-01"}
    (tmp_path / "test-gpu.fusion.json").write_text(json.dumps([old]))
    got, = fusion.load("Test GPU")
    assert got["step"] == "fused/03_two_phase" and got["dtype"] == "float32" and "impl" not in got
    assert got["pct_of_baseline"] == pytest.approx(300.0) and fusion.speedup(got) == pytest.approx(3.0)
    assert list(got)[:4] == ["step", "params", "dtype", "kind"]  # field order kept
    assert fusion.lookup(results.load("test-gpu", fusion.SUFFIX), "fused/03_two_phase", 512)
    fusion.save([dict(got, median_s=1.5e-5, pct_of_baseline=400.0)])
    rows = json.loads(fusion.records_path("Test GPU").read_text())
    assert len(rows) == 1 and rows[0]["median_s"] == 1.5e-5 and "impl" not in rows[0]
    assert results.upgrade_files() == []  # save wrote it in the one schema already


def test_alone_is_refused_for_fused_steps_with_a_reason():
    """A fused step's benchmark already times each call back to back: alone=True says so, on any machine."""
    with pytest.raises(ConfigError, match="back to back already"):
        gemmlab.benchmark(["fused/08_tile_flags"], sizes=[512], alone=True)
