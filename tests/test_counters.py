"""Analysis mode of the CPU emulator: sectors and wavefronts per warp-wide request, counted by hand."""
from __future__ import annotations

import numpy as np
import pytest

import gemmlab
from gemmlab import cpu

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the CPU emulator needs g++")


def analyze(source: str, name: str, grid, block, args: list, names: list[str], shared_mem: int = 0,
            max_blocks=None) -> cpu.Counters:
    module = cpu.compile_kernel(source, name, label=name)
    return cpu.analyze(module, grid, block, args, shared_mem=shared_mem, max_blocks=max_blocks, names=names)


def one(c: cpu.Counters, **where) -> cpu.SiteCount:
    sites = c.select(**where)
    assert len(sites) == 1, (where, c)
    return sites[0]


# ------------------------------------------------------------------------------------------------
# Global memory: 32-byte sectors per request
# ------------------------------------------------------------------------------------------------
GLOBAL = r"""
__global__ void global_patterns(const float* co, const float* col, const float* f4, const float* bc,
                                const float* half, const float* off, float* out) {
    int t = threadIdx.x;
    float a = co[t];                                           // coalesced: 4 sectors, 128 B
    float b = col[t * 64];                                     // down a column: 32 sectors
    float4 v = reinterpret_cast<const float4*>(f4)[t];         // float4: 16 sectors, 512 B
    float d = bc[5];                                           // broadcast: 1 sector
    float e = 0.f;
    if (t < 16) e = half[t];                                   // half a warp: 2 sectors, 64 B
    float g = off[t + 1];                                      // misaligned by 4 B: 5 sectors
    out[t] = a + b + v.x + v.y + v.z + v.w + d + e + g;        // coalesced store: 4 sectors
}
"""


@pytest.fixture(scope="module")
def global_counts() -> cpu.Counters:
    arrays = [np.ones(n, np.float32) for n in (32, 32 * 64, 128, 8, 32, 33)]
    out = np.zeros(32, np.float32)
    return analyze(GLOBAL, "global_patterns", 1, 32, [*arrays, out],
                   names=["co", "col", "f4", "bc", "half", "off", "out"])


@pytest.mark.parametrize("array,requests,sectors,nbytes,lanes", [
    ("co", 1, 4, 128, 32), ("col", 1, 32, 128, 32), ("f4", 1, 16, 512, 32), ("bc", 1, 1, 128, 32),
    ("half", 1, 2, 64, 16), ("off", 1, 5, 128, 32)])
def test_global_load_sectors(global_counts, array, requests, sectors, nbytes, lanes):
    s = one(global_counts, space="global", kind="load", array=array)
    assert (s.requests, s.sectors, s.bytes, s.lanes) == (requests, sectors, nbytes, lanes)
    assert s.file == "global_patterns" and s.line > 0
    assert global_counts.global_sectors_per_request("load", array=array) == sectors


def test_global_store_and_totals(global_counts):
    s = one(global_counts, space="global", kind="store")
    assert (s.array, s.requests, s.sectors, s.bytes) == ("out", 1, 4, 128)
    t = global_counts.totals
    assert t["global_load_requests"] == 6 and t["global_load_sectors"] == 4 + 32 + 16 + 1 + 2 + 5
    assert t["global_store_sectors"] == 4 and t["blocks"] == 1 and t["barriers"] == 0
    assert not global_counts.select(space="shared"), "locals and the runtime's thread-locals are not shared memory"
    text = str(global_counts)
    assert "global load" in text and "16.00 sectors" in text


# ------------------------------------------------------------------------------------------------
# Shared memory: wavefronts per request
# ------------------------------------------------------------------------------------------------
SHARED = r"""
__global__ void shared_patterns(float* out) {
    __shared__ float tile[32][32];
    __shared__ float padded[32][33];
    __shared__ __align__(16) float vec[32 * 4];
    __shared__ __align__(16) float pairs[32 * 4];
    __shared__ float two[64];
    __shared__ unsigned char bytes[32];
    int t = threadIdx.x;
    tile[0][t] = t;                                         // row store: 1
    tile[t][1] = t;                                         // column store: 32
    padded[t][0] = t;                                       // padded column store: 1
    vec[t] = t;
    pairs[t] = t;
    two[t] = t;
    bytes[t] = (unsigned char)t;
    __syncthreads();
    float r = tile[1][t];                                   // row load: 1
    float c = tile[t][2];                                   // column load: 32
    float p = padded[t][3];                                 // padded column load: 1
    float b = tile[7][7];                                   // broadcast: 1
    float w = two[(t % 2) * 32];                            // two words in one bank: 2
    float4 v = reinterpret_cast<const float4*>(vec)[t];     // 16 B each, consecutive: 4
    float2 q = reinterpret_cast<const float2*>(pairs)[2 * t % 64];   // 8 B, stride 16 B: 2 + 2
    unsigned char u = bytes[t];                             // 1 B each: 1
    out[t] = r + c + p + b + w + v.x + v.y + v.z + v.w + q.x + q.y + u;
}
"""


