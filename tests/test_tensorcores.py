"""Chapter 7's tools: the fragment demo kernels against the layout twin, the fp16-accumulate
variant against float64 and its NumPy model, the tiling geometry, and compile-only checks."""
from __future__ import annotations

import numpy as np
import pytest

import gemmlab
from gemmlab import check, layouts, nvrtc, profile, source
from gemmlab import tensorcores as tc


@pytest.mark.parametrize("shape", ["m16n8k8", "m16n8k16"])
def test_mma_demo_matches_the_twin_on_the_cpu(shape):
    demo = tc.mma_demo(shape, backend="cpu")
    assert demo["backend"] == "cpu"
    for operand in "abc":
        assert demo[operand] == layouts.mma_fragment(shape, operand), (shape, operand)


def test_mma_demo_reads_the_hardware_not_the_twin():
    """The two shapes' A maps differ where the layouts differ: the decode sees what the kernel did."""
    k8, k16 = tc.mma_demo("m16n8k8", backend="cpu"), tc.mma_demo("m16n8k16", backend="cpu")
    assert k8["a"] != k16["a"] and k8["c"] == k16["c"]
    # lane 5 holds A(1, 2), A(1, 3), A(9, 2), A(9, 3) in m16n8k8 (PTX ISA figure)
    assert [k8["a"][(5, i)] for i in range(4)] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    # the raw D registers are 8*row + col: lane 0 holds (0, 0), (0, 1), (8, 0), (8, 1)
    assert k8["raw"]["d"][:4].tolist() == [0.0, 1.0, 64.0, 65.0]


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_demo_matches_the_twin_on_the_cpu(num, trans):
    got = tc.ldmatrix_demo(num, trans, backend="cpu")
    assert got == layouts.ldmatrix_fragment(num, trans)
    assert got != layouts.ldmatrix_fragment(num, not trans)


