"""What bounds fused step 08 at N = 512: the launch, the loads, the tensor pipe? (chapter 8b)

    python lab/fusion-tma/limits.py calls > results/experiments/fusion-tma/limits-<gpu>-<date>.log   # on an H100 / H200
    python lab/fusion-tma/limits.py rate > results/experiments/fusion-tma/rate-<gpu>-<date>.log
    python lab/fusion-tma/limits.py handover > results/experiments/fusion-tma/handover-<gpu>-<date>.log
    python lab/fusion-tma/limits.py ordered > results/experiments/fusion-tma/ordered-<gpu>-<date>.log
    python lab/fusion-tma/limits.py marks > results/experiments/fusion-tma/marks-<gpu>-<date>.log
    python lab/fusion-tma/limits.py waits > results/experiments/fusion-tma/waits-<gpu>-<date>.log
    python lab/fusion-tma/limits.py producers > results/experiments/fusion-tma/producers-<gpu>-<date>.log
    python lab/fusion-tma/limits.py early > results/experiments/fusion-tma/early-<gpu>-<date>.log
    python lab/fusion-tma/limits.py wide > results/experiments/fusion-tma/wide-<gpu>-<date>.log
    python lab/fusion-tma/limits.py presplit > results/experiments/fusion-tma/presplit-<gpu>-<date>.log
    python lab/fusion-tma/steps.py record      # the logs -> results.json["limits"], ["rate"], ...

`calls`: step 08 at its tiles for 512 (BLOCK_N 32, SPLIT_K 3, NUM_STAGES 12) as it is, and with one thing
changed at a time: returning at once (what the launch costs), its stages never filled (no copies), no split
of the right operand's tiles, no A fragments read from the stages, all three of those at once (only the
wgmmas, the barriers and the waits left): wrong results, timed only; its four tensor-map fences left out, the
maps prefetched first (both checked); then
multicast.patch (clusters of 2 and of 4 blocks sharing the left operand's tiles by TMA multicast), with the
stage's release arriving at cluster scope as the patch has it and at the default CTA scope, all checked (at 512
also on fusion.check's shapes).
At 2048 (BLOCK_N 64, SPLIT_K 2, NUM_STAGES 8) step 08, without copies, and with clusters of 2. Launched in
turn with torch `a @ b @ c`, three rounds. `rate`: the wgmmas of a K tile alone (rate.cu) on every SM,
N = 32 and 64, one to four warpgroups per SM: FMA per clock per SM (clock64) and TFLOP/s (events).
`handover`: how much of step 08's call at 512 the hand-over between its phases can account for. Step 08 as it
is, with phase 2 not waiting for T (its producer fetches phase 2's first K tiles as soon as phase 1 frees their
stages: no hand-over at all), with phase 1 alone, with phase 2 alone, returning at once, without the split in
one phase, and (as in `calls`) without the split and with only the wgmmas: wrong results except the first,
timed only. Then splitter.patch
(against step 08): a fourth warpgroup splits every K tile's B tile into a ring of its own, so that the
consumers only read their A fragments and multiply; checked (at 512 also on fusion.check's shapes), with
SPLIT_K 3 and 2, and timed without its split (its waits and arrivals only). Each launched directly and from a
CUDA graph, in turn with torch `a @ b @ c`, three rounds.
`fp16`: what halving the tensor pipe's time would buy in step 08's structure. The same as step 08, without the
split, and with only the wgmmas, each as it is and with its three TF32 wgmmas per 8-wide slice replaced by three
fp16 ones per 16-wide slice (FP16: m64n32k16, twice the rate, the same multiply-adds per K tile; the operands'
bits are read as fp16 pairs, so the results are wrong: timed only); step 08 returning at once, and an empty
kernel of one warp (the launch alone, for any kernel). Launched directly and from a CUDA graph, in turn with
torch `a @ b @ c`, three rounds.
`ordered`: are step 08's consumer groups slowed by all multiplying at once? The groups start together and do the
same work, so they may stay in step: all splitting (the tensor pipe idle), then all issuing wgmmas (sharing it).
ORDERED makes them take turns: K tile kt's wgmmas are issued only after K tile kt - 1's were (named barrier
11 + kt % SPLIT_K, between consecutive groups). Checked on fusion.check's shapes (SPLIT_K 3 and 4); at 512 the ring's
marks (steps.RING_MARKS) of both at 08's tiles: each part's median, and how far apart consecutive groups start their
split in a round; then both checked at full size and launched directly and from a CUDA graph at 08's tiles and others
(ORDERED_CONFIGS), in turn with torch `a @ b @ c`, three rounds.
`marks`: the ring's marks (steps.RING_MARKS) in step 08 at its 512 tiles as it is (checked) and in three of the
timed-only VARIANTS (no copies, no split, only the wgmmas): each part's median and ring_stagger()'s two figures, to
see where a K tile's time goes when one thing is taken out.
`waits`: where the gap between a K tile's parts and its period goes. With the ring's marks and WAIT_MARKS (one more
mark before the consumers' wait for a full stage, three in the producer's loop) in step 08 at its 512 tiles (checked)
and in four timed-only variants (no copies; only the wgmmas; that without the hand-over; that without the ring's
four synchronisations, NO_RING), per phase: the time from the end of a K tile's wgmmas to the loop's top, the wait
for a full stage, how long before the consumer came its copies were issued, and the producer's loop. Then step 08
with its producer sleeping 50, 100 and 200 ns a K tile (SLEEP, checked), with the marks, and every variant launched
directly and from a CUDA graph, in turn with torch `a @ b @ c`, three rounds.
`producers`: step 08 with a producer warp per operand (PRODUCERS), checked on fusion.check's shapes; the ring's marks
of both at 512; then both checked at full size and launched directly and from a CUDA graph from 512 to 4096
(CONFIGS_TO_4096), in turn with torch `a @ b @ c`, three rounds.
`early`: step 08 with each group's wait for its next K tile's stage moved to while this K tile's wgmmas run (EARLY),
checked on fusion.check's shapes (SPLIT_K 3 and 2); the ring's marks of both at 512; then timed as `producers`.

`wide`: would wider tiles over a shorter K make a phase cheaper? (Then a cluster of blocks could split K and add
up through distributed shared memory.) Phase 1 alone, at 512 with 08's tiles (BLOCK_N 32, 16 K tiles), and on
M = 1024, K = 256 with BLOCK_N 64 (SPLIT_K 2 and 3): the same 128 blocks and multiply-adds per block, half the K
tiles, twice as wide. Each checked (T against A B in float64), and timed without the split, with only the wgmmas, and
returning at once; launched directly and from a CUDA graph, in turn, three rounds. No reduction across blocks is
timed: this bounds what the idea could save.

`presplit`: chapter 8's proposal to split B and C once, up front, instead of in every block's K loop. presplit.patch
(against step 08): at the start every consumer warp of the grid splits a share of C (and of B with PRESPLIT_B) into
two K-major copies in global memory, big and small, as the wgmmas read them; each block then counts itself on a
word, and the producer waits for every block before the first phase that reads the copies. TMA brings a K tile's
big and small halves (twice the right operand's bytes), and the consumers only read their A fragments and multiply,
releasing the stage after their wgmmas; eleven stages instead of twelve make room. Checked on fusion.check's shapes
(also with B split) and at full size; at 512 against step 08 with 12 and 11 stages, and the diagnostics of
PRESPLIT_VARIANTS: split but unread, read but nothing split (and with the stage released before the wgmmas), step
08's path in this kernel ("raw"), and that with the right operand's bytes twice; thread 0 of each block marks the
end of the split, of phase 1 and of the block (PRESPLIT_MARKS, steps.block_marks; the same marks in step 08). Then checked and
timed against step 08 from 1024 to 4096 (PRESPLIT_CONFIGS). Launched directly and from a CUDA graph, in turn with
torch `a @ b @ c`, three rounds.
`readsplit`: why phase 2 reading C split saves less than phase 2 without its split. The ring's marks and WAIT_MARKS'
in step 08, in step 08 without phase 2's split, and in presplit.patch on step 08's path ("raw"), reading C split with
nothing split up front (timed only) and as it is (READSPLIT_RING_MARKS): per phase, the parts of a consumer group's K
tile (steps.ring_parts), the waits between K tiles and each phase's K loops whole (ring_waits). Then the same kernels
unmarked, launched directly and from a CUDA graph, in turn with torch `a @ b @ c`, three rounds.
"""
from __future__ import annotations

