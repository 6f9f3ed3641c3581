"""gemmlab.layouts against the PTX ISA figures; the ldmatrix -> mma path of hgemm/01 in numpy."""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab.chapters.layouts import (
    WARP_SIZE,
    elements_per_lane,
    ldmatrix_fragment,
    ldmatrix_row_provider,
    mma_fragment,
    mma_operand_shape,
)

SHAPES = ["m16n8k8", "m16n8k16"]
OPERANDS = ["a", "b", "c"]


# Spot checks read off the PTX ISA figures ("Matrix Fragments for mma.m16n8k8",
# "... mma.m16n8k16 with floating point type", "ldmatrix"): (lane, i) -> (row, col).
SPOT = {
    ("m16n8k8", "a"): {(0, 0): (0, 0), (0, 1): (0, 1), (5, 3): (9, 3), (31, 3): (15, 7)},
    ("m16n8k8", "b"): {(0, 1): (1, 0), (5, 0): (2, 1), (31, 0): (6, 7)},
    ("m16n8k8", "c"): {(4, 2): (9, 0), (31, 3): (15, 7), (2, 1): (0, 5)},
    ("m16n8k16", "a"): {(0, 4): (0, 8), (6, 5): (1, 13), (31, 7): (15, 15), (3, 2): (8, 6)},
    ("m16n8k16", "b"): {(0, 2): (8, 0), (31, 3): (15, 7), (9, 1): (3, 2)},
    ("m16n8k16", "c"): {(4, 2): (9, 0), (31, 3): (15, 7)},
}


@pytest.mark.parametrize("key", sorted(SPOT))
def test_mma_spot_checks(key):
    shape, operand = key
    frag = mma_fragment(shape, operand)
    for lane_elem, coord in SPOT[key].items():
        assert frag[lane_elem] == coord, (shape, operand, lane_elem)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("operand", OPERANDS)
@pytest.mark.parametrize("accum", ["f32", "f16"])
def test_mma_fragment_is_a_bijection(shape, operand, accum):
    frag = mma_fragment(shape, operand, accum)
    rows, cols = mma_operand_shape(shape, operand)
    per_lane = elements_per_lane(shape, operand)
    assert set(frag) == {(lane, i) for lane in range(WARP_SIZE) for i in range(per_lane)}
    assert sorted(frag.values()) == [(r, c) for r in range(rows) for c in range(cols)]


def test_mma_fragment_accum_only_changes_packing():
    for shape in SHAPES:
        assert mma_fragment(shape, "c", "f16") == mma_fragment(shape, "c", "f32")


def test_mma_fragment_rejects_bad_arguments():
    with pytest.raises(ValueError, match="m16n8k16"):
        mma_fragment("m16n16k16", "a")
    with pytest.raises(ValueError, match="operand"):
        mma_fragment("m16n8k8", "d")
    with pytest.raises(ValueError, match="accum"):
        mma_fragment("m16n8k8", "c", "bf16")
    with pytest.raises(ValueError, match="1, 2 or 4"):
        ldmatrix_fragment(3)


def test_ldmatrix_spot_checks():
    plain, trans = ldmatrix_fragment(4, False), ldmatrix_fragment(4, True)
    assert plain[(0, 0, 0)] == (0, 0, 0)
    assert plain[(5, 1, 1)] == (1, 1, 3)  # lane 5: row 5 // 4 = 1, columns 2 and 3
    assert trans[(5, 1, 1)] == (1, 3, 1)  # .trans: the same element of the transpose
    assert plain[(31, 3, 1)] == (3, 7, 7)
    assert ldmatrix_row_provider(4)[13] == (1, 5)
    assert sorted(ldmatrix_row_provider(1)) == list(range(8))
    assert sorted(ldmatrix_row_provider(2)) == list(range(16))


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragment_is_a_bijection(num, trans):
    frag = ldmatrix_fragment(num, trans)
    assert len(frag) == WARP_SIZE * num * 2
    want = [(j, r, c) for j in range(num) for r in range(8) for c in range(8)]
    assert sorted(frag.values()) == want
    providers = ldmatrix_row_provider(num)
    assert sorted(providers.values()) == [(j, r) for j in range(num) for r in range(8)]


def test_ldmatrix_non_trans_matches_mma_accumulator_shape():
    # Register j of ldmatrix holds the same (row, col) pattern as an 8x8 quarter of C/D.
    frag, c = ldmatrix_fragment(1), mma_fragment("m16n8k8", "c")
    for lane in range(WARP_SIZE):
        for e in range(2):
            assert frag[(lane, 0, e)][1:] == c[(lane, e)]


# --- numpy simulations -------------------------------------------------------------------------


