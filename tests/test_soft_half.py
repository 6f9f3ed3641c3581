"""The emulator's software fp16 (for compilers without _Float16, like Colab's g++ 11) rounds as IEEE does."""
import numpy as np
import pytest

import gemmlab
from gemmlab import cpu

CONVERT = r'''
#include "common.cuh"
template <int UNUSED> __global__ void convert(int n, const float* x, float* back, unsigned short* bits) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        __half h = __float2half(x[i]);
        back[i] = __half2float(h);
        bits[i] = __half_as_ushort(h);
    }
}
'''


@pytest.fixture
def soft_half(monkeypatch):
    monkeypatch.setenv("GEMMLAB_CPU_FLAGS", "-DGEMMLAB_SOFT_HALF")
    monkeypatch.setattr(gemmlab.kernel, "_modules", {})  # compile afresh, with the flag


def special_and_random_floats() -> np.ndarray:
    rng = np.random.default_rng(3)
    edges = [0.0, -0.0, 1.0, 65504.0, 65520.0, 65519.99, 1e9, -1e9, np.inf, -np.inf, 2.0**-24, 2.0**-25,
             3 * 2.0**-26, 2.0**-14, 2.0**-14 - 2.0**-25, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 6e-8, -5.96e-8]
    ties = (np.arange(1, 2048, dtype=np.float32) + 0.5) * 2.0**-10  # exact halfway points
    return np.concatenate([np.array(edges, np.float32), ties, rng.standard_normal(4000).astype(np.float32) * 100,
                           (rng.standard_normal(2000) * 1e-5).astype(np.float32)])


def test_software_half_matches_numpy_float16_bit_for_bit(soft_half):
    from gemmlab.runtime.source import assemble

    x = special_and_random_floats()
    module = cpu.compile_kernel(assemble("sgemm/01_naive.cu", CONVERT), "convert<0>", label="convert")
    back, bits = np.zeros_like(x), np.zeros(x.size, np.uint16)
    cpu.launch(module, (1, 1, 1), (128, 1, 1), [np.int32(x.size), x, back, bits])
    with np.errstate(over="ignore"):  # 1e9 -> inf is what we want
        want = x.astype(np.float16)
    assert np.array_equal(bits, want.view(np.uint16))
    assert np.array_equal(back, want.astype(np.float32))
    nan = np.array([np.nan], np.float32)
    cpu.launch(module, (1, 1, 1), (32, 1, 1), [np.int32(1), nan, back[:1], bits[:1]])
    assert np.isnan(back[0])


def test_tensor_core_step_verifies_with_the_software_half(soft_half):
    report = gemmlab.verify(gemmlab.step("hgemm/01_mma_tiling", backend="cpu", BLOCK_M=64, BLOCK_N=64,
                                         WARP_M=32, WARP_N=32))
    assert report.passed
