"""Chapter 7's module: the shared-wavefront prediction, the recorded profiles' gaps and the ldmatrix.x4 placement picture."""
import collections
import re

import matplotlib
import pytest

matplotlib.use("Agg")

from gemmlab import layouts  # noqa: E402
from gemmlab.chapters import ch07_tensor_cores as ch7  # noqa: E402
from gemmlab.chapters.show import kernel_file  # noqa: E402


def test_prediction_counts_mma_flop_against_ldmatrix_wavefronts():
    w1, w3 = ch7.warp_k_step(ch7.STEPS[0]), ch7.warp_k_step(ch7.STEPS[2])
    assert (w1["mma"], w1["flop"]) == (128, 128 * 2048)
    assert w1["ldsm"] == {"A": 8, "B": 8} and w1["per_ldsm"] == {"A": 16, "B": 32} and w1["waves"] == 384
    assert round(w1["flop_per_cycle"]) == 683
    assert w3["waves"] == 64 and w3["flop_per_cycle"] == ch7.TENSOR_FLOP_PER_SM_CYCLE == 4096
    assert ch7.warp_k_step(ch7.STEPS[1])["waves"] == 384  # step 02 keeps step 01's ldmatrix
    # on the H100 (989.4 TFLOP/s on its data sheet): ~165 TFLOP/s for 01 and 02 (shared memory), the measured
    # mma.m16n8k8 ceiling for 03 (the probe was recorded on this H100); on a GPU without a probe, the data sheet
    h100 = "NVIDIA H100 80GB HBM3"
    assert ch7.predicted_tflops(ch7.STEPS[0], h100) == pytest.approx(989.4 * 683 / 4096, rel=1e-3)
    ceiling = ch7.mma_ceiling(h100)
    if ceiling is not None:
        assert 165 < ceiling < 989.4 and ch7.predicted_tflops(ch7.STEPS[2], h100) == pytest.approx(ceiling)
    assert ch7.mma_ceiling("no such GPU") is None


def test_measure_prints_step_01_beside_its_bound(capsys):
    records = ch7.measure()
    out = capsys.readouterr().out
    assert "predicted" in out and "hgemm/01_mma_tiling" in out and "hgemm/03_swizzled" not in out
    assert {r["step"] for r in records} >= set(ch7.STEPS)


def test_profiles_give_wavefronts_per_warp_k_step_and_a_busy_share():
    g1, g2, g3 = (ch7.shared_pipe(s) for s in ch7.STEPS)
    if g1 is None:
        pytest.skip("no recorded Nsight Compute CSVs")
    assert round(g1["ld"]) == 384 and round(g3["ld"]) == 64  # the prediction's wavefronts, on the GPU
    assert round(g1["sts"]) == 64 and round(g2["sts"]) == 8   # 2-byte stores against 16-byte ones
    for g in (g1, g2, g3):
        assert 0 < g["busy"] < 1
    assert g2["busy"] > 2 * g1["busy"] and g2["busy"] > 2 * g3["busy"]


def test_fp32_start_shows_only_the_starting_point(capsys):
    ch7.fp32_start()
    out = capsys.readouterr().out
    assert "sgemm/" in out and "cuBLAS fp16" in out
    assert "hgemm/0" not in out  # no result of this chapter's steps before their prediction


def test_padded_stores_are_two_way_on_sA_only(capsys):
    ch7.ldmatrix_alternatives()
    padded = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("padded"))
    assert "sA 8.00" in padded and "sB 4.00" in padded


