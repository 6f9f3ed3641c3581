"""The emulated twins of the inline-PTX wrappers (ldmatrix, mma.sync, cp.async) against the PTX ISA.

Fragments are built and read in Python from the ISA's element formulas (g = lane >> 2,
t = lane % 4), independently of the C++ twins, and checked on inputs where every output element
names its inputs, then against NumPy on random data.
"""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab import cpu
from gemmlab.runtime.source import kernel_path

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the CPU emulator needs g++")


def run(source: str, name: str, grid, block, args: list, shared_mem: int = 0):
    cpu.launch(cpu.compile_kernel(source, name, label=name), grid, block, args, shared_mem=shared_mem, timeout=60)


def pack_half2(lo: float, hi: float) -> int:
    """One 32-bit register holding two halves; the lower 16 bits hold the first (smaller index)."""
    bits = np.array([lo, hi], np.float16).view(np.uint16)
    return int(bits[0]) | int(bits[1]) << 16


def unpack_half2(reg: int) -> tuple[float, float]:
    halves = np.array([reg & 0xFFFF, reg >> 16], np.uint16).view(np.float16)
    return float(halves[0]), float(halves[1])


def a_fragment(A: np.ndarray, lane: int) -> list[int]:
    """Registers of A (16 x K, K = 8 or 16) held by `lane`: element i lives in register i // 2,
    row g for i % 4 < 2 else g + 8, col 2t + (i & 1), + 8 for i >= 4."""
    g, t = lane >> 2, lane % 4
    elems = [A[g if i % 4 < 2 else g + 8, 2 * t + (i & 1) + (8 if i >= 4 else 0)] for i in range(A.shape[1] // 2)]
    return [pack_half2(elems[2 * r], elems[2 * r + 1]) for r in range(len(elems) // 2)]


def b_fragment(B: np.ndarray, lane: int) -> list[int]:
    """Registers of B (K x 8) held by `lane`: element i at (k = 2t + (i & 1), + 8 for i >= 2; col g)."""
    g, t = lane >> 2, lane % 4
    elems = [B[2 * t + (i & 1) + (8 if i >= 2 else 0), g] for i in range(B.shape[0] // 4)]
    return [pack_half2(elems[2 * r], elems[2 * r + 1]) for r in range(len(elems) // 2)]


def c_positions(lane: int) -> list[tuple[int, int]]:
    """(row, col) of accumulator elements c0..c3 of `lane`."""
    g, t = lane >> 2, lane % 4
    return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def test_fragment_helpers_match_hand_computed_registers():
    A = np.arange(16 * 16).reshape(16, 16).astype(np.float16)
    B = np.arange(16 * 8).reshape(16, 8).astype(np.float16)
    # lane 5: g = 1, t = 1
    assert [unpack_half2(r) for r in a_fragment(A, 5)] == [(18, 19), (146, 147), (26, 27), (154, 155)]
    assert [unpack_half2(r) for r in b_fragment(B, 5)] == [(17, 25), (81, 89)]
    assert c_positions(5) == [(1, 2), (1, 3), (9, 2), (9, 3)]


# ------------------------------------------------------------------------------------------------
# ldmatrix
# ------------------------------------------------------------------------------------------------
LDMATRIX = r"""
// 4 stacked 8 x 8 matrices of b16; lane 8j+i points at row 7-i of matrix j (rows given in
// reverse, so the test also checks which lane's address feeds which row).
__global__ void ldm(const unsigned short* tile, unsigned* out) {
    __shared__ __align__(16) unsigned short s[32][8];
    int lane = threadIdx.x;
    for (int c = 0; c < 8; ++c) s[lane][c] = tile[lane * 8 + c];
    __syncwarp();
    const void* row = &s[lane / 8 * 8 + 7 - lane % 8][0];
    unsigned* o = out + lane * 4;
    unsigned r[4] = {0, 0, 0, 0};
    emu::ldmatrix_x1(r[0], row);                            for (int i = 0; i < 4; ++i) o[0 * 128 + i] = r[i];
    emu::ldmatrix_x2(r[0], r[1], row);                      for (int i = 0; i < 4; ++i) o[1 * 128 + i] = r[i];
    emu::ldmatrix_x4(r[0], r[1], r[2], r[3], row);          for (int i = 0; i < 4; ++i) o[2 * 128 + i] = r[i];
    r[0] = r[1] = r[2] = r[3] = 0;
    emu::ldmatrix_x1_trans(r[0], row);                      for (int i = 0; i < 4; ++i) o[3 * 128 + i] = r[i];
    emu::ldmatrix_x2_trans(r[0], r[1], row);                for (int i = 0; i < 4; ++i) o[4 * 128 + i] = r[i];
    emu::ldmatrix_x4_trans(r[0], r[1], r[2], r[3], row);    for (int i = 0; i < 4; ++i) o[5 * 128 + i] = r[i];
}
"""


@pytest.fixture(scope="module")
def ldmatrix_out():
    tile = np.arange(32 * 8, dtype=np.uint16)  # element (row r, col c) of the stack holds 8r + c
    out = np.zeros((6, 32, 4), np.uint32)
    run(LDMATRIX, "ldm", 1, 32, [tile, out])
    return out


def elements(reg: int) -> tuple[int, int]:
    return reg & 0xFFFF, reg >> 16


def stored(j: int, r: int, c: int) -> int:
    """Value at (row r, col c) of matrix j as the lanes address it (rows reversed)."""
    return 8 * (8 * j + 7 - r) + c


@pytest.mark.parametrize("variant,num", [(0, 1), (1, 2), (2, 4)])
def test_ldmatrix(ldmatrix_out, variant, num):
    regs = ldmatrix_out[variant]
    for lane in range(32):
        for j in range(num):  # register j of lane l: (row l/4, cols 2(l%4), 2(l%4)+1) of matrix j
            r, c = lane // 4, 2 * (lane % 4)
            assert elements(regs[lane, j]) == (stored(j, r, c), stored(j, r, c + 1)), (lane, j)
        assert not regs[lane, num:].any()


@pytest.mark.parametrize("variant,num", [(3, 1), (4, 2), (5, 4)])
def test_ldmatrix_trans(ldmatrix_out, variant, num):
    regs = ldmatrix_out[variant]
    for lane in range(32):
        for j in range(num):  # the transposed matrix: element (r, c) is stored (c, r)
            r, c = lane // 4, 2 * (lane % 4)
            assert elements(regs[lane, j]) == (stored(j, c, r), stored(j, c + 1, r)), (lane, j)
        assert not regs[lane, num:].any()


def test_ldmatrix_hand_computed(ldmatrix_out):
    # lane 5 of x4: row 1, cols 2-3 of each matrix; lane 0 of matrix 0 reads row 7 (given by lane 0).
    assert elements(ldmatrix_out[2, 5, 0]) == (8 * 6 + 2, 8 * 6 + 3)
    assert elements(ldmatrix_out[2, 5, 3]) == (8 * 30 + 2, 8 * 30 + 3)
    # lane 5 of x1.trans: (row 1, cols 2, 3) of the transpose = stored (row 2, col 1), (row 3, col 1),
    # whose addresses lanes 2 and 3 gave: tile rows 5 and 4.
    assert elements(ldmatrix_out[3, 5, 0]) == (8 * 5 + 1, 8 * 4 + 1)


# ------------------------------------------------------------------------------------------------
# mma.sync
# ------------------------------------------------------------------------------------------------
MMA = r"""
// Per lane: a[4] b[2] registers and c (4 floats or 2 half2 registers) in, d out. K = 8 uses the
// first 2 / 1 registers.
__global__ void mma(const unsigned* a, const unsigned* b, const float* c32, const unsigned* c16,
                    float* d32_k8, float* d32_k16, unsigned* d16_k8, unsigned* d16_k16) {
    int l = threadIdx.x;
    const unsigned a4[4] = {a[l * 4], a[l * 4 + 1], a[l * 4 + 2], a[l * 4 + 3]};
    const unsigned a2[2] = {a[l * 4], a[l * 4 + 1]};
    const unsigned b2[2] = {b[l * 2], b[l * 2 + 1]};
    const unsigned b1[1] = {b[l * 2]};
    const float c[4] = {c32[l * 4], c32[l * 4 + 1], c32[l * 4 + 2], c32[l * 4 + 3]};
    const unsigned ch[2] = {c16[l * 2], c16[l * 2 + 1]};
    float d[4];
    unsigned dh[2];
    emu::mma_m16n8k8_f32(d, a2, b1, c);   for (int i = 0; i < 4; ++i) d32_k8[l * 4 + i] = d[i];
    emu::mma_m16n8k16_f32(d, a4, b2, c);  for (int i = 0; i < 4; ++i) d32_k16[l * 4 + i] = d[i];
    emu::mma_m16n8k8_f16(dh, a2, b1, ch);  for (int i = 0; i < 2; ++i) d16_k8[l * 2 + i] = dh[i];
    emu::mma_m16n8k16_f16(dh, a4, b2, ch); for (int i = 0; i < 2; ++i) d16_k16[l * 2 + i] = dh[i];
}
"""


def run_mma(A16: np.ndarray, B16: np.ndarray, C: np.ndarray):
    """A16: 16 x 16, B16: 16 x 8 (k8 uses the first 8 columns / rows), C: 16 x 8.
    Returns D for (k8, f32), (k16, f32), (k8, f16), (k16, f16) as 16 x 8 float arrays."""
    a = np.zeros((32, 4), np.uint32)
    b = np.zeros((32, 2), np.uint32)
    c32 = np.zeros((32, 4), np.float32)
    c16 = np.zeros((32, 2), np.uint32)
    for lane in range(32):
        a[lane] = a_fragment(A16, lane)
        b[lane] = b_fragment(B16, lane)
        vals = [C[p] for p in c_positions(lane)]
        c32[lane] = vals
        c16[lane] = [pack_half2(vals[0], vals[1]), pack_half2(vals[2], vals[3])]
    # the k8 fragments are the first registers of the k16 ones for a, b (same rows / k 0..7)
    assert all(a_fragment(A16[:, :8], lane) == list(a[lane, :2]) for lane in range(32))
    outs = [np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32),
            np.zeros((32, 2), np.uint32), np.zeros((32, 2), np.uint32)]
    run(MMA, "mma", 1, 32, [a, b, c32, c16, *outs])
    results = []
    for out in outs:
        D = np.full((16, 8), np.nan)
        for lane in range(32):
            vals = list(out[lane]) if out.dtype == np.float32 else [*unpack_half2(int(out[lane, 0])), *unpack_half2(int(out[lane, 1]))]
            for (r, c), v in zip(c_positions(lane), vals):
                D[r, c] = v
        results.append(D)
    return results


def test_mma_identity_a_returns_b_plus_c():
    A = np.eye(16, dtype=np.float16)
    B = np.arange(16 * 8).reshape(16, 8).astype(np.float16)  # B[k, n] = 8k + n
    C = np.full((16, 8), 0.5, np.float32)
    d_k8, d_k16, h_k8, h_k16 = run_mma(A, B, C)
    # Rows 0..7 pick B's rows; for k8, rows 8..15 of A are zero in the first 8 columns.
    want16 = B.astype(np.float64) + 0.5
    want8 = np.vstack([B[:8].astype(np.float64), np.zeros((8, 8))]) + 0.5
    assert np.array_equal(d_k16, want16)
    assert np.array_equal(d_k8, want8)
    assert np.array_equal(h_k16, want16)
    assert np.array_equal(h_k8, want8)
    # Lane 5 (g = 1, t = 1) holds D[1][2], D[1][3], D[9][2], D[9][3] = 10.5, 11.5, 74.5, 75.5
    assert [d_k16[p] for p in c_positions(5)] == [10.5, 11.5, 74.5, 75.5]


def test_mma_each_output_names_its_inputs():
    # A[m, k] = 1 only at k = m // 2 + 8 * (m % 2) (a permutation of k for the 16 rows), so D row m
    # is B row k: a layout bug swaps rows visibly.
    A = np.zeros((16, 16), np.float16)
    ks = [m // 2 + 8 * (m % 2) for m in range(16)]
    for m, k in enumerate(ks):
        A[m, k] = 1
    B = (np.arange(16 * 8).reshape(16, 8) + 1).astype(np.float16)
    C = np.zeros((16, 8), np.float32)
    _, d_k16, _, h_k16 = run_mma(A, B, C)
    want = B[ks].astype(np.float64)
    assert np.array_equal(d_k16, want)
    assert np.array_equal(h_k16, want)


def test_mma_random_against_numpy():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    d_k8, d_k16, h_k8, h_k16 = run_mma(A, B, C)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    ref16 = A64 @ B64 + C
    ref8 = A64[:, :8] @ B64[:8] + C
    np.testing.assert_allclose(d_k16, ref16, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_k8, ref8, rtol=1e-5, atol=1e-5)
    C16 = C.astype(np.float16).astype(np.float64)  # f16 accumulators: C rounded to half on the way in
    np.testing.assert_allclose(h_k16, A64 @ B64 + C16, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(h_k8, A64[:, :8] @ B64[:8] + C16, rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------------------------------------
# TF32: common.cuh's tf32_round (cvt.rna.tf32.f32 in integer instructions) and mma.m16n8k8 with TF32 inputs
# ------------------------------------------------------------------------------------------------
TF32 = kernel_path("kernels/common.cuh").read_text().replace("#pragma once", "") + r"""
__global__ void tf32(const float* x, unsigned* rounded, const unsigned* a, const unsigned* b, const float* c, float* d) {
    int l = threadIdx.x;
    for (int i = l; i < 64; i += 32) rounded[i] = tf32_round(x[i]);
    const unsigned a4[4] = {a[l * 4], a[l * 4 + 1], a[l * 4 + 2], a[l * 4 + 3]};
    const unsigned b2[2] = {b[l * 2], b[l * 2 + 1]};
    const float c4[4] = {c[l * 4], c[l * 4 + 1], c[l * 4 + 2], c[l * 4 + 3]};
    float d4[4];
    emu::mma_m16n8k8_tf32(d4, a4, b2, c4);
    for (int i = 0; i < 4; ++i) d[l * 4 + i] = d4[i];
}
"""


def tf32_a_positions(lane: int) -> list[tuple[int, int]]:
    """(row, k) of a0..a3 for TF32 inputs: rows g, g + 8, g, g + 8; k t, t, t + 4, t + 4."""
    g, t = lane >> 2, lane % 4
    return [(g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)]


def tf32_b_positions(lane: int) -> list[tuple[int, int]]:
    """(k, col) of b0, b1: k t and t + 4, column g."""
    g, t = lane >> 2, lane % 4
    return [(t, g), (t + 4, g)]


def run_tf32(x: np.ndarray, A: np.ndarray, B: np.ndarray, C: np.ndarray):
    """tf32_round of the 64 floats x (as uint32 bits), and D = A (16 x 8) B (8 x 8) + C (16 x 8)."""
    a = np.array([[A[p] for p in tf32_a_positions(l)] for l in range(32)], np.float32).view(np.uint32)
    b = np.array([[B[p] for p in tf32_b_positions(l)] for l in range(32)], np.float32).view(np.uint32)
    c = np.array([[C[p] for p in c_positions(l)] for l in range(32)], np.float32)
    rounded, d = np.zeros(64, np.uint32), np.zeros((32, 4), np.float32)
    run(TF32, "tf32", 1, 32, [x.astype(np.float32), rounded, a, b, c, d])
    D = np.full((16, 8), np.nan)
    for lane in range(32):
        for p, v in zip(c_positions(lane), d[lane]):
            D[p] = v
    return rounded, D


def tf32_reference(x: np.ndarray) -> np.ndarray:
    """Round to 10 mantissa bits, ties away from zero, in float64 arithmetic (independent of the bits trick)."""
    x = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.abs(x)))
        ulp = 2.0 ** (e - 10)
        r = np.sign(x) * np.floor(np.abs(x) / ulp + 0.5) * ulp
    return np.where(np.isfinite(x) & (x != 0), r, x)


def test_tf32_round_is_cvt_rna_nearest_ties_away():
    one_ulp = 2.0 ** -10
    x = np.zeros(64, np.float32)
    x[:8] = [1 + one_ulp / 2, 1 + one_ulp / 4, 1 + 3 * one_ulp / 4, -(1 + one_ulp / 2),  # tie up, down, up, tie away
             2 - one_ulp / 4, np.inf, -np.inf, 0.0]                                       # carry into the exponent
    x[8:] = np.random.default_rng(3).standard_normal(56).astype(np.float32) * 10.0 ** np.arange(-28, 28)
    rounded, _ = run_tf32(x, np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((16, 8)))
    got = rounded.view(np.float32)
    assert (rounded & 0x1FFF == 0).all(), "a TF32 value has its low 13 bits zero"
    assert list(got[:8]) == [1 + one_ulp, 1, 1 + one_ulp, -(1 + one_ulp), 2, np.inf, -np.inf, 0]
    np.testing.assert_array_equal(got[8:], tf32_reference(x[8:]).astype(np.float32))
    nans = np.array([0x7FC00000, 0x7FFFFFFF] * 32, np.uint32).view(np.float32)  # NumPy's NaN, the GPU's NaN
    rounded = run_tf32(nans, np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((16, 8)))[0]
    assert list(rounded[:2]) == [0x7FC00000, 0x80000000], "documented: the GPU's NaN wraps to -0 (callers carry NaN)"


def test_tf32_mma_each_output_names_its_inputs():
    # A[m, k] = 1 only at k = (m + m // 8) % 8: D row m is B row k, so a swapped register shows.
    A = np.zeros((16, 8))
    ks = [(m + m // 8) % 8 for m in range(16)]
    for m, k in enumerate(ks):
        A[m, k] = 1
    B = np.arange(1, 65, dtype=np.float64).reshape(8, 8)
    C = np.full((16, 8), 0.25)
    _, D = run_tf32(np.zeros(64, np.float32), A, B, C)
    assert np.array_equal(D, B[ks] + 0.25)


def test_tf32_mma_drops_the_low_bits_and_accumulates_in_fp32():
    rng = np.random.default_rng(4)
    A, B, C = rng.standard_normal((16, 8)), rng.standard_normal((8, 8)), rng.standard_normal((16, 8))
    _, D = run_tf32(np.zeros(64, np.float32), A, B, C)
    truncate = lambda m: (m.astype(np.float32).view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
    want = truncate(A) @ truncate(B) + C.astype(np.float32)
    np.testing.assert_allclose(D, want, rtol=1e-6, atol=1e-6)
    assert np.abs(D - (A @ B + C)).max() > 1e-4, "full fp32 inputs would be a different instruction"


# ------------------------------------------------------------------------------------------------
# cp.async
# ------------------------------------------------------------------------------------------------
CP_ASYNC = r"""
// Thread t copies 16 bytes (4 floats) of src into its own slot of shared memory with src_bytes
// sizes[t]; a second group copies into a second slot. Snapshots: before any wait, after
// wait_group<1> (first group done), after wait_group<0> (both done).
__global__ void cpa(const float* src, const int* sizes, float* snap) {
    __shared__ __align__(16) float s[2][32][4];
    int t = threadIdx.x;
    for (int i = 0; i < 4; ++i) { s[0][t][i] = -1.f; s[1][t][i] = -1.f; }
    emu::cp_async_16(&s[0][t][0], &src[t * 4], sizes[t]);
    emu::cp_async_commit();
    emu::cp_async_16(&s[1][t][0], &src[128 + t * 4], 16);
    emu::cp_async_commit();
    float* o = snap + t * 8;
    for (int i = 0; i < 4; ++i) { o[i] = s[0][t][i]; o[4 + i] = s[1][t][i]; }
    emu::cp_async_wait_group<1>();
    o += 256;
    for (int i = 0; i < 4; ++i) { o[i] = s[0][t][i]; o[4 + i] = s[1][t][i]; }
    emu::cp_async_wait_group<0>();
    o += 256;
    for (int i = 0; i < 4; ++i) { o[i] = s[0][t][i]; o[4 + i] = s[1][t][i]; }
}
"""


def test_cp_async_zero_fill_and_wait_group():
    src = np.arange(256, dtype=np.float32) + 1
    sizes = np.array([16, 12, 8, 4, 0] * 6 + [16, 16], np.int32)
    snap = np.zeros((3, 32, 2, 4), np.float32)
    run(CP_ASYNC, "cpa", 1, 32, [src, sizes, snap])
    before, after1, after0 = snap
    assert (before == -1).all(), "data must be absent before the wait"
    for t in range(32):
        n = sizes[t] // 4
        want = np.concatenate([src[t * 4:t * 4 + n], np.zeros(4 - n, np.float32)])
        assert np.array_equal(after1[t, 0], want), t        # first group complete, zero-filled
        assert (after1[t, 1] == -1).all(), t                # second group still pending
        assert np.array_equal(after0[t, 0], want), t
        assert np.array_equal(after0[t, 1], src[128 + t * 4:128 + t * 4 + 4]), t


CP_ASYNC_WAIT_ALL = r"""
__global__ void cpa_all(const float* src, float* out) {
    __shared__ __align__(16) float s[32][4];
    int t = threadIdx.x;
    emu::cp_async_16(&s[t][0], &src[t * 4], 16);   // never committed: wait_all commits it
    emu::cp_async_wait_all();
    __syncthreads();
    for (int i = 0; i < 4; ++i) out[t * 4 + i] = s[(t + 1) % 32][i];
}
"""


def test_cp_async_wait_all_then_barrier_shares_data():
    src = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    run(CP_ASYNC_WAIT_ALL, "cpa_all", 1, 32, [src, out])
    assert np.array_equal(out, np.roll(src.reshape(32, 4), -1, axis=0).ravel())


def test_tensor_core_gemm_kernel_file():
    """cp.async + ldmatrix (.trans) + mma m16n8k16 in a complete 128 x 128 x 32 block-tiled GEMM."""
    from pathlib import Path
    source = (Path(__file__).parent / "kernels" / "hgemm_mma.cu").read_text()
    module = cpu.compile_kernel(source, "hgemm_mma<128, 128, 32>", label="hgemm_mma")
    rng = np.random.default_rng(2)
    M, N, K = 256, 128, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = np.zeros((M, N), np.float16)
    cpu.launch(module, (N // 128, M // 128), 128, [M, N, K, A, B, C])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C.astype(np.float64), ref, rtol=1e-3, atol=1e-2)


def test_tf32_round_is_two_instructions_where_cvt_rna_is_four():
    """Chapter 8 / fused step 05: on sm_90 ptxas expands cvt.rna.tf32.f32 into four instructions;
    common.cuh's tf32_round is two (an add and a mask)."""
    from gemmlab import nvrtc
    if not nvrtc.available() or nvrtc.nvdisasm_path() is None:
        pytest.skip("needs NVRTC and nvdisasm")
    common = kernel_path("kernels/common.cuh").read_text().replace("#pragma once", "")
    body = {"cvt": 'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x[threadIdx.x]));',
            "round": "r = tf32_round(x[threadIdx.x]);"}
    counts = {}
    for name, line in body.items():
        src = common + f"__global__ void k(const float* x, unsigned* y) {{ u32 r; {line} y[threadIdx.x] = r; }}\n"
        ops = nvrtc.opcodes(nvrtc.sass(nvrtc.compile(src, "k", "sm_90", label=name)))
        counts[name] = sum(op != "NOP" for op in ops)  # the padding after EXIT differs
    assert counts["cvt"] - counts["round"] == 2


# ---------------------------------------------------------------------------------------------
# grid_barrier (common.cuh): one word, release add, acquire poll
# ---------------------------------------------------------------------------------------------
def test_grid_barrier_orders_writes_and_leaves_its_word_reset():
    """Blocks write, pass the barrier, read every other block's write; after seven barriers the word's top
    bit has flipped seven times (7 x 2^31 mod 2^32 = 2^31) and its low bits are back at zero."""
    source = kernel_path("kernels/common.cuh").read_text().replace("#pragma once", "") + r'''
    extern "C" __global__ void barrier_probe(int rounds, int* slots, int* seen, u32* sync) {
        for (int r = 0; r < rounds; ++r) {
            if (threadIdx.x == 0) slots[blockIdx.x] = 100 * r + blockIdx.x + 1;
            grid_barrier(sync);
            int sum = 0;
            for (int b = 0; b < gridDim.x; ++b) sum += slots[b];
            if (threadIdx.x == 0) seen[r * gridDim.x + blockIdx.x] = sum;
            grid_barrier(sync);  // nobody overwrites a slot before every block has read it
        }
        grid_barrier(sync);  // a seventh barrier: the top bit ends flipped
    }'''
    from gemmlab import fusion
    grid = min(fusion.cpu_workers(), 4)  # every block resident: one emulator worker thread each
    slots, seen, sync = np.zeros(grid, np.int32), np.zeros(3 * grid, np.int32), np.zeros(2, np.uint32)
    run(source, "barrier_probe", (grid, 1, 1), (64, 1, 1), [np.int32(3), slots, seen, sync])
    for r in range(3):
        assert (seen[r * grid:(r + 1) * grid] == sum(100 * r + b + 1 for b in range(grid))).all()
    assert int(sync[0]) == 0x80000000


def test_named_barriers_let_groups_wait_for_their_own_warps():
    """bar.sync id, count: two groups of two warps, each writing then reading only its own slots behind its
    own barrier (ids 1 and 2); a count that is not whole warps is refused with the rule."""
    source = kernel_path("kernels/common.cuh").read_text().replace("#pragma once", "") + r'''
    extern "C" __global__ void groups(int* out) {
        __shared__ int slot[128];
        const int group = threadIdx.x / 64, tid = threadIdx.x % 64;
        for (int r = 0; r < 3; ++r) {
            slot[threadIdx.x] = 1000 * r + threadIdx.x;
            bar_sync(1 + group, 64);
            out[r * 128 + threadIdx.x] = slot[group * 64 + (tid + 1) % 64];  // a neighbour of the same group
            bar_sync(1 + group, 64);
        }
    }
    extern "C" __global__ void bad_count(int* out) { bar_sync(1, 48); out[threadIdx.x] = 1; }'''
    out = np.zeros(3 * 128, np.int32)
    run(source, "groups", (1, 1, 1), (128, 1, 1), [out])
    tid = np.arange(128)
    want = np.concatenate([1000 * r + (tid // 64) * 64 + (tid % 64 + 1) % 64 for r in range(3)])
    assert (out == want).all()
    from gemmlab.errors import InputError
    with pytest.raises(InputError, match="multiple of 32"):
        run(source, "bad_count", (1, 1, 1), (64, 1, 1), [np.zeros(64, np.int32)])


def test_a_named_barrier_short_of_threads_is_a_named_deadlock():
    source = kernel_path("kernels/common.cuh").read_text().replace("#pragma once", "") + r'''
    extern "C" __global__ void short_group(int* out) {
        if (threadIdx.x < 32) bar_sync(3, 64);  // 64 counted, one warp comes
        out[threadIdx.x] = 1;
    }'''
    from gemmlab.errors import KernelError
    with pytest.raises(KernelError, match=r"named barrier \(bar.sync id, count\).*32 threads wait at a named barrier"):
        run(source, "short_group", (1, 1, 1), (64, 1, 1), [np.zeros(64, np.int32)])