@pytest.fixture(scope="module")
def shared_counts() -> cpu.Counters:
    return analyze(SHARED, "shared_patterns", 1, 32, [np.zeros(32, np.float32)], names=["out"])


def shared_site(c, kind, array, line_text):
    line = next(i + 1 for i, text in enumerate(SHARED.splitlines()) if line_text in text)
    return one(c, space="shared", kind=kind, array=array, line=line)


@pytest.mark.parametrize("kind,array,code,wavefronts,nbytes", [
    ("store", "tile", "tile[0][t] = t", 1, 128),
    ("store", "tile", "tile[t][1] = t", 32, 128),
    ("store", "padded", "padded[t][0] = t", 1, 128),
    ("load", "tile", "tile[1][t]", 1, 128),
    ("load", "tile", "tile[t][2]", 32, 128),
    ("load", "padded", "padded[t][3]", 1, 128),
    ("load", "tile", "tile[7][7]", 1, 128),
    ("load", "two", "two[(t % 2) * 32]", 2, 128),
    ("load", "vec", "float4*>(vec)[t]", 4, 512),
    ("load", "pairs", "float2*>(pairs)", 4, 256),
    ("load", "bytes", "bytes[t];", 1, 32),
])
def test_shared_wavefronts(shared_counts, kind, array, code, wavefronts, nbytes):
    s = shared_site(shared_counts, kind, array, code)
    assert (s.requests, s.wavefronts, s.bytes) == (1, wavefronts, nbytes), s


def test_shared_totals_and_barrier(shared_counts):
    t = shared_counts.totals
    assert t["shared_store_requests"] == 7 and t["shared_load_requests"] == 8
    assert shared_counts.barriers == 1 and shared_counts.warp_barriers == 1
    assert shared_counts.shared_wavefronts_per_request("load", array="padded") == 1


DYNAMIC = r"""
__global__ void dynamic_tile(float* out) {
    extern __shared__ float dyn[];
    int t = threadIdx.x;
    dyn[t * 32] = t;
    __syncthreads();
    out[t] = dyn[t];
}
"""


def test_dynamic_shared_memory():
    c = analyze(DYNAMIC, "dynamic_tile", 1, 32, [np.zeros(32, np.float32)], names=["out"], shared_mem=32 * 32 * 4)
    assert one(c, space="shared", kind="store").wavefronts == 32
    assert one(c, space="shared", kind="load").wavefronts == 1
    assert {s.array for s in c.select(space="shared")} == {"dynamic"}


# ------------------------------------------------------------------------------------------------
# Grouping: the n-th execution of an instruction by each lane of a warp is one request
# ------------------------------------------------------------------------------------------------
GROUPING = r"""
__global__ void grouping(int n, const float* x, float* out) {
    int t = threadIdx.x;
    float acc = 0.f;
    int reps = t % 32 < 16 ? n : n / 2;     // lanes 16-31 of each warp loop half as often
    for (int i = 0; i < reps; ++i) acc += x[i * 64 + t];
    acc += __shfl_xor_sync(0xffffffff, acc, 1);
    out[blockIdx.x * blockDim.x + t] = acc;
    __syncthreads();
    __syncthreads();
}
"""


def test_requests_group_lanes_per_warp_and_execution():
    x = np.ones(64 * 8, np.float32)
    out = np.zeros(4 * 64, np.float32)
    c = analyze(GROUPING, "grouping", 4, 64, [8, x, out], names=["n", "x", "out"], max_blocks=3)
    assert (c.blocks, c.grid_blocks) == (3, 4)
    load = one(c, space="global", kind="load")
    # per warp: 4 requests of 32 lanes (4 sectors), then 4 of 16 lanes (2 sectors); 2 warps x 3 blocks
    assert load.requests == 8 * 2 * 3 and load.lanes == (4 * 32 + 4 * 16) * 6
    assert load.sectors == (4 * 4 + 4 * 2) * 6 and (load.min, load.max) == (2, 4)
    assert c.barriers == 2 * 3 and c.warp_barriers == 2 * 3 * 2
    assert one(c, space="global", kind="store").requests == 2 * 3
    assert not out.any(), "analysis mode leaves the arrays alone"