def test_lane_table_of_the_accumulator():
    text = tc.lane_table(layouts.mma_fragment("m16n8k8", "c"), 16, 8).splitlines()
    assert text[1].split() == ["0", "0.0", "0.1", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1"]
    assert text[9].split()[:3] == ["8", "0.2", "0.3"]


def test_demo_kernels_compile_for_a_t4():
    src = source.assemble(tc.DEMO_FILE)
    for expr in ["mma_fragments<8>", "ldmatrix_fragments<1, false>", "ldmatrix_fragments<2, true>",
                 "ldmatrix_fragments<4, true>"]:
        r = nvrtc.compile(src, expr, "sm_75", label=expr).resources
        assert r.arch == "sm_75" and not r.spills and r.shared_bytes <= 1024
    with pytest.raises(gemmlab.errors.ArchError, match="sm_80"):
        nvrtc.compile(src, "mma_fragments<16>", "sm_75", label="mma_fragments<16>")
    assert nvrtc.compile(src, "mma_fragments<16>", "sm_80", label="mma_fragments<16>").resources.arch == "sm_80"


def test_f16_accumulate_compiles_for_a_t4_with_fewer_registers():
    f16 = gemmlab.instance("hgemm/01_mma_tiling")  # same tiles
    r16 = gemmlab.kernel.Instance(tc.F16_ACCUMULATE, {}).resources("sm_75")
    assert not r16.spills and r16.shared_bytes == f16.resources("sm_75").shared_bytes
    assert r16.registers < f16.resources("sm_75").registers
    assert "demo/01_f16_accumulate" not in [s.name for s in gemmlab.steps()]  # the ladder is unchanged


def test_f16_accumulate_passes_its_float64_check():
    report = check.verify(tc.f16_accumulate(backend="cpu"))
    assert report.passed and "6 shapes" in str(report)


@pytest.mark.parametrize("k", [37, 256, 1024])
def test_f16_accumulate_equals_its_model_and_loses_accuracy(k):
    a, b = tc.accuracy_inputs(40, 24, k)
    got16 = tc.f16_accumulate(backend="cpu", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)(a, b)
    got32 = gemmlab.step("hgemm/01_mma_tiling", backend="cpu", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)(a, b)
    np.testing.assert_array_equal(got16.view(np.uint16), tc.accumulate_model(a, b, "float16").view(np.uint16))
    np.testing.assert_array_equal(got32.view(np.uint16), tc.accumulate_model(a, b, "float32").view(np.uint16))
    if k >= 256:
        assert tc.relative_error(got16, a, b) > 2 * tc.relative_error(got32, a, b)
        bad, _ = check.compare(got16, a, b, "float32")  # an fp32-accumulation bound rejects it
        assert bad.any()


def test_accumulate_model_rejects_an_unknown_accumulator():
    with pytest.raises(gemmlab.errors.ConfigError, match="float16"):
        tc.accumulate_model(np.ones((2, 2)), np.ones((2, 2)), "bfloat16")


def test_fp16_accumulation_stagnates_on_positive_inputs():
    """Once the sum is large, an mma's contribution is below half an fp16 ulp of it and vanishes."""
    a, b = tc.accuracy_inputs(2, 2, 65536, kind="positive")  # sums near 16384, an fp16 ulp of 16 there
    assert tc.relative_error(tc.accumulate_model(a, b, "float16"), a, b) > 0.3
    assert tc.relative_error(tc.accumulate_model(a, b, "float32"), a, b) < 1e-3


@pytest.mark.parametrize("params", [{}, {"BLOCK_M": 64, "BLOCK_N": 128, "WARP_M": 32, "WARP_N": 64},
                                    {"BLOCK_M": 256, "BLOCK_N": 32, "WARP_M": 64, "WARP_N": 16}])
def test_tiles_cover_the_block_and_warp_tiles_once(params):
    p = gemmlab.instance("hgemm/01_mma_tiling", **params).params
    t = tc.block_warp_mma_tiles(p)
    cover = np.zeros((p["BLOCK_M"], p["BLOCK_N"]), int)
    for _, r, c in t["warps"]:
        cover[r:r + p["WARP_M"], c:c + p["WARP_N"]] += 1
    assert (cover == 1).all() and t["threads"] == 32 * len(t["warps"])
    warp = np.zeros((p["WARP_M"], p["WARP_N"]), int)
    for r, c in t["mma"]:
        warp[r:r + 16, c:c + 8] += 1
    assert (warp == 1).all()


def test_tiles_refuse_an_impossible_configuration():
    with pytest.raises(gemmlab.errors.ConfigError, match="WARP_M"):
        tc.block_warp_mma_tiles({"BLOCK_M": 64, "WARP_M": 128})


def test_pictures_draw(tmp_path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3)
    tc.draw_hierarchy({}, axes=axes)
    tc.draw_mma_fragment(axes[0], "m16n8k16", "a")
    tc.draw_ldmatrix(axes[1], 4, trans=True)
    assert len(axes[1].texts) >= 4 * 64
    fig.savefig(tmp_path / "f.png")
    plt.close(fig)


def test_recorded_ldmatrix_wavefronts_and_missing_steps():
    m = profile.load_csv("hgemm/01_mma_tiling")
    if m:  # recorded on the H100: 8-way and 4-way conflicts average 24 wavefronts per ldmatrix.x4
        ratio = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / m["smsp__inst_executed_op_ldsm.sum"]
        assert 23.5 < ratio < 24.5
    assert profile.load_csv("hgemm/99_nothing") == {}


def test_tiling_report_explains_impossible_tiles_and_reports_possible_ones():
    text = tc.tiling_report("hgemm/03_swizzled", BLOCK_M=32, WARP_M=64)
    assert text.startswith("cannot run:") and "WARP_M=64 must divide BLOCK_M=32" in text
    assert "1024" in tc.tiling_report("hgemm/01_mma_tiling", BLOCK_M=256, BLOCK_N=256, WARP_M=16, WARP_N=16)
    ok = tc.tiling_report("hgemm/02_vectorized_copy", time=False, BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
    assert ok.startswith("4 warps of 8 mma tiles each: 32 fp32 accumulators per lane") and "PASS" in ok