import ctypes
import dataclasses
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import steps  # noqa: E402  (this folder's substitution helpers: replaced(), RETURNS, without_split())

MULTICAST_PATCH = HERE / "multicast.patch"  # against kernels/fused/08_tile_flags.cu
SPLITTER_PATCH = HERE / "splitter.patch"  # against kernels/fused/08_tile_flags.cu
PRESPLIT_PATCH = HERE / "presplit.patch"  # against kernels/fused/08_tile_flags.cu
TILES_512 = dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=12)
TILES_2048 = dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=8)
CLUSTER_ARRIVE = "@p mbarrier.arrive.release.cluster.shared::cluster.b64"
CTA_ARRIVE = "@p mbarrier.arrive.shared::cluster.b64"  # the default semantics: release at CTA scope

# Step 08 with one thing changed; (text in 08, what replaces it)
ACQUIRES = """    if (fetcher) {
        tma_map_acquire(a_map);
        tma_map_acquire(b_map);
        tma_map_acquire(t_map);
        tma_map_acquire(c_map);
    }
"""
INIT = "    if (threadIdx.x == 0) {\n        for (int s = 0; s < NUM_STAGES; ++s) {"
PREFETCH = """    if (fetcher) {
        for (const TmaMap* m : {a_map, b_map, t_map, c_map}) asm volatile("prefetch.tensormap [%0];" :: "l"(m) : "memory");
    }
"""
COPIES = """        mbarrier_arrive_expect_tx(&full[stage], sizeof(Stage<BLOCK_N>));
        tma_load_2d(stages[stage].x, x_map, kt * TILE_K, block_row, &full[stage]);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 32; ++j)
            tma_load_2d(stages[stage].y[j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);
"""
A_FRAGMENTS = ("            ldmatrix_x4(raw[kk][0], raw[kk][1], raw[kk][2], raw[kk][3], "
               "&s.x[swizzled(warp_row + lane_id % 16, kk * 8 + lane_id / 16 * 4)]);\n")
NO_A_FRAGMENTS = "            for (int q = 0; q < 4; ++q) raw[kk][q] = tid + kk + q;  // not read from the stage\n"
NO_COPIES = [(COPIES, "        mbarrier_arrive(&full[stage]);\n")]
FULL_WAIT_LINE = "        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n"
EMPTY_WAIT = ("        mbarrier_wait(&empty[stage], ((step / NUM_STAGES) & 1) ^ 1);  "
              "// its last K tile was read (at once the first time)\n")
# The ring's four synchronisations taken out, after NO_COPIES: the consumers neither wait for a stage nor free it,
# and the producer neither waits for a free stage nor arrives on a full one. No mbarrier left in the K loop.
NO_RING = [(FULL_WAIT_LINE, ""), ("if (tid == 0) mbarrier_arrive(&empty[stage]);", ""), (EMPTY_WAIT, ""),
           ("        mbarrier_arrive(&full[stage]);\n", "")]
# Step 08's phase 2 without its wait for the row panel of T (timed only: the hand-over left out)
WAIT = """            if (producer && !first) {  // phase 2: the whole producer warp waits for the row panel of T
                wait_counters(sync + row / TILE_M * t_cols, t_cols, [&](int j) { return k_tiles_in(L - j * BLOCK_N); });
                if (fetcher) fence_proxy_async_global();  // TMA's reads of T after what the warp acquired
            }
"""
VARIANTS = {  # name -> (substitutions, without the split (steps.without_split), checked: does it still compute E?)
    "returns at once": (steps.RETURNS, False, False),
    "no copies": (NO_COPIES, False, False),
    "no split": ([], True, False),
    "no A fragments": ([(A_FRAGMENTS, NO_A_FRAGMENTS)], False, False),
    "only the wgmmas": (NO_COPIES + [(A_FRAGMENTS, NO_A_FRAGMENTS)], True, False),
    "only the wgmmas, no hand-over": (NO_COPIES + [(A_FRAGMENTS, NO_A_FRAGMENTS), (WAIT, "")], True, False),
    "only the wgmmas, no ring": (NO_COPIES + [(A_FRAGMENTS, NO_A_FRAGMENTS)] + NO_RING, True, False),
    "no map fences": ([(ACQUIRES, "")], False, True),
    "maps prefetched": ([(INIT, PREFETCH + INIT)], False, True),
}


# Each phase of step 08 alone (timed only)
PHASE_1 = "    phase(L, K, a_map, b_map, T, true);   // phase 1: T = A * B (M x L), each tile announced when stored\n"
PHASE_2 = "    phase(N, L, t_map, c_map, E, false);  // phase 2: E = T * C (M x N), each K tile of T awaited\n"
SPLIT = "        split_y(s);\n"  # in gemm_tile, which phase 1 calls with its counter (`done`), phase 2 without
HANDOVER = {"no wait": [(WAIT, "")], "phase 1 alone": [(PHASE_2, "")], "phase 2 alone": [(WAIT, ""), (PHASE_1, "")],
            "no split in phase 1": [(SPLIT, "        if (!done) split_y(s);\n")],
            "no split in phase 2": [(SPLIT, "        if (done) split_y(s);\n")]}


# Step 08's A fragments and wgmmas in fp16: per 16-wide slice (two 8-wide ones' registers), the fragment scaled by
# a power of two per row (its largest magnitude in the K tile to [1, 2)), split into hi + lo fp16 pairs (lo scaled
# by 2^11 so that it stays a normal number), and three m64n32k16 fp16 wgmmas: the same multiply-adds at twice the
# rate; the chunk is scaled back as it is added. B's tiles are read as fp16, so the results are wrong (timed only).
A_SPLIT = """            u32 a_big[4], a_small[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[kk][q]), a_big[q], a_small[q]);
"""
A_SPLIT_FP16 = """            if (kk % 2 == 1) continue;  // fp16: one 16-wide slice per two 8-wide ones
            u32 a_big[4], a_small[4];
#pragma unroll
            for (int q = 0; q < 4; ++q)
                split_f16x2(__uint_as_float(raw[kk][q]) * row_scale[q % 2], __uint_as_float(raw[kk + 1][q]) * row_scale[q % 2],
                            a_big[q], a_small[q]);
"""
TF32_WGMMAS = """            WgmmaTf32<BLOCK_N>::mma(chunk, a_small, big, kk > 0);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, small, 1);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, big, 1);
"""
FP16_WGMMAS = """            wgmma_m64n32k16_f16(chunk, a_small, big, kk > 0);
            wgmma_m64n32k16_f16(chunk, a_big, small, 1);
            wgmma_m64n32k16_f16(chunk, a_big, big, 1);
"""
FRAGMENTS_DONE = "        bar_sync(1 + group, NUM_THREADS);  // the split tile is whole, and nobody reads the stage any more\n"
ROW_SCALES = """        float row_scale[2], row_unscale[2];  // rows g and g + 8: their largest magnitude in this K tile to [1, 2)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float m = 0.f;
#pragma unroll
            for (int kk = 0; kk < TILE_K / 8; ++kk) m = fmaxf(m, fmaxf(fabsf(__uint_as_float(raw[kk][h])), fabsf(__uint_as_float(raw[kk][h + 2]))));
            m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
            const u32 e = min(max((__float_as_uint(m) >> 23) & 255, 1u), 253u);
            row_scale[h] = __uint_as_float((254u - e) << 23);
            row_unscale[h] = __uint_as_float((e - 11u) << 23) * (1.f / 2048.f);  // and the 2^22 of hi * hi
        }
"""
ACCUMULATE = "        for (int q = 0; q < ACC; ++q) acc[q] += chunk[q];\n"
ACCUMULATE_FP16 = "        for (int q = 0; q < ACC; ++q) acc[q] = fmaf(chunk[q], row_unscale[q / 2 % 2], acc[q]);\n"
WGMMA_DECLARATION = "template <int BLOCK_N>\nstruct WgmmaTf32;"
FP16_HELPERS = """// x, y (scaled) = hi + lo / 2^11, each an fp16 pair (x in the low half)
__device__ __forceinline__ void split_f16x2(float x, float y, u32& hi, u32& lo) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(y), "f"(x));
    float hx, hy;
    asm("{\\n.reg .f16 l, h;\\nmov.b32 {l, h}, %2;\\ncvt.f32.f16 %0, l;\\ncvt.f32.f16 %1, h;\\n}" : "=f"(hx), "=f"(hy) : "r"(hi));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"((y - hy) * 2048.f), "f"((x - hx) * 2048.f));
}

// D (64 x 32, fp32) += A (64 x 16, fp16 pairs in registers) * B (16 x 32, fp16, K-major, 128-byte swizzled)
__device__ __forceinline__ void wgmma_m64n32k16_f16(float (&d)[16], const u32 (&a)[4], unsigned long long b, int scale_d) {
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %21, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},"
                 " {%16, %17, %18, %19}, %20, p, 1, 1, 0;\\n}\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

"""
FP16 = [(A_SPLIT, A_SPLIT_FP16), (TF32_WGMMAS, FP16_WGMMAS), (FRAGMENTS_DONE, FRAGMENTS_DONE + ROW_SCALES),
        (ACCUMULATE, ACCUMULATE_FP16), (WGMMA_DECLARATION, FP16_HELPERS + WGMMA_DECLARATION)]
