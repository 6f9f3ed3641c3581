"""The CPU emulator (gemmlab/runtime/cpu.py + gemmlab/runtime/emulator/): CUDA semantics, launches and errors."""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab import cpu
from gemmlab.errors import CompileError, ConfigError, InputError, KernelError

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the CPU emulator needs g++")


def run(source: str, name: str, grid, block, args: list, shared_mem: int = 0, timeout: float = 60):
    cpu.launch(cpu.compile_kernel(source, name, label=name), grid, block, args, shared_mem=shared_mem,
               timeout=timeout)
    return args


# ------------------------------------------------------------------------------------------------
# Threads, warps, barriers, shared memory
# ------------------------------------------------------------------------------------------------
INDICES = r"""
__global__ void indices(unsigned* out) {
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned* o = out + (block * blockDim.x * blockDim.y * blockDim.z + tid) * 4;
    o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z; o[3] = block;
}
"""


def test_thread_and_block_indices_3d():
    grid, block = (3, 2, 2), (4, 3, 2)
    out = np.zeros((12, 24, 4), np.uint32)
    run(INDICES, "indices", grid, block, [out])
    z, y, x = np.meshgrid(range(2), range(3), range(4), indexing="ij")
    for b in range(12):
        assert np.array_equal(out[b, :, 0], x.ravel())
        assert np.array_equal(out[b, :, 1], y.ravel())
        assert np.array_equal(out[b, :, 2], z.ravel())
        assert (out[b, :, 3] == b).all()


WARP = r"""
__global__ void warp_ops(int* out) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int* o = out + threadIdx.x * 10;
    int v = 100 * warp + lane;
    o[0] = __shfl_sync(0xffffffff, v, 31 - lane);
    o[1] = __shfl_xor_sync(0xffffffff, v, 1);
    o[2] = __shfl_xor_sync(0xffffffff, v, 16);
    o[3] = __shfl_down_sync(0xffffffff, v, 1);
    o[4] = __shfl_up_sync(0xffffffff, v, 2, 8);
    o[5] = __shfl_sync(0xffffffff, v, 3, 8);
    o[6] = (int)__ballot_sync(0xffffffff, lane % 3 == 0);
    o[7] = __any_sync(0xffffffff, lane == 7);
    o[8] = __all_sync(0xffffffff, lane < 40) * 2 + __all_sync(0xffffffff, lane < 31);
    float f = __shfl_down_sync(0xffffffff, 0.5f * lane, 4);
    o[9] = (int)(f * 2);
}
"""