def test_x4_placement_is_the_kernels():
    """The picture's quarters follow ldmatrix's lane -> row rule for step 01's A address (lane l: row l % 16, column
    8 (l / 16)), and its register labels are the kernel's own ldmatrix_x4 / ldmatrix_x4_trans arguments, in order."""
    for mat, r0, c0, _ in ch7.X4_PLACEMENT["A"]:
        lanes = range(8 * mat, 8 * mat + 8)
        assert {(lane % 16 // 8 * 8, 8 * (lane // 16)) for lane in lanes} == {(r0, c0)}
    assert layouts.ldmatrix_row_provider(4)  # lanes 8j..8j+7 give matrix j's rows (the twin the demo checks)
    text = kernel_file("hgemm/01_mma_tiling").read_text()
    for op, call in (("A", r"ldmatrix_x4\(([^;]*?),\s*&sA"), ("B", r"ldmatrix_x4_trans\(([^;]*?),\s*&sB")):
        args = [re.sub(r"\s+", "", a) for a in re.search(call, text, re.S).group(1).split(",")]
        assert args == [reg.replace(" ", "") for _, _, _, reg in ch7.X4_PLACEMENT[op]], (op, args)


def test_x4_placement_draws_four_matrices_per_piece():
    import matplotlib.pyplot as plt
    axes = ch7.draw_x4_placement()
    for ax, op in zip(axes, "AB"):
        texts = [t.get_text() for t in ax.texts]
        assert sorted(t for t in texts if t.startswith("matrix")) == [f"matrix {j}" for j in range(4)]
        assert sum(t.startswith("-> r" + op) for t in texts) == 4
        assert len(ax.patches) == 4
    assert "trans" in axes[1].get_title() and "trans" not in axes[0].get_title()
    plt.close("all")


def test_h200_profiles_give_the_stalls_and_l2_hits_the_gaps_quote():
    from gemmlab.chapters import ch07_tensor_cores as ch
    h1, h1b, h3 = (ch.h200_profile(ch.STEPS[0], 2048), ch.h200_profile(ch.STEPS[0], 4096),
                   ch.h200_profile(ch.STEPS[2], 4096))
    assert h1["l2_hit"] > h1b["l2_hit"] and h1["stalls"][0][0] == "long_scoreboard"
    assert h3["stalls"][0][0] == "long_scoreboard" and round(h3["ldsm"]) == 4 and round(h1["ldsm"]) == 24
    assert ch.h200_profile(ch.STEPS[1], 4096)["stalls"][0][0] == "short_scoreboard"


def test_f16_speed_puts_one_h200_run_and_its_profiles_beside_the_prediction(capsys):
    rows = ch7.f16_speed()
    out = capsys.readouterr().out
    # the one run that timed both (not results.one_gpu's pick, which has more H100 rows), at both sizes
    timed = [line for line in out.splitlines() if line.startswith(("demo/01_f16_accumulate ", "hgemm/01_mma_tiling "))
             and "recorded" in line]
    assert len(timed) == 4 and all("NVIDIA H200 (recorded, 2026-11-29)" in line for line in timed)
    assert out.index("predicted:") < out.index("TFLOP/s") < out.index("measured:")  # prediction first
    assert rows["f16"]["predicted"] > rows["f32"]["predicted"]  # from NVRTC's sm_90 registers (release-dependent)
    assert (rows["f32"]["blocks"], rows["f16"]["blocks"]) == (2, 3)  # the GPU's build: 130 registers, 3 blocks
    assert rows["f16"]["warps"] > rows["f32"]["warps"] and rows["f16"]["issue"] > rows["f32"]["issue"]
    assert rows["f16"]["long"] == pytest.approx(rows["f32"]["long"], rel=0.01)  # each warp waits as long


def test_copy_mapping_is_the_kernels_round_robin():
    """Step 02's copy as its kernel deals it (chunk e to thread e % NUM_THREADS): every thread moves 4 chunks of each
    tile, one per copy, and a warp's 32 chunks of one copy are whole tile rows (8 rows of sA, 2 of sB), consecutive
    threads on consecutive chunks of a row; the picture labels one band per warp and copy."""
    import matplotlib.pyplot as plt
    text = kernel_file("hgemm/02_vectorized_copy").read_text()
    assert "const int e = i * NUM_THREADS + tid;" in text and "e / (BLOCK_K / 8), c = e % (BLOCK_K / 8) * 8" in text
    p = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "WARP_M": 64, "WARP_N": 64}
    mp = ch7.copy_mapping(p)
    assert mp["threads"] == 128
    for op, rows_per_warp in (("A", 8), ("B", 2)):
        tid, copy = mp[op]["tid"], mp[op]["copy"]
        assert sorted(collections.Counter(tid.ravel()).values()) == [4] * 128
        assert (tid[0] == range(tid.shape[1])).all()  # consecutive threads, consecutive chunks of a row
        for w in range(4):
            for i in range(4):
                rows = {r for r, _ in zip(*((tid // 32 == w) & (copy == i)).nonzero())}
                assert len(rows) == rows_per_warp and all(((tid[r] // 32 == w) & (copy[r] == i)).all() for r in rows)
    axes = ch7.draw_copy_mapping(p)
    for ax in axes:
        labels = [t.get_text() for t in ax.texts]
        assert len(labels) == 16 and "warp 3, copy 3" in labels
    plt.close("all")


def test_diff_from_include_skips_the_reworded_headers():
    from gemmlab.chapters import show
    whole, code = (show.diff("hgemm/03_swizzled", "hgemm/02_vectorized_copy", **kw) for kw in ({}, {"start_at": "#include"}))
    assert "step 02_vectorized_copy" in repr(whole) and "step 02_vectorized_copy" not in repr(code)
    assert "int swizzle(int row, int col)" in repr(code) and "(from line" in code.title
    first_hunk = next(line for line in repr(code).splitlines() if line.startswith("@@"))
    assert int(first_hunk.split("+")[1].split(",")[0]) >= 24  # new-file line numbers stay the file's own