EMPTY_KERNEL = 'extern "C" __global__ void empty_kernel() {}'


def fp16_sources() -> dict:
    """`fp16`'s variants of step 08 (timed only; BLOCK_N 32): step 08 with FP16, and two of VARIANTS without and
    with it."""
    sources = {"as it is fp16": steps.substituted("fused/08_tile_flags", FP16)}
    for name in ("no split", "only the wgmmas"):
        sources[name] = variant_source(name)
        sources[name + " fp16"] = steps.replaced(sources[name], FP16, "fused/08_tile_flags")
    return sources


def variant_source(name: str, marks: bool = False, waits: bool = False, extra: list = ()) -> str:
    """Step 08's source with VARIANTS[name] made (name "08": as it is; marks: with the ring's marks,
    steps.RING_MARKS, too; waits: and WAIT_MARKS; extra: more substitutions first); a ValueError if 08 no longer
    has the text."""
    subs, no_split, _ = VARIANTS[name] if name != "08" else ([], False, True)
    marked = (steps.RING_MARKS if marks or waits else []) + (WAIT_MARKS if waits else [])
    text = steps.substituted("fused/08_tile_flags", marked + list(extra) + subs)
    return steps.without_split(text) if no_split else text


def multicast_source(cta_scope: bool = False) -> str:
    """Step 08 with multicast.patch applied (cta_scope: the stage's release arrives at the default CTA scope)."""
    text = steps.patched("fused/08_tile_flags", MULTICAST_PATCH)
    return text.replace(CLUSTER_ARRIVE, CTA_ARRIVE) if cta_scope else text


def multicast_step(cluster: int):
    """Step 08's FusedStep with the CLUSTER template parameter and the left operand's maps in boxes of
    64 / cluster rows."""
    from gemmlab import fusion

    st = fusion.get("fused/08_tile_flags")
    params = {**st.params, "CLUSTER": fusion.Param(cluster, (cluster,), "blocks per cluster, side by side along N")}
    maps = lambda backend, a, b, c, t, tile: fusion.tma_maps(backend, a, b, c, t, (tile[0] // cluster, tile[1]))  # noqa: E731
    return dataclasses.replace(st, params=params, tensor_maps=maps, summary=f"08 with clusters of {cluster} (multicast)")


def max_active_clusters(kern, smem: int) -> int:
    """cuOccupancyMaxActiveClusters for a kernel compiled with __cluster_dims__: how many of its clusters fit
    on the GPU at once (the SMs of a cluster must share a GPC, so fewer blocks than SMs x blocks per SM)."""
    class LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h)
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]

    cl = kern.params["CLUSTER"]
    kern.module.allow_dynamic_shared(smem)
    f = kern.module.function
    cfg = LaunchConfig((ctypes.c_uint * 3)(cl, 1, 1), (ctypes.c_uint * 3)(kern.step.threads(kern.params), 1, 1), smem)
    n = ctypes.c_int(0)
    err = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters(
        ctypes.byref(n), ctypes.c_void_p(getattr(f, "kernel", f).ptr), ctypes.byref(cfg))
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed: CUresult {err}")
    return n.value


def multicast_kernel(cluster: int, cta_scope: bool = False, **params):
    """multicast.patch as a FusedKernel on the GPU, its grid a whole number of clusters that fit at once."""
    from gemmlab import fusion
    from gemmlab.runtime.registry import cdiv

    class Clustered(fusion.FusedKernel):
        def grid_for(self, dims, grid=None):
            m, k, l, n = dims
            bn = self.params["BLOCK_N"]
            tiles = cdiv(m, 64) * max(cdiv(cdiv(x, bn), cluster) * cluster for x in (l, n))
            if not hasattr(self, "_clusters"):
                self._clusters = max_active_clusters(self, self.step.smem(self.params, dims))
                print(f"{self.label}: at most {self._clusters} clusters resident", flush=True)
            return min(tiles, self._clusters * cluster)

    return Clustered(multicast_step(cluster), {**params, "CLUSTER": cluster}, "gpu", source=multicast_source(cta_scope))


def calls() -> None:
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for n, tiles in ((512, TILES_512), (2048, TILES_2048)):
        a, b, c, want, launch = experiments.fusion_problem(n)
        out = cupy.empty((n, n), dtype=cupy.float32)
        launch["08"], err = fusion.checked_launcher(fusion.step("fused/08_tile_flags", **tiles), a, b, c, want)
        print(f"n={n} 08 {tiles}: error {err:.2e}")
        for name, (_, _, checked) in VARIANTS.items():
            if n > 512 and name != "no copies":
                continue
            k = fusion.step("fused/08_tile_flags", source=variant_source(name), **tiles)
            if checked:
                launch["08 " + name], err = fusion.checked_launcher(k, a, b, c, want)
                print(f"n={n} 08 {name}: error {err:.2e}")
            else:
                launch["08 " + name] = k.launcher(a, b, c, out)
        for cluster in ((2, 4) if n == 512 else (2,)):
            for scope, cta in (("cluster", False), ("cta", True)):
                k = multicast_kernel(cluster, cta, **tiles)
                launch[f"multicast {cluster} {scope}"], err = fusion.checked_launcher(k, a, b, c, want)
                print(f"n={n} multicast {cluster} {scope}: grid {k.launch_config((n,) * 4).grid[0]}, "
                      f"{k.module.function.num_regs} registers, error {err:.2e}")
                if n == 512:  # and on the chapter's shapes: structured, off the tile grid, NaN
                    print(f"multicast {cluster} {scope}: {fusion.check(k)}")
        experiments.time_rounds(launch, n, 300 if n == 512 else 50)


def rate_source(fp16: bool = False) -> str:
    """rate.cu assembled with common.cuh; fp16: with FP16_HELPERS (its m64n32k16 fp16 wgmma) put in front."""
    from gemmlab.runtime.source import assemble

    text = (HERE / "rate.cu").read_text()
    if fp16:
        text = text.replace('#include "common.cuh"\n', '#include "common.cuh"\n' + FP16_HELPERS, 1)
    return assemble("kernels/fused/08_tile_flags.cu", text)