def simulate_ldmatrix(tile: np.ndarray, num: int, trans: bool, lane_address) -> np.ndarray:
    """regs[lane, j, e] after ldmatrix.xN, where lane L points at tile[lane_address(L)] (8 wide)."""
    rows = {}
    for lane, (j, r) in ldmatrix_row_provider(num).items():
        r0, c0 = lane_address(lane)
        rows[(j, r)] = tile[r0, c0:c0 + 8]
    regs = np.zeros((WARP_SIZE, num, 2), tile.dtype)
    for (lane, j, e), (jj, r, c) in ldmatrix_fragment(num, trans).items():
        regs[lane, j, e] = rows[(jj, r)][c]
    return regs


def simulate_mma(shape: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """d[lane, i] of one mma.sync, each lane fetching its inputs from the lanes that hold them."""
    fa, fb, fc = (mma_fragment(shape, op) for op in "abc")
    m, n, k = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16)}[shape]
    A = np.zeros((m, k))
    B = np.zeros((k, n))
    for (lane, i), (r, col) in fa.items():
        A[r, col] = a[lane, i]
    for (lane, i), (r, col) in fb.items():
        B[r, col] = b[lane, i]
    d = np.zeros_like(c, dtype=np.float64)
    for (lane, i), (r, col) in fc.items():
        d[lane, i] = A[r, :] @ B[:, col] + c[lane, i]
    return d


def scatter(shape, operand, matrix):
    """The per-lane fragment of `matrix` for `operand`: frag[lane, i]."""
    frag = mma_fragment(shape, operand)
    out = np.zeros((WARP_SIZE, elements_per_lane(shape, operand)))
    for (lane, i), (r, c) in frag.items():
        out[lane, i] = matrix[r, c]
    return out


def gather(shape, frag_values):
    """The 16 x 8 C/D matrix from per-lane accumulators."""
    out = np.full((16, 8), np.nan)
    for (lane, i), (r, c) in mma_fragment(shape, "c").items():
        out[r, c] = frag_values[lane, i]
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_simulated_mma_equals_matmul(shape):
    rng = np.random.default_rng(0)
    m, n, k = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16)}[shape]
    A, B, C = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    d = simulate_mma(shape, scatter(shape, "a", A), scatter(shape, "b", B), scatter(shape, "c", C))
    np.testing.assert_allclose(gather(shape, d), A @ B + C, rtol=1e-12)


# hgemm/01's addressing: lane l points at row l % 16, column 8 * (l // 16) of a 16x16 piece.
def kernel_lane_address(lane):
    return lane % 16, 8 * (lane // 16)


def test_ldmatrix_x4_gives_mma_a_fragments():
    tile = np.arange(256.0).reshape(16, 16)  # sA piece: rows m, columns k
    regs = simulate_ldmatrix(tile, 4, False, kernel_lane_address)
    a16 = scatter("m16n8k16", "a", tile)
    for lane in range(WARP_SIZE):
        # all four registers, in order, are the m16n8k16 A fragment
        np.testing.assert_array_equal(regs[lane].reshape(-1), a16[lane])
        for kh in range(2):  # registers {2kh, 2kh+1} are the m16n8k8 A fragment of k half kh
            want = scatter("m16n8k8", "a", tile[:, 8 * kh:8 * kh + 8])[lane]
            np.testing.assert_array_equal(regs[lane, 2 * kh:2 * kh + 2].reshape(-1), want)


def test_ldmatrix_x4_trans_gives_mma_b_fragments():
    tile = np.arange(256.0).reshape(16, 16)  # sB piece: rows k, columns n (N-major)
    regs = simulate_ldmatrix(tile, 4, True, kernel_lane_address)
    for lane in range(WARP_SIZE):
        for j in range(4):  # register j: n tile j // 2, k half j % 2
            nt, kh = j // 2, j % 2
            want = scatter("m16n8k8", "b", tile[8 * kh:8 * kh + 8, 8 * nt:8 * nt + 8])[lane]
            np.testing.assert_array_equal(regs[lane, j], want)
        for nt in range(2):  # registers {2nt, 2nt+1}: the m16n8k16 B fragment of n tile nt
            want = scatter("m16n8k16", "b", tile[:, 8 * nt:8 * nt + 8])[lane]
            np.testing.assert_array_equal(regs[lane, 2 * nt:2 * nt + 2].reshape(-1), want)


def test_warp_tile_pipeline_equals_matmul():
    """One 16x16x16 step of hgemm/01 end to end: ldmatrix, two k halves of m16n8k8, epilogue."""
    rng = np.random.default_rng(1)
    sA, sB = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    rA = simulate_ldmatrix(sA, 4, False, kernel_lane_address)  # [lane, reg, half]
    rB = simulate_ldmatrix(sB, 4, True, kernel_lane_address)
    C = np.zeros((16, 16))
    for nt in range(2):
        acc = np.zeros((WARP_SIZE, 4))
        for kh in range(2):
            a = rA[:, 2 * kh:2 * kh + 2].reshape(WARP_SIZE, 4)
            b = rB[:, 2 * nt + kh]
            acc = simulate_mma("m16n8k8", a, b, acc)
        C[:, 8 * nt:8 * nt + 8] = gather("m16n8k8", acc)
    np.testing.assert_allclose(C, sA @ sB, rtol=1e-12, atol=1e-12)
