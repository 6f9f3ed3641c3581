"""The swizzle twin and the bank/wavefront model (chapter 5), against hand counts and the emulator."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gemmlab import swizzle as sw  # noqa: E402

S333 = sw.Swizzle(3, 3, 3)  # 64-wide fp16 tile: 8 chunks of 16 bytes per row, XOR with row % 8


def test_swizzle_matches_cute_definition_on_examples():
    assert S333(0) == 0
    assert S333(64) == 64 ^ 8  # row 1, chunk 0 -> chunk 1
    assert S333(7 * 64 + 5) == 7 * 64 + ((0 ^ 7) << 3) + 5  # row 7: chunk 0 -> 7, element 5 stays


@given(b=st.integers(0, 3), m=st.integers(0, 4), s=st.integers(3, 5))
def test_swizzle_is_a_bijection_and_keeps_rows(b, m, s):
    if b > s:
        return
    f = sw.Swizzle(b, m, s)
    span = 1 << (b + m + s)
    images = [f(o) for o in range(span)]
    assert sorted(images) == list(range(span))
    row = 1 << (m + s)  # offsets of one row stay in that row
    assert all(f(o) // row == o // row for o in range(span))


def test_fp32_column_read_conflicts_and_padding():
    assert sw.wavefronts(sw.column_read(32, 0)) == 32
    assert sw.wavefronts(sw.column_read(32, 0, pad=1)) == 1
    assert sw.wavefronts([4 * i for i in range(32)]) == 1  # a row: one word per bank
    assert sw.wavefronts([0] * 32) == 1  # broadcast


def test_vector_accesses_count_phases():
    assert sw.wavefronts([16 * i for i in range(32)], 16) == 4  # 512 contiguous bytes
    assert sw.wavefronts([8 * i for i in range(32)], 8) == 2


def test_ldmatrix_on_a_64_wide_fp16_tile_is_8_way_until_swizzled():
    plain = sw.ldmatrix_rows(64, 0, 0)
    assert sw.ldmatrix_wavefronts(plain) == 8
    assert sw.ldmatrix_wavefronts(sw.ldmatrix_rows(64, 0, 0, swizzle=S333)) == 1
    assert sw.ldmatrix_wavefronts(sw.ldmatrix_rows(64, 0, 0, matrices=4)) == 32
    assert sw.ldmatrix_wavefronts(sw.ldmatrix_rows(64, 0, 0, matrices=4, swizzle=S333)) == 4
    assert sw.ldmatrix_wavefronts(sw.ldmatrix_rows(64, 0, 0, pad=8)) == 1  # padding works too, at a cost


@pytest.mark.parametrize("col0", [0, 8, 16, 56])
def test_swizzle_is_conflict_free_for_every_ldmatrix_the_kernels_make(col0):
    for row0 in (0, 8, 16, 24):
        assert sw.ldmatrix_wavefronts(sw.ldmatrix_rows(64, row0, col0, swizzle=S333)) == 1


def test_bank_map_and_picture():
    banks = sw.bank_map(4, 4, swizzle=sw.Swizzle(2, 0, 2))  # the toy 4x4 case
    assert sorted(banks[0].tolist()) == [0, 1, 2, 3] and banks[1].tolist() == [5, 4, 7, 6]
    ax = sw.draw_bank_map(8, 64, elem_bytes=2, swizzle=S333, touched=[(r, 0) for r in range(8)])
    assert len(ax.patches) == 8


# ------------------------------------------------------------------------------------------------
# The twin against the kernels' own swizzle<WIDTH>() (compiled from the .cu text by the emulator)
# ------------------------------------------------------------------------------------------------
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from gemmlab import cpu, profile  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels" / "hgemm"
ROWS = 16


def kernel_swizzle_source(step_file: str) -> str:
    """The `template <int WIDTH> ... swizzle(int row, int col) {...}` helper, cut out of a kernel file."""
    text = (KERNELS / step_file).read_text()
    m = re.search(r"template <int WIDTH>\s*__device__ __forceinline__ int swizzle\(int row, int col\) \{.*?\n\}",
                  text, re.S)
    assert m, f"no swizzle<WIDTH>() helper found in {step_file}"
    return m.group(0)


@pytest.mark.skipif(not cpu.available(), reason="the CPU emulator needs g++")
@pytest.mark.parametrize("step_file", ["03_swizzled.cu", "05_tuned_tiles.cu"])
def test_twin_matches_the_kernels_swizzle(step_file):
    widths = (16, 32, 64, 128, 256)
    body = "\n".join(f"    for (int i = t; i < {ROWS} * {w}; i += blockDim.x) out{j}[i] = swizzle<{w}>(i / {w}, i % {w});"
                     for j, w in enumerate(widths))
    source = (kernel_swizzle_source(step_file) + "\n__global__ void table("
              + ", ".join(f"int* out{j}" for j in range(len(widths))) + ") {\n    int t = threadIdx.x;\n"
              + body + "\n}\n")
    outs = [np.full(ROWS * w, -1, np.int32) for w in widths]
    cpu.launch(cpu.compile_kernel(source, "table", label=f"swizzle of {step_file}"), 1, 32, outs)
    for w, got in zip(widths, outs):
        f = sw.kernel_swizzle(w)
        want = [f(r * w + c) for r in range(ROWS) for c in range(w)]
        assert got.tolist() == want, (step_file, w, f)


def test_kernel_swizzle_parameters_are_the_ones_the_kernel_comment_names():
    assert sw.kernel_swizzle(64) == sw.Swizzle(3, 3, 3)
    assert sw.kernel_swizzle(32) == sw.Swizzle(2, 3, 3)
    assert sw.kernel_swizzle(128) == sw.Swizzle(3, 3, 4)
    assert sw.swizzle_for(64, 2) == sw.kernel_swizzle(64)
    with pytest.raises(ValueError):
        sw.kernel_swizzle(8)
    with pytest.raises(ValueError):
        sw.kernel_swizzle(48)


@pytest.mark.parametrize("width", [16, 32, 64, 128, 256])
def test_kernel_swizzle_is_a_bijection_within_each_row_and_keeps_chunks_whole(width):
    f = sw.kernel_swizzle(width)
    for r in range(16):
        row = [f(r * width + c) for c in range(width)]
        assert sorted(row) == list(range(r * width, (r + 1) * width)), (width, r)
        for c in range(0, width, 8):  # the 8 halves of a chunk stay together and in order
            assert row[c:c + 8] == list(range(row[c], row[c] + 8))


def _registry_configs(step):
    import itertools

    from gemmlab import registry
    from gemmlab.errors import GemmlabError

    params = registry.get(step).params
    names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N"]
    for values in itertools.product(*(params[n].choices for n in names)):
        p = dict(zip(names, values))
        try:
            registry.get(step).resolve(p)
        except GemmlabError:
            continue
        yield p


@pytest.mark.parametrize("operand", ["A", "B"])
def test_swizzled_ldmatrix_and_stores_are_conflict_free_for_every_configuration(operand):
    configs = list(_registry_configs("hgemm/03_swizzled"))
    assert len(configs) > 3
    for p in configs:
        for req in sw.hgemm_ldmatrix_requests(operand, layout="swizzled", **p):
            assert sw.ldmatrix_wavefronts(req) == 4, p  # one wavefront per 8x8 matrix
        for req in sw.hgemm_store_requests(operand, layout="swizzled", **p):
            assert sw.wavefronts(req, 16) == sw.ideal_wavefronts(len(req), 16), p


def test_unswizzled_ldmatrix_conflicts_as_the_kernel_comment_says():
    # 64-byte rows (BLOCK_K = 32): 4 wavefronts per matrix; 128 bytes or more: 8
    assert sw.per_request(sw.hgemm_ldmatrix_requests("A", BLOCK_K=32), ldmatrix=True) == 16
    assert sw.per_request(sw.hgemm_ldmatrix_requests("B", BLOCK_N=128), ldmatrix=True) == 32
    assert sw.per_request(sw.hgemm_ldmatrix_requests("A", BLOCK_K=64), ldmatrix=True) == 32
    # padding by 16 bytes fixes the reads, but on a 32-wide tile it breaks the 16-byte stores
    assert sw.per_request(sw.hgemm_ldmatrix_requests("A", layout="padded", pad=8), ldmatrix=True) == 4
    assert sw.per_request(sw.hgemm_store_requests("A", layout="padded", pad=8), 16) == 8
    assert sw.per_request(sw.hgemm_store_requests("B", layout="padded", pad=8), 16) == 4


def test_fp32_ladder_twins():
    reqs, size = sw.sgemm_requests("sgemm/06_vectorized", "sB load")
    assert size == 16 and sw.per_request(reqs, size) == 8  # lanes 8 floats apart: 2-way over the ideal 4
    assert sw.per_request(*sw.sgemm_requests("sgemm/07_warptiling", "sB load")) == 4
    assert sw.per_request(*sw.sgemm_requests("sgemm/07_warptiling", "sA load")) == 4
    assert sw.per_request(*sw.sgemm_requests("sgemm/07_warptiling", "sA store")) == 2  # transposed store
    assert sw.per_request(*sw.sgemm_requests("sgemm/07_warptiling", "sA store", pad=4)) == 1
    with pytest.raises(ValueError):
        sw.sgemm_requests("sgemm/05_2d_blocktiling", "sA load")


# ------------------------------------------------------------------------------------------------
# The sliders' model, and Nsight Compute's records
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("access,width,elem,pad,bits,want", [
    ("column read", 32, 4, 0, 0, 32), ("column read", 32, 4, 1, 0, 1), ("row write", 32, 4, 0, 0, 1),
    ("ldmatrix 8x8", 64, 2, 0, 0, 8), ("ldmatrix 8x8", 64, 2, 8, 0, 1), ("ldmatrix 8x8", 64, 2, 0, 3, 1),
    ("ldmatrix 8x8", 32, 2, 0, 0, 4), ("ldmatrix 8x8", 32, 2, 0, 2, 1), ("ldmatrix 8x8", 64, 2, 0, 1, 4),
    ("column read", 64, 2, 0, 3, 4),  # a chunk swizzle does not help single-element column reads
])
def test_count_access(access, width, elem, pad, bits, want):
    c = sw.count_access(access, width, elem, pad, bits)
    assert c.wavefronts == want and c.ideal == 1
    assert f"{want} wavefront" in str(c)


@pytest.mark.parametrize("args,words", [
    ((64, 2, 8, 3, "ldmatrix 8x8"), "alternatives"), ((4, 2, 0, 0, "ldmatrix 8x8"), "16-byte rows"),
    ((64, 2, 4, 0, "ldmatrix 8x8"), "aligned"), ((16, 2, 0, 3, "ldmatrix 8x8"), "at most 1 bits"),
    ((48, 2, 0, 0, "row write"), "power of two"), ((64, 2, 0, 0, "diagonal"), "one of")])
def test_impossible_slider_settings_get_a_sentence(args, words):
    assert words in sw.config_problem(*args)
    with pytest.raises(ValueError):
        sw.count_access(args[4], *args[:4])


def test_pictures_and_widget():
    counts = sw.draw_three_layouts("ldmatrix 8x8", 64, 2, 8)
    assert [c.wavefronts for c in counts] == [8, 1, 1]
    assert [c.layout for c in counts] == ["plain", "padded", "swizzled"]
    toy = sw.draw_permutation(4, 4, sw.Swizzle(2, 0, 2))
    assert toy.tolist() == [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    chunks = sw.draw_permutation(8, 64, sw.kernel_swizzle(64), unit=8)
    assert all(sorted(row) == list(range(8)) for row in chunks.tolist())
    assert sorted(chunks[:, 0].tolist()) == list(range(8))  # chunk 0 of the 8 rows: 8 different slots
    box = sw.bank_explorer(width=32, elem_bytes=4, pad=1, bits=0, access="column read")
    assert "1 wavefront" in box.children[2].value
    box.children[1].children[1].value = 2  # swizzle bits together with padding: a sentence, no picture
    assert "alternatives" in box.children[2].value


NCU = '''"ID","Kernel Name","smsp__inst_executed_op_ldsm.sum","smsp__inst_executed_op_shared_ld.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","smsp__inst_executed_op_shared_st.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
"","","inst","inst","","","inst","",""
"0","k","0","1,000","3,000","1,000","10","40","20"
'''


def test_ncu_shared_per_request():
    got = profile.shared_per_request(profile.parse_raw_csv(NCU))
    assert got["load"]["per_request"] == 3 and got["load"]["ideal_per_request"] == 2
    assert got["store"]["per_request"] == 4 and got["store"]["conflicts"] == 20
    assert "ldmatrix" not in got and profile.shared_per_request({}) == {}


def test_recorded_ncu_ldmatrix_counts():
    plain = profile.shared_per_request(profile.load_csv("hgemm/01_mma_tiling"))["ldmatrix"]
    swizzled = profile.shared_per_request(profile.load_csv("hgemm/03_swizzled"))["ldmatrix"]
    assert round(plain["per_request"]) == 24 and round(swizzled["per_request"]) == 4
    assert plain["ideal_per_request"] == 4
    assert profile.load_csv("sgemm/99_missing") == {}


def test_load_csv_merges_the_shared_record(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "NCU_CSV", tmp_path)
    (tmp_path / "sgemm-06_x.csv").write_text(CSV_BASE)
    assert profile.load_csv("sgemm/06_x")["smsp__inst_executed_op_shared_ld.sum"] == 5
    (tmp_path / "shared-sgemm-06_x.csv").write_text(NCU)
    merged = profile.load_csv("sgemm/06_x")
    assert merged["smsp__inst_executed_op_shared_ld.sum"] == 1000 and "launch__registers_per_thread" in merged


CSV_BASE = '''"ID","Kernel Name","launch__registers_per_thread","smsp__inst_executed_op_shared_ld.sum"
"","","register/thread","inst"
"0","k","128","5"
'''