def wgmma_rates(ns=(32, 64), groups=(1, 2, 3, 4), fp16: bool = False) -> None:
    """rate.cu on every SM, one line per (N, warpgroups per SM): FMA per clock per SM and TFLOP/s. fp16: its
    m64n32k16 fp16 wgmmas in place of the TF32 ones (N = 32 only)."""
    import cupy
    import numpy as np

    from gemmlab import gpu, kernel

    src, sms = rate_source(fp16), gpu.device()["sms"]
    iters = 2000
    for n in ns:
        for g in groups:
            expr = f"wgmma_rate<{n}, {g}, {'true' if fp16 else 'false'}>"
            mod = kernel.compiled_module("gpu", src, expr, expr, "sm_90a")
            out, cycles = cupy.zeros(1024, np.float32), cupy.zeros(sms * g, np.int64)
            args = [np.int32(iters), out, cycles]
            for _ in range(2):
                mod.launch((sms, 1, 1), (128 * g, 1, 1), args)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            mod.launch((sms, 1, 1), (128 * g, 1, 1), args)
            end.record()
            end.synchronize()
            seconds = cupy.cuda.get_elapsed_time(start, end) / 1e3
            fma = iters * 12 * 64 * n * 8 * g  # per SM
            clocks = float(cupy.median(cycles))
            print(f"rate{' fp16' if fp16 else ''} n={n} groups={g}: {fma / clocks:.1f} FMA/clk/SM "
                  f"{2 * fma * sms / seconds / 1e12:.1f} TFLOP/s", flush=True)


def rate() -> None:
    from gemmlab import gpu

    print(f"gpu: {gpu.device()['name']}")
    wgmma_rates()


SPLITTER_CALL = "        split_y(stages[stage], splits[slot]);\n"  # the splitter's work on a K tile


def splitter_source(split: bool = True) -> str:
    """Step 08 with splitter.patch applied (split=False: the splitter only waits and arrives, timed only)."""
    text = steps.patched("fused/08_tile_flags", SPLITTER_PATCH)
    return text if split else steps.replaced(text, [(SPLITTER_CALL, "")], "splitter.patch")


def splitter_kernel(backend: str | None = None, split: bool = True, **params):
    """splitter.patch as a FusedKernel: step 08's, with a warpgroup more and NUM_SPLITS split tiles."""
    from gemmlab import fusion

    source = splitter_source(split)
    splits = int(re.search(r"^constexpr int NUM_SPLITS = (\d+);", source, re.M).group(1))  # the patch's ring

    def smem(p, d=None):  # 08's, with the ring's split tiles in place of one per group, and their mbarriers
        return fusion.tma_smem(p, d) + (splits - p["SPLIT_K"]) * 2 * 4 * p["BLOCK_N"] * 32 + 16 * splits

    st = dataclasses.replace(fusion.get("fused/08_tile_flags"), smem=smem, rules=lambda p: fusion.tma_rules(p, smem),
                             threads=lambda p: 128 * p["SPLIT_K"] + 160, summary="08 with a splitter warpgroup")
    return fusion.FusedKernel(st, params, backend, source=source)


def handover_sources() -> dict:
    """The timed-only variants of step 08 that `handover` runs: HANDOVER's, and three of VARIANTS."""
    sources = {name: steps.substituted("fused/08_tile_flags", subs) for name, subs in HANDOVER.items()}
    return {**sources, **{name: variant_source(name) for name in ("returns at once", "no split", "only the wgmmas")}}


# `ordered`: K tile kt's wgmmas wait until K tile kt - 1's are issued. Barrier 11 + kt % SPLIT_K joins the group that
# takes K tile kt - 1 (bar.arrive once it has issued them) and the one that takes kt (bar.sync before its own); each
# arrival has its wait, so none is left over at a tile's end. Named barriers 11..14: SPLIT_K 2 to 4.
TURN_WAIT_AT = ("#pragma unroll\n        for (int kk = 0; kk < TILE_K / 8; ++kk) {  "
                "// three wgmmas per 8-wide slice, small terms first, as in 06\n")
TURN_WAIT = """        static_assert(SPLIT_K >= 2 && SPLIT_K <= 4, "the turns take named barriers 11 .. 10 + SPLIT_K");
        if (kt > 0)  // K tile kt - 1's wgmmas are issued: this group's turn at the tensor pipe
            asm volatile("bar.sync %0, %1;" :: "r"(11 + kt % SPLIT_K), "r"(256) : "memory");
"""
TURN_PASS_AT = "            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, big, 1);\n        }\n"
TURN_PASS = """        if (kt + 1 < ktiles)  // K tile kt + 1's turn
            asm volatile("bar.arrive %0, %1;" :: "r"(11 + (kt + 1) % SPLIT_K), "r"(256) : "memory");
"""
ORDERED = [(TURN_WAIT_AT, TURN_WAIT + TURN_WAIT_AT), (TURN_PASS_AT, TURN_PASS_AT + TURN_PASS)]
ORDERED_CONFIGS = {512: [(32, 3, 12), (32, 2, 12), (32, 4, 12)], 1024: [(64, 2, 8), (32, 3, 8)], 2048: [(64, 2, 8)]}


MARKED_VARIANTS = ("08", "no copies", "no split", "only the wgmmas")  # `marks`' variants (VARIANTS' names)

# `waits`, after steps.RING_MARKS: RING(7) before a consumer's wait for a full stage (RING(0) is after it), and the
# producer's marks, FETCH(i) in g_fetch[block][i][step]: before its wait for a free stage (0), after it (1), and after
# its copies were issued, or its arrival made in the variants without copies (2).
FULL_WAIT = FULL_WAIT_LINE + "        RING(0);\n"  # as steps.RING_MARKS leaves it
FETCH_END = "    }\n}\n\ntemplate <int BLOCK_N, int SPLIT_K, int NUM_STAGES>\n__global__"
WAIT_MARKS = [
    ("#define RING(i)", "__device__ unsigned long long g_fetch[1024][4][64];\n"
     '#define FETCH(i) do { unsigned long long now; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(now)); '
     "g_fetch[blockIdx.x][i][step] = now; } while (0)\n#define RING(i)"),
    (FULL_WAIT, "        RING(7);\n" + FULL_WAIT),
    (EMPTY_WAIT, "        FETCH(0);\n" + EMPTY_WAIT + "        FETCH(1);\n"),
    (FETCH_END, "        FETCH(2);\n" + FETCH_END),
]
# Is the producer what paces the K loop? Its thread sleeps for NS nanoseconds before each K tile's wait for a free
# stage (checked: the results do not change; a sleeping warp takes no issue slots from the consumers on its scheduler,
# as a spin would). If the consumers wait for it, the call grows by the added time per K tile times the 32 K tiles a
# block fetches. With WAIT_MARKS the sleep counts in the producer's wait for a free stage.
SLEEP = "        __nanosleep({ns});  // the producer slowed\n"
SLOWED_NS = (50, 100, 200)


def slowed_source(ns: int, waits: bool = False) -> str:
    """Step 08 with its producer sleeping `ns` nanoseconds before each K tile's wait for a free stage (waits: with
    WAIT_MARKS)."""
    marks = steps.RING_MARKS + WAIT_MARKS if waits else []
    return steps.substituted("fused/08_tile_flags", marks + [(EMPTY_WAIT, SLEEP.format(ns=ns) + EMPTY_WAIT)])