ATOMIC = r"""
__global__ void atomics(int* counter, float* total) {
    atomicAdd(counter, 1);
    atomicAdd(total, 0.5f);
}
"""


def test_atomics_still_work_in_analysis_mode():
    c = analyze(ATOMIC, "atomics", 2, 64, [np.zeros(1, np.int32), np.zeros(1, np.float32)], names=["c", "t"])
    assert c.blocks == 2 and not c.select(space="shared")


# ------------------------------------------------------------------------------------------------
# ldmatrix and cp.async twins
# ------------------------------------------------------------------------------------------------
LDMATRIX = r"""
template <bool SWIZZLE>
__global__ void ldm(unsigned* out) {
    __shared__ __align__(128) __half tile[16][64];       // 64 halves = 128 B per row: 8 chunks of 16 B
    int t = threadIdx.x;
    for (int i = t; i < 16 * 64; i += 32) tile[i / 64][i % 64] = __float2half((float)i);
    __syncthreads();
    // matrix j = lanes 8j..8j+7; its 8 rows are rows 0-7 (j even) or 8-15 (j odd), chunk j / 2
    int row = t % 8 + 8 * (t / 8 % 2), chunk = t / 16;
    int phys = SWIZZLE ? (chunk ^ (row % 8)) : chunk;
    const __half* p = &tile[row][phys * 8];
    unsigned r0, r1, r2, r3;
    emu::ldmatrix_x4(r0, r1, r2, r3, p);
    unsigned s0;
    emu::ldmatrix_x1(s0, p);
    out[t] = r0 + r1 + r2 + r3 + s0;
}
"""


@pytest.mark.parametrize("swizzle,per_matrix", [(False, 8), (True, 1)])
def test_ldmatrix_conflicts_and_xor_swizzle(swizzle, per_matrix):
    c = analyze(LDMATRIX, f"ldm<{str(swizzle).lower()}>", 1, 32, [np.zeros(32, np.uint32)], names=["out"])
    x4, x1 = sorted(c.select(space="shared", kind="ldmatrix"), key=lambda s: -s.bytes)
    assert (x4.requests, x4.wavefronts, x4.bytes, x4.lanes) == (1, 4 * per_matrix, 512, 32)
    assert (x1.requests, x1.wavefronts, x1.bytes, x1.lanes) == (1, per_matrix, 128, 8)
    assert x4.array == "tile"
    assert not c.select(space="shared", kind="load"), "the twin's own reads are not the kernel's"


CP_ASYNC = r"""
__global__ void copy_async(int n, const float* src, float* out) {
    __shared__ __align__(128) float buf[32 * 4];
    int t = threadIdx.x;
    int bytes = 4 * t < n ? 16 : 0;                           // lanes past n zero-fill
    emu::cp_async_16(&buf[4 * t], src + 4 * t, bytes);
    emu::cp_async_commit();
    emu::cp_async_wait_group<0>();
    __syncthreads();
    out[t] = buf[4 * t] + buf[4 * t + 3];
}
"""


def test_cp_async_counts_both_sides():
    src = np.arange(128, dtype=np.float32)
    out = np.zeros(32, np.float32)
    c = analyze(CP_ASYNC, "copy_async", 1, 32, [64, src, out], names=["n", "src", "out"])
    g = one(c, space="global", kind="cp.async")
    s = one(c, space="shared", kind="cp.async")
    assert (g.array, g.requests, g.sectors, g.bytes, g.lanes) == ("src", 1, 8, 256, 16)
    assert (s.array, s.requests, s.wavefronts, s.bytes) == ("buf", 1, 4, 512)


# ------------------------------------------------------------------------------------------------
# The course's steps
# ------------------------------------------------------------------------------------------------
def test_naive_reads_a_down_a_column():
    c = gemmlab.step("sgemm/01_naive", backend="cpu").counters(128, 128, 64, max_blocks=2)
    assert c.global_sectors_per_request("load", array="A") == 32
    assert c.global_sectors_per_request("store", array="C") == 32


def test_coalesced_broadcasts_a_and_coalesces_b():
    c = gemmlab.step("sgemm/02_coalesced", backend="cpu").counters(128, 128, 64, max_blocks=2)
    assert c.global_sectors_per_request("load", array="A") == 1
    assert c.global_sectors_per_request("load", array="B") == 4
    assert c.global_sectors_per_request("store", array="C") == 4
    assert c.select(array="A")[0].file == "02_coalesced.cu"


