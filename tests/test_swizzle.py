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