# `producers`: since the producer has no time to spare, give it a second warp. Warp SPLIT_K * 4 fetches the left
# operand's tile of each K tile, warp SPLIT_K * 4 + 1 the right operand's; each arrives on the full barrier (now
# expecting two arrivals) with its own bytes. Only the left operand's fetcher waits for T in phase 2: C does not
# depend on it, so its tiles go out during the hand-over. The two warps sit on different schedulers.
TWO_FETCHERS = "    const bool fetcher = threadIdx.x == SPLIT_K * 128;  // the producer warp's one working lane\n"
PRODUCERS = [
    ("__launch_bounds__(SPLIT_K * 128 + 32, 1)", "__launch_bounds__(SPLIT_K * 128 + 64, 1)"),
    (TWO_FETCHERS, "    const bool fetcher = threadIdx.x == SPLIT_K * 128 || threadIdx.x == SPLIT_K * 128 + 32;  "
                   "// lane 0 of each producer warp\n"),
    ("            mbarrier_init(&full[s], 1);   // the producer's arrive_expect_tx, plus the bytes\n",
     "            mbarrier_init(&full[s], 2);   // each fetcher's arrive_expect_tx, plus the bytes\n"),
    ("            if (producer && !first) {  // phase 2: the whole producer warp waits for the row panel of T\n",
     "            if (producer && !first && threadIdx.x < SPLIT_K * 128 + 32) {  "
     "// phase 2: T's fetcher waits for T\n"),
    (COPIES, """        if (threadIdx.x % 64 == 0) {  // the left operand's fetcher
            mbarrier_arrive_expect_tx(&full[stage], sizeof(Stage<BLOCK_N>::x));
            tma_load_2d(stages[stage].x, x_map, kt * TILE_K, block_row, &full[stage]);
        } else {  // the right operand's
            mbarrier_arrive_expect_tx(&full[stage], sizeof(Stage<BLOCK_N>::y));
#pragma unroll
            for (int j = 0; j < BLOCK_N / 32; ++j)
                tma_load_2d(stages[stage].y[j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);
        }
"""),
]


def producers_kernel(backend: str | None = None, marks: bool = False, **params):
    """Step 08 with PRODUCERS (marks: and the ring's marks): a FusedKernel with a second producer warp."""
    from gemmlab import fusion

    st = dataclasses.replace(fusion.get("fused/08_tile_flags"), threads=lambda p: 128 * p["SPLIT_K"] + 64,
                             summary="08 with a producer warp per operand")
    source = steps.substituted("fused/08_tile_flags", (steps.RING_MARKS if marks else []) + PRODUCERS)
    return fusion.FusedKernel(st, params, backend, source=source)


CONFIGS_TO_4096 = {  # `producers`' and `early`'s tilings per N: step 08's and one more at 1024
    512: [(32, 3, 12)], 1024: [(64, 2, 8), (32, 3, 8)], 2048: [(64, 2, 8)], 4096: [(64, 2, 8)]}


WAITED_VARIANTS = ("08", "no copies", "only the wgmmas", "only the wgmmas, no hand-over",  # `waits`' variants
                   "only the wgmmas, no ring")


def ordered_source(marks: bool = False) -> str:
    """Step 08 with ORDERED (and the ring's marks)."""
    return steps.substituted("fused/08_tile_flags", (steps.RING_MARKS if marks else []) + ORDERED)