def expected_warp_ops(lane: int, warp: int, nlanes: int) -> list[int]:
    def v(src):  # an absent source lane: the caller keeps its own value
        return 100 * warp + (src if 0 <= src < nlanes else lane)
    ballot = sum(1 << l for l in range(nlanes) if l % 3 == 0)
    return [v(31 - lane), v(lane ^ 1), v(lane ^ 16),
            v(lane + 1) if lane + 1 < 32 else v(lane),
            v(lane - 2) if lane % 8 >= 2 else v(lane),
            v(lane // 8 * 8 + 3), ballot, int(nlanes > 7),
            2 + int(nlanes < 32),
            2 * (0.5 * (lane + 4)) if lane + 4 < nlanes else 2 * 0.5 * lane]


@pytest.mark.parametrize("threads", [64, 48])
def test_warp_shuffles_ballot_any_all(threads):
    out = np.zeros((threads, 10), np.int32)
    run(WARP, "warp_ops", 1, threads, [out])
    for t in range(threads):
        warp, lane = divmod(t, 32)
        nlanes = min(32, threads - 32 * warp)
        want = expected_warp_ops(lane, warp, nlanes)
        assert list(out[t]) == [int(w) for w in want], (t, list(out[t]), want)


EXITED_LANES = r"""
__global__ void exited_lanes(int* out) {
    int lane = threadIdx.x;
    if (lane >= 20) return;                 // these lanes never take part in the shuffle
    int total = lane;
    for (int d = 16; d > 0; d /= 2) total += __shfl_xor_sync(0xffffffff, total, d);
    out[lane] = total;
}
"""


def test_collectives_wait_only_for_live_lanes():
    out = np.zeros(32, np.int32)
    run(EXITED_LANES, "exited_lanes", 1, 32, [out])
    # Butterfly over 20 lanes: an absent partner contributes the lane's own value.
    vals = list(range(20)) + [None] * 12
    for d in (16, 8, 4, 2, 1):
        vals = [None if x is None else x + (vals[i ^ d] if vals[i ^ d] is not None else x)
                for i, x in enumerate(vals)]
    assert list(out[:20]) == vals[:20]


REDUCE = r"""
template <int THREADS>
__global__ void block_sum(int n, const float* x, float* sums) {
    __shared__ float s[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}
"""


def test_syncthreads_tree_reduction_many_blocks():
    n = 10_000
    x = np.arange(n, dtype=np.float32) % 7
    blocks = (n + 255) // 256
    sums = np.zeros(blocks, np.float32)
    run(REDUCE, "block_sum<256>", blocks, 256, [n, x, sums])
    want = np.add.reduceat(np.pad(x, (0, blocks * 256 - n)), np.arange(0, blocks * 256, 256))
    assert np.array_equal(sums, want)


SYNCWARP = r"""
__global__ void syncwarp_exchange(int* out) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x * 3;
    __syncwarp();
    out[threadIdx.x] = s[threadIdx.x ^ 31];
}
"""


def test_syncwarp_orders_shared_memory_within_a_warp():
    out = np.zeros(64, np.int32)
    run(SYNCWARP, "syncwarp_exchange", 1, 64, [out])
    assert np.array_equal(out, (np.arange(64) ^ 31) * 3)


SHARED = r"""
__global__ void shared_kinds(int n, const float* x, float* out, unsigned long long* addr) {
    __shared__ float stat[64];
    extern __shared__ __align__(16) unsigned char raw[];
    float* dyn = reinterpret_cast<float*>(raw);
    int t = threadIdx.x;
    stat[t] = x[blockIdx.x * 64 + t];
    __syncthreads();
    dyn[t] = 2.f * stat[63 - t];
    __syncthreads();
    out[blockIdx.x * 64 + t] = dyn[63 - t] + stat[t];   // 3 * x
    if (t == 0) addr[blockIdx.x] = (unsigned long long)raw % 128;
}
"""


def test_static_and_extern_shared_memory():
    x = np.arange(4 * 64, dtype=np.float32)
    out = np.zeros_like(x)
    addr = np.ones(4, np.uint64)
    run(SHARED, "shared_kinds", 4, 64, [len(x), x, out, addr], shared_mem=64 * 4)
    assert np.array_equal(out, 3 * x)
    assert (addr == 0).all(), "dynamic shared memory must be 128-byte aligned"


@pytest.mark.parametrize("decl,elem", [
    ("extern __shared__ float smem[];", "float"),
    ("extern __shared__ __align__(16) unsigned char smem[];", "unsigned char"),
    ("extern __shared__ alignas(16) float4 smem[];", "float4"),
    ("extern __shared__ unsigned char __attribute__((aligned(128))) smem[];", "unsigned char"),
    ("extern  __shared__\n  __half smem [ ] ;", "__half"),
])
def test_rewrite_extern_shared(decl, elem):
    text = f"__global__ void k() {{\n    {decl}\n    smem[0] = 0;\n}}\n"
    out = cpu.rewrite_extern_shared(text)
    assert f"{elem}* smem = reinterpret_cast<{elem}*>(emu::dynamic_smem());" in out
    assert out.count("\n") == text.count("\n"), "line numbers must not move"


def test_rewrite_static_shared():
    text = "__global__ void k() {\n    static __shared__ float a[4];\n    static\n__shared__ int b;\n}\n"
    out = cpu.rewrite_extern_shared(text)
    assert "static" not in out and out.count("__shared__") == 2 and out.count("\n") == text.count("\n")


DYN_OOB = r"""
__global__ void dyn_oob(int n) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x + n] = 1.f;
}
"""


def test_dynamic_shared_memory_overflow_is_caught():
    run(DYN_OOB, "dyn_oob", 1, 32, [0], shared_mem=32 * 4)
    with pytest.raises(KernelError, match="dynamic shared memory"):
        run(DYN_OOB, "dyn_oob", 1, 32, [32], shared_mem=32 * 4)


FLOAT4 = r"""
__global__ void scale4(int n4, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(v.x * 2, v.y * 3, v.z * 4, v.w + 1);
    }
}
"""


def test_float4_loads_and_stores():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    run(FLOAT4, "scale4", 8, 32, [250, x, y])
    want = x.reshape(-1, 4) * np.float32([2, 3, 4, 1]) + np.float32([0, 0, 0, 1])
    assert np.array_equal(y, want.ravel())


HALF = r"""
__global__ void halves(int n, const float* x, unsigned short* bits, float* back, float* ops) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = __float2half_rn(x[i]);
    bits[i] = __half_as_ushort(h);
    back[i] = __half2float(h);
    if (i == 0) {
        half2 a = __floats2half2_rn(1.5f, -2.25f), b = __float2half2_rn(0.25f);
        float2 s = __half22float2(__hadd2(a, b)), p = __half22float2(__hmul2(a, b));
        float2 f = __half22float2(__hfma2(a, b, __halves2half2(__low2half(a), __high2half(a))));
        ops[0] = s.x; ops[1] = s.y; ops[2] = p.x; ops[3] = p.y; ops[4] = f.x; ops[5] = f.y;
        ops[6] = __half2float(__hadd(__float2half(2048.f), __float2half(1.f)));   // tie: 2049 -> 2048
        ops[7] = __half2float(__hmul(__float2half(3.f), __float2half(0.5f)));
    }
}
"""


def test_half_conversions_round_to_nearest_even():
    one_ulp = 2.0 ** -10
    special = [1 + one_ulp / 2, 1 + 3 * one_ulp / 2, -(1 + one_ulp / 2), 65504.0, 65520.0, 65519.0,
               2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-8, 0.0, -0.0, np.inf, -np.inf, 0.1, 1 / 3]
    x = np.concatenate([np.float32(special),
                        np.random.default_rng(3).standard_normal(2000).astype(np.float32) * 100]).astype(np.float32)
    bits = np.zeros(len(x), np.uint16)
    back = np.zeros(len(x), np.float32)
    ops = np.zeros(8, np.float32)
    run(HALF, "halves", (len(x) + 127) // 128, 128, [len(x), x, bits, back, ops])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(bits, want.view(np.uint16))
    assert np.array_equal(back, want.astype(np.float32))
    assert bits[0] == np.float16(1.0).view(np.uint16)            # tie to even: down
    assert bits[1] == np.float16(1 + 2 * one_ulp).view(np.uint16)  # tie to even: up
    assert list(ops) == [1.75, -2.0, 0.375, -0.5625, 1.5 * 0.25 + 1.5, -2.25 * 0.25 - 2.25, 2048.0, 1.5]


ATOMIC = r"""
__global__ void count(int* counter, float* total) {
    atomicAdd(counter, 1);
    atomicAdd(total, 0.5f);
}
"""


@pytest.mark.parametrize("os_threads", ["1", "2"])
def test_atomics_across_parallel_blocks(os_threads, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CPU_THREADS", os_threads)
    counter = np.zeros(1, np.int32)
    total = np.zeros(1, np.float32)
    run(ATOMIC, "count", 200, 64, [counter, total])
    assert counter[0] == 200 * 64
    assert total[0] == 200 * 64 * 0.5


PRINTF = r"""
__global__ void hello(int x) {
    if (threadIdx.x == 1) printf("hello from thread %d, x = %d\n", threadIdx.x, x);
}
"""


def test_printf_reaches_python_stdout(capsys):
    run(PRINTF, "hello", 1, 4, [7])
    assert "hello from thread 1, x = 7" in capsys.readouterr().out


SCALARS = r"""
__global__ void scalars(int i, unsigned u, float f, double d, float* out) {
    out[0] = (float)i; out[1] = (float)u; out[2] = f; out[3] = (float)d;
}
"""


def test_scalar_arguments_by_kernel_type():
    out = np.zeros(4, np.float32)
    run(SCALARS, "scalars", 1, 1, [-3, np.int32(4000000), 0.1, np.float32(2.5), out])
    assert list(out) == [-3.0, 4000000.0, np.float32(0.1), 2.5]


def test_compile_is_cached():
    a = cpu.compile_kernel(PRINTF, "hello", label="hello")
    b = cpu.compile_kernel(PRINTF, "hello", label="again")
    assert a.executable == b.executable and a.executable.exists()


# ------------------------------------------------------------------------------------------------
# Errors: each is a Python exception, and the next launch works
# ------------------------------------------------------------------------------------------------
def good_launch_still_works():
    out = np.zeros(64, np.int32)
    run(SYNCWARP, "syncwarp_exchange", 1, 64, [out])
    assert out[1] == 30 * 3


OOB = r"""
__global__ void fill(int n, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = 1.0f;
}
"""


def test_out_of_bounds_write_names_array_and_line():
    out = np.zeros(60, np.float32)
    with pytest.raises(KernelError, match=r"fill: out-of-bounds write at element 60 of argument 1 "
                                          r"\(float32 array of shape \(60,\).*at line 4"):
        run(OOB, "fill", 2, 32, [60, out])
    good_launch_still_works()


OOB_READ = r"""
__global__ void shift(int n, const float* x, float* y) {
    int i = threadIdx.x;
    y[i] = x[i + n];
}
"""


def test_out_of_bounds_read():
    x = np.zeros(32, np.float32)
    y = np.zeros(32, np.float32)
    run(OOB_READ, "shift", 1, 16, [16, x, y])
    with pytest.raises(KernelError, match=r"out-of-bounds read at element 32 of argument 1"):
        run(OOB_READ, "shift", 1, 32, [1, x, y])
    good_launch_still_works()


DIVERGENT = r"""
__global__ void divergent(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    }
    out[threadIdx.x] = s[63 - threadIdx.x];
}
"""


def test_divergent_syncthreads_names_the_line():
    out = np.zeros(64, np.float32)
    with pytest.raises(KernelError, match=r"divergent __syncthreads.*32 threads wait at __syncthreads\(\) on "
                                          r"line 6 \(threads 0, 2, 4,.*32 threads have exited"):
        run(DIVERGENT, "divergent", 1, 64, [out], timeout=10)
    good_launch_still_works()


TWO_BARRIERS = r"""
__global__ void two_barriers(float* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.f;
}
"""


def test_threads_at_different_barriers():
    out = np.zeros(32, np.float32)
    with pytest.raises(KernelError, match=r"line 4 \(threads 0-15\).*line 6 \(threads 16-31\)"):
        run(TWO_BARRIERS, "two_barriers", 1, 32, [out], timeout=10)
    good_launch_still_works()


HALF_WARP_SHUFFLE = r"""
__global__ void half_warp(int* out) {
    int v = threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffff, v, 1);
    __syncthreads();
    out[threadIdx.x] = v;
}
"""


def test_warp_collective_some_lanes_never_reach():
    out = np.zeros(32, np.int32)
    with pytest.raises(KernelError, match=r"warp collective.*16 threads wait at __syncthreads\(\) on line 5 "
                                          r"\(threads 16-31\).*warp collective on line 4 \(threads 0-15\)"):
        run(HALF_WARP_SHUFFLE, "half_warp", 1, 32, [out], timeout=10)
    good_launch_still_works()


MISMATCH = r"""
__global__ void mismatch(int* out) {
    int v = threadIdx.x;
    if (threadIdx.x % 2) v = __ballot_sync(0xffffffff, 1);
    else v = __shfl_sync(0xffffffff, v, 0);
    out[threadIdx.x] = v;
}
"""


def test_lanes_at_different_collectives():
    out = np.zeros(32, np.int32)
    with pytest.raises(KernelError, match=r"different warp collectives"):
        run(MISMATCH, "mismatch", 1, 32, [out], timeout=10)
    good_launch_still_works()


SPIN = r"""
__global__ void spin(int n, int* out) {
    volatile int x = 0;
    while (x != n) { x = x + 2; }
    out[0] = x;
}
"""


def test_infinite_loop_times_out():
    out = np.zeros(1, np.int32)
    with pytest.raises(KernelError, match=r"did not finish in 1 s, the CPU backend's time-out \(an infinite loop"):
        run(SPIN, "spin", 1, 32, [1, out], timeout=1)
    run(SPIN, "spin", 1, 1, [10, out])
    assert out[0] == 10
    good_launch_still_works()


STACK = r"""
__global__ void big_stack(int n, float* out) {
    volatile float local[100000];
    for (int i = 0; i < n; ++i) local[i] = i;
    out[threadIdx.x] = local[n - 1];
}
"""


def test_stack_overflow_is_reported():
    out = np.zeros(2, np.float32)
    with pytest.raises(KernelError, match=r"overflowed its 64 KB stack"):
        run(STACK, "big_stack", 1, 2, [100000, out])
    good_launch_still_works()


DIV0 = r"""
__global__ void div0(int n, int* out) { out[threadIdx.x] = 100 / (n - (int)threadIdx.x); }
"""


def test_integer_division_by_zero():
    out = np.zeros(4, np.int32)
    with pytest.raises(KernelError, match=r"integer division by zero.*thread \(2,0,0\)"):
        run(DIV0, "div0", 1, 4, [2, out])
    good_launch_still_works()


def test_syntax_error_is_a_compile_error_with_the_line():
    bad = "__global__ void bad(int n, float* out) {\n    out[0] = n\n}\n"
    with pytest.raises(CompileError, match=r"bad\.cu:2:\d+: error: expected ';'"):
        cpu.compile_kernel(bad, "bad", label="bad.cu")
    good_launch_still_works()


@pytest.mark.parametrize("grid,block", [(1, 0), (1, 1025), (1, (32, 33)), (1, (1, 1, 65)), (0, 32),
                                        ((1, 0), 32), ((1, 1, 1, 1), 32), (1, 32.0)])
def test_bad_launch_shapes_are_config_errors(grid, block):
    with pytest.raises(ConfigError):
        run(SYNCWARP, "syncwarp_exchange", grid, block, [np.zeros(64, np.int32)])


def test_bad_arguments_are_input_errors():
    with pytest.raises(InputError, match="C-contiguous"):
        run(SYNCWARP, "syncwarp_exchange", 1, 64, [np.zeros((64, 2), np.int32)[:, 0]])
    with pytest.raises(InputError, match="expects an array but the launch passed an integer"):
        run(SYNCWARP, "syncwarp_exchange", 1, 64, [3])
    with pytest.raises(InputError, match="takes 1 arguments but the launch passed 2"):
        run(SYNCWARP, "syncwarp_exchange", 1, 64, [np.zeros(64, np.int32), 1])
    with pytest.raises(InputError, match="not supported"):
        run(SYNCWARP, "syncwarp_exchange", 1, 64, ["x"])
    good_launch_still_works()


PARTIAL_MASK = r"""
__global__ void partial_mask(int* out) {
    int lane = threadIdx.x, v = lane;
    if (lane < 16) {
        v += __shfl_xor_sync(0x0000ffff, v, 1);
    } else {
        v += __shfl_down_sync(0xffff0000, v, 2, 16);
        v += __ballot_sync(0xffff0000, lane % 2);
    }
    if (lane < 8) v += __ballot_sync(0x000000ff, 1);
    out[lane] = v;
}
"""


def test_collectives_with_partial_masks():
    out = np.zeros(32, np.int32)
    run(PARTIAL_MASK, "partial_mask", 1, 32, [out])
    want = []
    for lane in range(32):
        if lane < 16:
            v = lane + (lane ^ 1) + 0xFF * (lane < 8)
        else:
            v = lane + (lane + 2 if lane % 16 + 2 < 16 else lane)
            v += sum(1 << l for l in range(16, 32) if l % 2)
        want.append(v - 2**32 if v >= 2**31 else v)
    assert list(out) == want
