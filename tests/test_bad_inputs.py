"""Bad input gets a clear error before launch, and the next launch in the same process works."""
import numpy as np
import pytest

import gemmlab
from gemmlab import errors

BLOCK = 8


@pytest.fixture(scope="module")
def kernel():
    return gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=BLOCK)


def good_call_works(kernel):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 5), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b)


@pytest.mark.parametrize("make, match", [
    (lambda: (np.ones((3, 4)), np.ones((4, 5), np.float32)), "float32 inputs but A is float64"),
    (lambda: (np.ones((3, 4), np.float32), np.ones((4, 5), np.float16)), "B is float16"),
    (lambda: (np.ones((3, 4), np.float32), np.ones((3, 5), np.float32)), "shapes do not match"),
    (lambda: (np.ones((4, 3), np.float32).T, np.ones((4, 5), np.float32)), "not C-contiguous"),
    (lambda: (np.ones((3, 4, 1), np.float32), np.ones((4, 5), np.float32)), "2-D"),
    (lambda: ([[1.0]], np.ones((1, 1), np.float32)), "NumPy or CuPy array"),
])
def test_bad_arrays_are_input_errors(kernel, make, match):
    a, b = make()
    with pytest.raises(errors.InputError, match=match):
        kernel(a, b)
    good_call_works(kernel)


@pytest.mark.parametrize("m, n, k", [(0, 5, 4), (3, 0, 4), (3, 5, 0)])
def test_zero_size_dimensions_give_the_empty_or_zero_product(kernel, m, n, k):
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    c = kernel(a, b)
    assert c.shape == (m, n) and not c.any()


def test_nan_and_inf_inputs_propagate(kernel):
    a = np.ones((5, 6), np.float32)
    b = np.ones((6, 7), np.float32)
    a[2, 3], b[1, 4] = np.nan, np.inf
    c = kernel(a, b)
    assert np.isnan(c[2]).all()  # NaN times anything spreads along its row
    assert np.isinf(c[[0, 1, 3, 4], 4]).all()
    good_call_works(kernel)


def test_impossible_tile_is_a_config_error_then_next_launch_works(kernel):
    with pytest.raises(errors.ConfigError, match="1024"):
        gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=64)
    good_call_works(kernel)


def test_compile_error_in_an_edited_kernel_then_next_launch_works(kernel):
    text = gemmlab.source.kernel_path(kernel.step.file).read_text()
    edited = text.replace("__syncthreads();", "__syncthreads()", 1)  # a reader drops a semicolon
    with pytest.raises(errors.CompileError, match="03_smem_tiling.cu"):
        gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=edited, BLOCK=BLOCK)
    good_call_works(kernel)


def test_a_kernel_that_writes_out_of_bounds_is_a_kernel_error_then_next_launch_works(kernel):
    broken = _oob_kernel()
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=broken, BLOCK=BLOCK)
    with pytest.raises(errors.KernelError):
        k(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
    good_call_works(kernel)


def _oob_kernel() -> str:
    return ("#include \"common.cuh\"\n"
            "template <int BLOCK> __global__ void sgemm_smem_tiling(int M, int N, int K, const float* A,\n"
            "                                                    const float* B, float* C) {\n"
            "    C[(size_t)M * N + 1024 * 1024] = 1.f;  // far past the end of C\n"
            "}\n")


def test_a_divergent_barrier_is_a_kernel_error_then_next_launch_works(kernel):
    src = ("#include \"common.cuh\"\n"
           "template <int BLOCK> __global__ void sgemm_smem_tiling(int M, int N, int K, const float* A,\n"
           "                                                    const float* B, float* C) {\n"
           "    if (threadIdx.x % 2 == 0) __syncthreads();  // only half the block arrives\n"
           "    C[0] = 1.f;\n"
           "}\n")
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=src, BLOCK=BLOCK)
    with pytest.raises(errors.KernelError, match="4"):
        k(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
    good_call_works(kernel)