def ring_stagger(variant: str, k, a, b, c, runs: int = 20) -> None:
    """For step 08 or a variant with the ring's marks: how far apart (us) consecutive groups start their split of B
    in the same round (K tiles r * SPLIT_K + g of a phase), the median over blocks, launches and rounds but each
    phase's first; and each group's time from one K tile to its next. Printed as "stagger VARIANT: ..." lines."""
    import numpy as np

    n, sk = a.shape[0], k.params["SPLIT_K"]
    per_phase = n // 32
    launch, cfg = steps.marked(k, a, b, c, "g_ring", (1024, 8, 64))
    # runs x blocks x marks x steps
    x = np.stack([launch()[:cfg.grid[0], :, :2 * per_phase] for _ in range(runs + 5)][5:])
    lags, periods = [], []
    for phase0 in (0, per_phase):
        for r in range(1, per_phase // sk):
            s = phase0 + r * sk
            lags.append(np.diff(x[:, :, 1, s:s + sk], axis=2))  # split starts of groups 0 .. SPLIT_K - 1
            periods.append(x[:, :, 0, s:s + sk] - x[:, :, 0, s - sk:s])
    lag, period = np.median(np.concatenate(lags, axis=2)) / 1e3, np.median(np.concatenate(periods, axis=2)) / 1e3
    print(f"stagger {variant}: {lag:.3f} us between consecutive groups' splits, {period:.3f} us a group's K tile")


def ring_at_512(sources: dict) -> None:
    """GPU only: for each name -> (source with the ring's marks, checked?) at step 08's 512 tiles, steps.ring_parts()
    (checking it first if asked) and ring_stagger()."""
    from gemmlab import fusion
    from lab import experiments

    a, b, c, want, _ = experiments.fusion_problem(512)
    for name, (source, checked) in sources.items():
        k = fusion.step("fused/08_tile_flags", source=source, **TILES_512)
        steps.ring_parts(name, k, a, b, c, want if checked else None)
        ring_stagger(name, k, a, b, c)


def step08_at_512(variants: dict):
    """GPU only: the problem at 512, torch `a @ b @ c` and step 08 at TILES_512 (checked), and step 08 with each
    of `variants` (name -> source, timed only), each launched directly and from a graph: (a, b, c, want, calls)."""
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, launch = experiments.fusion_problem(512)
    err = experiments.add_launchers(launch, "08", fusion.step("fused/08_tile_flags", **TILES_512), a, b, c, want)
    print(f"n=512 08 {TILES_512}: error {err:.2e}")
    for name, source in variants.items():
        k = fusion.step("fused/08_tile_flags", source=source, **TILES_512)
        experiments.add_launchers(launch, "08 " + name, k, a, b, c)
        print(f"n=512 08 {name}: {k.module.function.num_regs} registers", flush=True)
    return a, b, c, want, launch


def against_08(label: str, make, configs: dict) -> None:
    """GPU only: for each N and tiles (BLOCK_N, SPLIT_K, NUM_STAGES) in `configs`, step 08 and make(**tiles) (a
    FusedKernel on the GPU), both checked at full size and launched directly and from a CUDA graph, in turn with torch
    `a @ b @ c`, three rounds; the variant's calls are named LABEL TILES."""
    from gemmlab import fusion
    from lab import experiments

    for n, tilings in configs.items():
        a, b, c, want, launch = experiments.fusion_problem(n)
        for bn, split_k, stages in tilings:
            tiles, tag = dict(BLOCK_N=bn, SPLIT_K=split_k, NUM_STAGES=stages), f"n{bn} k{split_k} s{stages}"
            e08 = experiments.add_launchers(launch, "08 " + tag, fusion.step("fused/08_tile_flags", **tiles), a, b, c,
                                            want)
            k = make(**tiles)
            err = experiments.add_launchers(launch, f"{label} {tag}", k, a, b, c, want)
            print(f"n={n} {tag}: 08 error {e08:.2e}; {label} {k.module.function.num_regs} registers, error {err:.2e}",
                  flush=True)
        experiments.time_rounds(launch, n, {512: 300, 1024: 300, 2048: 100, 4096: 20}[n])


def handover() -> None:
    from gemmlab import fusion
    from lab import experiments

    n = 512
    a, b, c, want, launch = step08_at_512(handover_sources())
    print(f"splitter: {fusion.check(splitter_kernel('gpu', **TILES_512))}")
    for split_k in (3, 2):
        k = splitter_kernel("gpu", **{**TILES_512, "SPLIT_K": split_k})
        err = experiments.add_launchers(launch, f"splitter k{split_k}", k, a, b, c, want)
        print(f"n={n} splitter k{split_k}: {k.module.function.num_regs} registers, error {err:.2e}")
    experiments.add_launchers(launch, "splitter k3 no split", splitter_kernel("gpu", split=False, **TILES_512), a, b, c)
    experiments.time_rounds(launch, n, 300)


def fp16() -> None:
    import cupy

    from gemmlab import gpu
    from lab import experiments

    a, b, c, want, launch = step08_at_512({**fp16_sources(), "returns at once": variant_source("returns at once")})
    empty = cupy.RawKernel(EMPTY_KERNEL, "empty_kernel")
    launch["empty kernel"] = gpu.packed_launcher(empty, "empty", (1, 1, 1), (32, 1, 1), [])
    launch["empty kernel graph"] = gpu.graph_launcher(empty, "empty", (1, 1, 1), (32, 1, 1), [])
    experiments.time_rounds(launch, 512, 300)
    wgmma_rates(ns=(32,), groups=(1, 3))  # and the tensor pipe's rate for each, alone
    wgmma_rates(ns=(32,), groups=(1, 3), fp16=True)


def ordered() -> None:
    from gemmlab import fusion, gpu

    print(f"gpu: {gpu.device()['name']}")
    for split_k in (3, 4):
        k = fusion.step("fused/08_tile_flags", source=ordered_source(), **{**TILES_512, "SPLIT_K": split_k})
        print(f"ordered k{split_k}: {fusion.check(k)}")
    ring_at_512({"08": (variant_source("08", marks=True), True), "ordered": (ordered_source(marks=True), True)})
    against_08("ordered", lambda **tiles: fusion.step("fused/08_tile_flags", source=ordered_source(), **tiles),
               ORDERED_CONFIGS)


def ring_waits(variant: str, k, a, b, c, runs: int = 20) -> None:
    """For step 08 or a variant with WAIT_MARKS at 512, per phase: where the time between the end of a K tile's wgmmas
    and the next K tile past its wait for a full stage goes, and how far ahead of the consumers the producer is.
    Medians and means (us) over launches, blocks and the phase's K tiles but the first SPLIT_K, printed as
    "wait VARIANT: WHAT  PHASE 1 MEDIAN MEAN  PHASE 2 MEDIAN MEAN" lines."""
    import numpy as np

    n, sk = a.shape[0], k.params["SPLIT_K"]
    per_phase = n // 32
    launch, cfg = steps.marked_arrays(k, a, b, c, {"g_ring": (1024, 8, 64), "g_fetch": (1024, 4, 64)})
    got = [launch() for _ in range(runs + 5)][5:]
    ring = np.stack([g["g_ring"][:cfg.grid[0], :, :2 * per_phase] for g in got])  # runs x blocks x marks x steps, ns
    fetch = np.stack([g["g_fetch"][:cfg.grid[0], :3, :2 * per_phase] for g in got])
    start = ring[:, :, 0, :1, None].copy()  # each block's first pass of a full stage: the times from it, in us
    ring, fetch = (ring - start) / 1e3, (fetch - start) / 1e3
    waited = ring[:, :, 0] - ring[:, :, 7]
    figures = {
        "a group's K tile, one to the next": lambda s: ring[:, :, 0, s] - ring[:, :, 0, s - sk],
        "wgmmas done to the loop's top": lambda s: ring[:, :, 7, s] - ring[:, :, 6, s - sk],
        "wait for a full stage": lambda s: waited[:, :, s],
        "share of K tiles that wait 64 ns or more": lambda s: waited[:, :, s] >= 0.064,
        "copies issued before the consumer came": lambda s: ring[:, :, 7, s] - fetch[:, :, 2, s],
        "copies issued to the consumer past its wait": lambda s: ring[:, :, 0, s] - fetch[:, :, 2, s],
        "the same, where it waited 64 ns or more":
            lambda s: (ring[:, :, 0, s] - fetch[:, :, 2, s])[waited[:, :, s] >= 0.064],
        "producer's wait for a free stage": lambda s: fetch[:, :, 1, s] - fetch[:, :, 0, s],
        "producer's issue": lambda s: fetch[:, :, 2, s] - fetch[:, :, 1, s],
        "producer, one K tile to the next": lambda s: fetch[:, :, 0, s] - fetch[:, :, 0, s - 1],
    }
    print(f"waits {variant}: {k.params}, {cfg.grid[0]} blocks; us (phase 1 median, mean; phase 2 median, mean)")
    for what, f in figures.items():
        xs = [f(np.arange(p * per_phase + sk, (p + 1) * per_phase)) for p in (0, 1)]
        cols = " ".join(f"{np.median(x):7.3f} {np.mean(x):7.3f}" for x in xs)
        print(f"wait {variant}: {what:44s} {cols}")
    # and each phase's K loops whole, every K tile counted: a block's first full stage to its last wgmmas done
    spans = [ring[:, :, 6, p * per_phase:(p + 1) * per_phase].max(axis=2)
             - ring[:, :, 0, p * per_phase:(p + 1) * per_phase].min(axis=2) for p in (0, 1)]
    cols = " ".join(f"{np.median(x):7.3f} {np.mean(x):7.3f}" for x in spans)
    print(f"wait {variant}: {'K loops, first full stage to last wgmmas':44s} {cols}")


def waits() -> None:
    from gemmlab import fusion
    from lab import experiments

    a, b, c, want, launch = step08_at_512({name: variant_source(name) for name in WAITED_VARIANTS[1:]})
    for name in WAITED_VARIANTS:
        k = fusion.step("fused/08_tile_flags", source=variant_source(name, waits=True), **TILES_512)
        steps.ring_parts(name, k, a, b, c, want if name == "08" else None)
        ring_waits(name, k, a, b, c)
    for ns in SLOWED_NS:  # how much later the producer's K tiles come (marked), and its call (checked)
        k = fusion.step("fused/08_tile_flags", source=slowed_source(ns, waits=True), **TILES_512)
        ring_waits(f"producer sleeps {ns}", k, a, b, c)
        k = fusion.step("fused/08_tile_flags", source=slowed_source(ns), **TILES_512)
        err = experiments.add_launchers(launch, f"producer sleeps {ns}", k, a, b, c, want)
        print(f"n=512 08 producer sleeps {ns} ns: error {err:.2e}", flush=True)
    experiments.time_rounds(launch, 512, 300)


def producers() -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    print(f"producers: {fusion.check(producers_kernel('gpu', **TILES_512))}")
    ring_at_512({"08": (variant_source("08", marks=True), True)})
    a, b, c, want, _ = experiments.fusion_problem(512)
    k = producers_kernel("gpu", marks=True, **TILES_512)
    steps.ring_parts("producers", k, a, b, c, want)
    ring_stagger("producers", k, a, b, c)
    against_08("producers", lambda **tiles: producers_kernel("gpu", **tiles), CONFIGS_TO_4096)


# `early`: a group waits for its next K tile's stage while this K tile's wgmmas run (after their commit, before the
# wait for them), so that the wait's own cost, which `waits` found even when the stage is long full, overlaps them.
EARLY = [
    (FULL_WAIT_LINE, "        if (kt == group) mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  "
                     "// the first K tile has landed (the others: below)\n"),
    ("        wgmma_commit();\n        wgmma_wait<0>();\n",
     """        wgmma_commit();
        if (kt + SPLIT_K < ktiles)  // the group's next K tile has landed, waited for while these wgmmas run
            mbarrier_wait(&full[(step + SPLIT_K) % NUM_STAGES], ((step + SPLIT_K) / NUM_STAGES) & 1);
        wgmma_wait<0>();
"""),
]


def early() -> None:
    from gemmlab import fusion, gpu

    print(f"gpu: {gpu.device()['name']}")
    source = steps.substituted("fused/08_tile_flags", EARLY)
    for split_k in (3, 2):
        k = fusion.step("fused/08_tile_flags", source=source, **{**TILES_512, "SPLIT_K": split_k})
        print(f"early k{split_k}: {fusion.check(k)}")
    ring_at_512({"08": (variant_source("08", marks=True), True),
                 "early": (steps.substituted("fused/08_tile_flags", steps.RING_MARKS + EARLY), True)})
    against_08("early", lambda **tiles: fusion.step("fused/08_tile_flags", source=source, **tiles), CONFIGS_TO_4096)


# `wide`: phase 1 alone at 512 with 08's tiles, and on a shape with half the K tiles and tiles twice as wide (the same
# 128 blocks and multiply-adds per block). (label, (M, K, L, N), (BLOCK_N, SPLIT_K, NUM_STAGES)).
WIDE_CONFIGS = [("K512", (512, 512, 512, 512), (32, 3, 12)), ("K256", (1024, 256, 512, 512), (64, 2, 8)),
                ("K256", (1024, 256, 512, 512), (64, 3, 8))]
WIDE_VARIANTS = ("08", "no split", "only the wgmmas")  # VARIANTS' names, each with phase 2 left out


def phase1_source(name: str) -> str:
    """Step 08's source with phase 2 left out and VARIANTS[name] made (name "08": nothing more)."""
    return variant_source(name, extra=[(PHASE_2, "")])


def wide() -> None:
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments
    from gemmlab.errors import VerificationError

    print(f"gpu: {gpu.device()['name']}")
    calls = {}
    for label, dims, (bn, split_k, stages) in WIDE_CONFIGS:
        m, k, l, n = dims
        a, b, c = (cupy.asarray(x) for x in fusion.make_inputs("uniform", m, k, l, n))
        tag = f"{label} n{bn} k{split_k} s{stages}"
        for name in WIDE_VARIANTS:
            kern = fusion.step("fused/08_tile_flags", source=phase1_source(name), BLOCK_N=bn, SPLIT_K=split_k,
                               NUM_STAGES=stages)
            experiments.add_launchers(calls, f"phase 1 {tag}" + ("" if name == "08" else " " + name), kern, a, b, c)
            if name == "08":  # phase 1 as it is computes T = A B: check it
                t = kern.workspace(cupy, m, l)[0]
                want = a.astype(np.float64) @ b.astype(np.float64)
                err = float(cupy.abs(t - want).max() / cupy.abs(want).max())
                if not err < 1e-5:
                    raise VerificationError(f"phase 1 {tag}: T's max error {err:.3g} of max |T|: not timed")
                print(f"phase 1 {tag}: grid {kern.launch_config(dims).grid[0]}, {kern.resources()}, "
                      f"error of T {err:.2e}", flush=True)
        kern = fusion.step("fused/08_tile_flags", source=variant_source("returns at once"), BLOCK_N=bn,
                           SPLIT_K=split_k, NUM_STAGES=stages)
        experiments.add_launchers(calls, f"returns at once {tag}", kern, a, b, c)
    experiments.time_rounds(calls, 512, 300)


# `presplit`: the right operand split once, up front, by the whole grid, into copies K-major as the wgmmas read
# them; TMA then brings a K tile's big and small halves, and the consumers only read their A fragments and multiply.
# Phase 2 reads C split; phase 1 reads B split too with PRESPLIT_B.
PRESPLIT_B = "constexpr bool PRESPLIT_B = false;"


def presplit_source(split_b: bool = False) -> str:
    """Step 08 with presplit.patch applied; split_b: phase 1 reads B split up front too."""
    text = steps.patched("fused/08_tile_flags", PRESPLIT_PATCH)
    return steps.replaced(text, [(PRESPLIT_B, PRESPLIT_B.replace("false", "true"))], "presplit.patch") if split_b else text


def presplit_kernel(backend: str | None = None, split_b: bool = False, source: str | None = None, **params):
    """presplit.patch as a FusedKernel (`source`: a variant of its source): step 08's, its stages holding a
    right-operand tile twice (big and small), and five arguments more: the split copies of B and C (zeroed once: rows
    past L and N stay zero, what TMA reads for a tile's missing columns), two words that count the blocks past the
    split, and the copies' maps."""
    from gemmlab import fusion, tma
    from gemmlab.runtime.registry import cdiv

    def smem(p, d=None):  # 08's, with each stage's right-operand tile twice as large
        return fusion.tma_smem(p, d) + p["NUM_STAGES"] * 4 * fusion.WGMMA_TILE_K * p["BLOCK_N"]

    class Presplit(fusion.FusedKernel):
        def launch_args(self, a, b, c, e, grid=None):
            cfg, args = super().launch_args(a, b, c, e, grid)
            xp = np if isinstance(a, np.ndarray) else __import__("cupy")
            (k, l), n, bn = b.shape, c.shape[1], self.params["BLOCK_N"]
            key = (xp.__name__, k, l, n)
            if key != getattr(self, "_split_key", None) or xp is np:
                self._split_key = key
                self._split = (xp.zeros((2 * cdiv(l, bn) * bn, k), np.float32),
                               xp.zeros((2 * cdiv(n, bn) * bn, l), np.float32), xp.zeros(2, np.uint32))
            bs, cs, ready = self._split
            maps = [tma.tensor_map(self.backend, x, index, bn, fusion.WGMMA_TILE_K) for x, index in ((bs, 14), (cs, 15))]
            return cfg, args + [bs, cs, ready] + maps

    st = dataclasses.replace(fusion.get("fused/08_tile_flags"), smem=smem, rules=lambda p: fusion.tma_rules(p, smem),
                             summary="08 with B and C split once, up front")
    return Presplit(st, params, backend, source=source or presplit_source(split_b))


# (label, substitutions in presplit.patch's source, checked): where the call's time goes
PRESPLIT_PHASE_2 = "    phase(true, N, L, t_map, c_map, E, false, cs_map, n_padded);"
NOT_READ = [(PRESPLIT_PHASE_2, PRESPLIT_PHASE_2.replace("(true,", "(false,"))]  # phase 2 splits C itself, as step 08
NOT_SPLIT = [("        split_up_front(C, L, N, n_padded, c_split, warp, warps);\n", "")]  # nothing split up front
PRESPLIT_VARIANTS = [
    ("split, unread", NOT_READ, True),
    ("read, unsplit", NOT_SPLIT, False),
    # the split tile's stage released before its wgmmas, as step 08 releases a raw one (may race)
    ("read, unsplit, released early", NOT_SPLIT + [
        ("        if (!PRE) {\n            bar_sync(1 + group, NUM_THREADS);  // the split tile is whole",
         "        {\n            bar_sync(1 + group, NUM_THREADS);  // the split tile is whole"),
        ("        if (PRE) {\n            bar_sync(1 + group, NUM_THREADS);  // the group's wgmmas",
         "        if (false) {\n            bar_sync(1 + group, NUM_THREADS);  // the group's wgmmas")], False),
    ("raw", NOT_READ + NOT_SPLIT, True),  # step 08's path in this kernel: its larger stages and counters only
    ("raw, twice the bytes", NOT_READ + NOT_SPLIT + [  # and each K tile brings the right operand twice, unread
        ("4 * TILE_M * TILE_K + (PRE ? 2 : 1) * 4 * BLOCK_N * TILE_K;", "4 * TILE_M * TILE_K + 2 * 4 * BLOCK_N * TILE_K;"),
        ("                tma_load_2d(stages[stage].y[j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);\n",
         "                tma_load_2d(stages[stage].y[j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);\n"
         "#pragma unroll\n            for (int j = 0; j < BLOCK_N / 32; ++j)\n"
         "                tma_load_2d(stages[stage].y[BLOCK_N / 32 + j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);\n")],
     True),
]


def presplit() -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for split_b in (False, True):
        for tiles in ({**TILES_512, "NUM_STAGES": 11}, {**TILES_2048, "NUM_STAGES": 6}):
            print(f"presplit{' B and C' * split_b}: {fusion.check(presplit_kernel('gpu', split_b, **tiles))}", flush=True)
    a, b, c, want, launch = experiments.fusion_problem(512)
    tiles = {**TILES_512, "NUM_STAGES": 11}
    for stages in (12, 11):
        k = fusion.step("fused/08_tile_flags", **{**tiles, "NUM_STAGES": stages})
        print(f"n=512 08 s{stages}: error {experiments.add_launchers(launch, f'08 s{stages}', k, a, b, c, want):.2e}")
    for split_b in (False, True):
        k = presplit_kernel("gpu", split_b, **tiles)
        name = "presplit" + " B and C" * split_b
        err = experiments.add_launchers(launch, name, k, a, b, c, want)
        print(f"n=512 {name}: {k.module.function.num_regs} registers, error {err:.2e}", flush=True)
    for label, subs, checked in PRESPLIT_VARIANTS:
        k = presplit_kernel("gpu", source=steps.replaced(presplit_source(), subs, "presplit.patch"), **tiles)
        err = experiments.add_launchers(launch, f"presplit {label}", k, a, b, c, want if checked else None)
        print(f"n=512 presplit {label}: {k.module.function.num_regs} registers"
              + (f", error {err:.2e}" if checked else ", timed only"), flush=True)
    marked_08 = fusion.step("fused/08_tile_flags", source=steps.substituted("fused/08_tile_flags", STEP_08_MARKS), **tiles)
    steps.block_marks("08", marked_08, a, b, c, {i: SPLIT_MARKS[i] for i in (0, 2, 3)})
    for label, subs in [("as it is", []), ("split, unread", NOT_READ), ("raw", NOT_READ + NOT_SPLIT)]:
        source = steps.replaced(presplit_source(), PRESPLIT_MARKS + subs, "presplit.patch")
        steps.block_marks(label, presplit_kernel("gpu", source=source, **tiles), a, b, c, SPLIT_MARKS)
    experiments.time_rounds(launch, 512, 300)
    against_08("presplit", lambda **tiles: presplit_kernel("gpu", **tiles), PRESPLIT_CONFIGS)


# steps.TIMELINE_MARKS' MARK(i) (its first two: the macro, and MARK(0) at the kernel's start), and thread 0 of each
# block marks the end of the split up front (1), of its tiles of phase 1 (2) and of the block (3); step 08 all but (1).
SPLIT_MARKS = {0: "start", 1: "split done", 2: "phase 1 done", 3: "end"}
PRESPLIT_MARKS = steps.TIMELINE_MARKS[:2] + [
    ("        if (threadIdx.x == 0) atom_add_release_gpu(&ready[0], 1);\n",
     "        MARK(1);\n        if (threadIdx.x == 0) atom_add_release_gpu(&ready[0], 1);\n"),
    ("l_padded);  // phase 1: T = A * B\n", "l_padded);  // phase 1: T = A * B\n    MARK(2);\n"),
    ("    if (fetcher) await_split(ready, seen);", "    if (fetcher) await_split(ready, seen);\n    __syncthreads();\n    MARK(3);"),
]
STEP_08_MARKS = steps.TIMELINE_MARKS[:2] + [
    ("each tile announced when stored\n", "each tile announced when stored\n    MARK(2);\n"),
    ("each K tile of T awaited\n", "each K tile of T awaited\n    __syncthreads();\n    MARK(3);\n"),
]


PRESPLIT_CONFIGS = {1024: [(64, 2, 6), (32, 3, 10)], 2048: [(64, 2, 6)], 4096: [(64, 2, 6)]}


# `readsplit` (8b's exercise 4): why phase 2 reading C split saves so little. The ring's marks (steps.RING_MARKS'
# parts, WAIT_MARKS' loop top and producer marks) in presplit.patch's consumer loop, on both paths: each part of a
# K tile, and the waits between K tiles, phase by phase, for step 08's path in the patched kernel ("raw"), for C
# read split with nothing split up front (timed only) and for the patch as it is. Phase 1 takes step 08's path in
# all three, so it is the control. On the split path a mark stands where the barrier or split it follows would be.
READSPLIT_RING_MARKS = [
    steps.RING_MARKS[0], WAIT_MARKS[0],  # the macros
    (FULL_WAIT_LINE + "        if (!PRE) {  // else Y's tile came split: the wgmmas read it in the stage\n"
     "            bar_sync(1 + group, NUM_THREADS);  // and the group's wgmmas of its last K tile are done with `split`\n"
     "            split_y(s);\n        }\n",
     "        RING(7);\n" + FULL_WAIT_LINE + "        RING(0);\n        if (!PRE) bar_sync(1 + group, NUM_THREADS);\n"
     "        RING(1);\n        if (!PRE) split_y(s);\n        RING(2);\n"),
    ("        if (!PRE) {\n            bar_sync(1 + group, NUM_THREADS);  // the split tile is whole",
     "        RING(3);\n        if (!PRE) {\n            bar_sync(1 + group, NUM_THREADS);  // the split tile is whole"),
    ("            if (tid == 0) mbarrier_arrive(&empty[stage]);  // the producer may refill it\n        }\n",
     "            if (tid == 0) mbarrier_arrive(&empty[stage]);  // the producer may refill it\n        }\n        RING(4);\n"),
    steps.RING_MARKS[-1], WAIT_MARKS[2],  # around the wgmmas' commit and wait, and the producer's wait (as in 08)
    ("        }\n    }\n}\n\n// Y (inner x cols, row-major) split once",
     "        }\n        FETCH(2);\n    }\n}\n\n// Y (inner x cols, row-major) split once"),
]
READSPLIT_VARIANTS = [("raw", NOT_READ + NOT_SPLIT, True), ("read, unsplit", NOT_SPLIT, False), ("as it is", [], True)]
NO_SPLIT_P2 = HANDOVER["no split in phase 2"]  # step 08's consumers without phase 2's split (timed only)


def readsplit_source(subs) -> str:
    """presplit.patch's source with READSPLIT_RING_MARKS, then the substitutions `subs`."""
    return steps.replaced(presplit_source(), READSPLIT_RING_MARKS + subs, "presplit.patch")


def readsplit() -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    def step08(extra, marked: bool):  # step 08 at its 12 stages, with the substitutions `extra`
        return fusion.step("fused/08_tile_flags", source=variant_source("08", waits=marked, extra=extra), **TILES_512)

    def patch(subs, marked: bool):  # presplit.patch at 11 stages, with the substitutions `subs`
        source = readsplit_source(subs) if marked else steps.replaced(presplit_source(), subs, "presplit.patch")
        return presplit_kernel("gpu", source=source, **{**TILES_512, "NUM_STAGES": 11})

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, launch = experiments.fusion_problem(512)
    # marked: step 08, step 08 without phase 2's split (timed only), then the patch's variants
    marked = [("08", step08([], True), True), ("08, no split in phase 2", step08(NO_SPLIT_P2, True), False)]
    marked += [(label, patch(subs, True), checked) for label, subs, checked in READSPLIT_VARIANTS]
    for label, k, checked in marked:
        for phase in (0, 1):
            steps.ring_parts(f"{label} phase {phase + 1}", k, a, b, c, want if checked else None, phase=phase)
        ring_waits(label, k, a, b, c)
    # the same kernels without marks, timed in turn with torch `a @ b @ c`
    calls = {"08": (step08([], False), True), "08 no split in phase 2": (step08(NO_SPLIT_P2, False), False)}
    calls.update({f"presplit {label}": (patch(subs, False), checked) for label, subs, checked in READSPLIT_VARIANTS})
    for label, (k, checked) in calls.items():
        err = experiments.add_launchers(launch, label, k, a, b, c, want if checked else None)
        print(f"n=512 {label}: " + (f"error {err:.2e}" if checked else "timed only"), flush=True)
    experiments.time_rounds(launch, 512, 300)


def marks() -> None:
    from gemmlab import gpu

    print(f"gpu: {gpu.device()['name']}")
    ring_at_512({name: (variant_source(name, marks=True), name == "08") for name in MARKED_VARIANTS})


if __name__ == "__main__":
    COMMANDS = {"calls": calls, "rate": rate, "handover": handover, "fp16": fp16, "ordered": ordered, "marks": marks,
                "waits": waits, "producers": producers, "early": early, "wide": wide, "presplit": presplit,
                "readsplit": readsplit}
    if sys.argv[1:2] and sys.argv[1] in COMMANDS:
        COMMANDS[sys.argv[1]]()
    else:
        sys.exit(f"usage: limits.py {{{','.join(COMMANDS)}}} (see the module's docstring)")