def test_smem_tiling_is_conflict_free():
    c = gemmlab.step("sgemm/03_smem_tiling", backend="cpu").counters(128, 128, 128, max_blocks=2)
    assert c.shared_wavefronts_per_request("load") == 1
    assert c.shared_wavefronts_per_request("store") == 1
    assert {s.array for s in c.select(space="shared")} == {"sA", "sB"}
    assert c.global_sectors_per_request("load") == 4
    assert c.barriers == 2 * (128 // 32) * 2   # two per K tile, two blocks


def test_cli_counters(capsys):
    from gemmlab.__main__ import main

    assert main(["counters", "sgemm/02_coalesced", "--param", "BLOCK_X=16", "--size", "64", "64", "32",
                 "--blocks", "1"]) == 0
    out = capsys.readouterr().out
    assert "counted over 1 of" in out and "02_coalesced.cu" in out and "sectors" in out


def test_mma_step_counts_ldmatrix_per_matrix():
    c = gemmlab.step("hgemm/01_mma_tiling", backend="cpu").counters(128, 128, 64, max_blocks=1)
    ldm = c.select(space="shared", kind="ldmatrix")
    assert {s.array for s in ldm} == {"sA", "sB"}
    for s in ldm:  # x4: four 8x8 matrices of 128 B, at least one wavefront each, at most 8
        assert s.bytes == 512 * s.requests and s.lanes == 32 * s.requests
        assert 4 <= s.min <= s.max <= 32
    assert not c.select(space="shared", kind="load"), "ldmatrix's own reads are not counted twice"
    assert c.global_sectors_per_request("load", array="A") == 2   # one half per lane: 64 B


def test_counters_of_a_gpu_kernel_use_a_cpu_twin():
    k = gemmlab.step("sgemm/02_coalesced", backend="cpu", BLOCK_X=32, BLOCK_Y=4)
    want = k.counters(64, 64, 16, max_blocks=1)
    k.backend, k.module = "gpu", None      # what a GPU kernel looks like to counters()
    got = k.counters(64, 64, 16, max_blocks=1)
    assert got.sites == want.sites and got.blocks == 1


# ------------------------------------------------------------------------------------------------
# Chapter 5: the emulator's counts of the real kernels against the Python model (gemmlab.swizzle)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,layout", [("hgemm/01_mma_tiling", "plain"), ("hgemm/02_vectorized_copy", "plain"),
                                         ("hgemm/03_swizzled", "swizzled"), ("hgemm/05_tuned_tiles", "swizzled")])
def test_hgemm_emulator_counts_match_the_model(name, layout):
    from gemmlab import swizzle as sw

    k = gemmlab.step(name, backend="cpu")
    c = k.counters(256, 256, 64, max_blocks=1)
    for operand, array in (("A", "sA"), ("B", "sB")):
        model = sw.per_request(sw.hgemm_ldmatrix_requests(operand, layout=layout, **k.params), ldmatrix=True)
        assert c.shared_wavefronts_per_request("ldmatrix", array=array) == model, (name, array)
        if name != "hgemm/01_mma_tiling":  # 01 copies element by element (2-byte stores)
            model = sw.per_request(sw.hgemm_store_requests(operand, layout=layout, **k.params), 16)
            assert c.shared_wavefronts_per_request("store", array=array) == model, (name, array)


def padded_sa(source: str, pad: int) -> str:
    """Step 06/07's source with sA's rows padded by `pad` floats (the declaration is the only change)."""
    old = "float sA[BLOCK_K][BLOCK_M];"
    assert old in source
    return source.replace(old, f"float sA[BLOCK_K][BLOCK_M + {pad}];")


@pytest.mark.parametrize("name", ["sgemm/06_vectorized", "sgemm/07_warptiling"])
@pytest.mark.parametrize("pad", [0, 4])
def test_sgemm_emulator_counts_match_the_model(name, pad):
    from gemmlab import registry
    from gemmlab.runtime.source import REPO
    from gemmlab import swizzle as sw

    source = (REPO / registry.get(name).file).read_text()
    k = gemmlab.step(name, backend="cpu", source=padded_sa(source, pad) if pad else None)
    c = k.counters(256, 256, 64, max_blocks=1)
    assert gemmlab.verify(k, raise_on_fail=False).passed
    for access, array, kind in (("sA load", "sA", "load"), ("sB load", "sB", "load"), ("sA store", "sA", "store")):
        model = sw.per_request(*sw.sgemm_requests(name, access, pad=pad, **k.params))
        assert c.shared_wavefronts_per_request(kind, array=array) == model, (name, access, pad)
    # the transposed store of A is 2-way until sA's rows are padded by 4 floats
    assert c.shared_wavefronts_per_request("store", array="sA") == (1 if pad else 2)
