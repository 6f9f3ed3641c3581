"""sgemm step 12 (3xTF32 on the tensor cores): fp32 accuracy where FFMA has it, and Inf and NaN as FFMA
gives them. CPU emulator; the GPU lane runs the agreement test on the same step."""
import numpy as np
import pytest

import gemmlab
from gemmlab.measure.check import compare, make_inputs
from gemmlab.errors import ConfigError

STEP = "sgemm/12_tf32x3"


def test_long_k_stays_within_fp32_bound_where_plain_tf32_does_not():
    a, b = make_inputs("random", 48, 40, 1536, np.float32, seed=5)
    got = gemmlab.step(STEP, backend="cpu", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)(a, b)
    assert compare(got, a, b, "float32")[1].max() < 0.05

    def tf32(x):  # what one TF32 mma per product would see: the low 13 mantissa bits dropped
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    plain = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)).astype(np.float32)
    assert compare(plain, a, b, "float32")[1].max() > 0.1  # the split is what buys the accuracy


def test_inf_gives_inf_in_its_row_and_nan_propagates():
    a = np.ones((20, 24), np.float32)
    b = np.ones((24, 16), np.float32)
    a[3, 5] = np.inf
    b[7, 2] = np.nan
    got = gemmlab.step(STEP, backend="cpu", BLOCK_M=32, BLOCK_N=32, WARP_M=16, WARP_N=16, BLOCK_K=8)(a, b)
    assert np.isposinf(np.delete(got[3], 2)).all()     # as FFMA: the epilogue recomputes the NaN sums in fp32
    assert np.isnan(got[:, 2]).all()                    # NaN in B fills its column
    ok = np.ones_like(got, bool)
    ok[3] = False
    ok[:, 2] = False
    assert (got[ok] == 24.0).all()


def test_register_hungry_warp_tiles_are_explained():
    with pytest.raises(ConfigError, match="320 > 192"):
        gemmlab.instance(STEP, WARP_M=64, WARP_N=64)
    with pytest.raises(ConfigError, match="227 KB"):
        gemmlab.instance(STEP, BLOCK_M=256, BLOCK_N=256, WARP_N=64, WARP_M=32, NUM_STAGES=4)
