"""Fused step 07 (TMA producer) against 06 and 05, and what each part of 06's work costs, at N = 512.

    python lab/fusion-tma/steps.py parts 512 > results/experiments/fusion-tma/parts-<gpu>-<date>.log    # on an H100 / H200
    python lab/fusion-tma/steps.py time 512 1024 2048 4096 > results/experiments/fusion-tma/steps-<gpu>-<date>.log
    python lab/fusion-tma/steps.py serialized > results/experiments/fusion-tma/serialized-<gpu>-<date>.log
    python lab/fusion-tma/steps.py timeline > results/experiments/fusion-tma/timeline-<gpu>-<date>.log
    python lab/fusion-tma/steps.py ring > results/experiments/fusion-tma/ring-<gpu>-<date>.log
    python lab/fusion-tma/steps.py loads > results/experiments/fusion-tma/loads-<gpu>-<date>.log
    python lab/fusion-tma/steps.py transposed > results/experiments/fusion-tma/transposed-<gpu>-<date>.log
    python lab/fusion-tma/steps.py flags > results/experiments/fusion-tma/flags-<gpu>-<date>.log
    python lab/fusion-tma/steps.py record    # the logs -> results.json

`parts`: step 06 (its fastest tiles at 512 in the H200 sweep) launched as it is and with one part of
its work taken out at a time (the results are then wrong: these variants are timed, never checked),
next to a kernel that returns at once with the same launch, and torch `a @ b @ c`: what each part adds
to the call. `time`: torch and cupy `a @ b @ c`, steps 05 and 06 at their fastest recorded tiles, step
07 at each configuration below, every kernel checked against float64 at full size first; all launched
in turn with CUDA events around each launch (packed launchers), three rounds. `serialized`: step 07 as
it is against step 07 with its A fragments split the way it first did (all of them before one wgmma fence,
which let the compiler move the split in between the wgmmas, so that ptxas serialized them: its warning
C7519), both checked, at the fastest configurations of `time`, three rounds. `timeline`: step 07 at 512
(its fastest tiles) with thread 0 of each block writing the GPU's %globaltimer at eleven points of its
call (TIMELINE_MARKS), as it is and with phase 2's split of C taken out (timed only), and the event time of the
same launch as it is and returning at once. `ring`: step 07 at 512 with thread 0 of each consumer group
writing %globaltimer around each part of its work on every K tile (RING_MARKS), as it is and with the
B tile split element by element as it first was (ELEMENTWISE: each load waited for the previous element's
stores), both checked. `loads`: those two, timed in the same run at the configurations of `serialized`,
and with the split's work taken out (NO_SPLIT, timed only: what no split at all would give).
`transposed`: step 07 computing each tile transposed (transposed.patch) so that its split needs no
transpose, checked on the GPU, timed against step 07 at the fastest tiles of both (same run), and the ring's
parts of both at 512 with one, two and three consumer groups.
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))

STEP06_512 = dict(BLOCK_N=32, SPLIT_K=4, NUM_STAGES=3)
LOAD = "        Stage<BLOCK_N>& s = stages[stage];\n"
SPLIT_LOOP = "        for (int i = 0; i < BLOCK_N / 4; ++i) {\n            const int p = i * 4 + warp_id;"
WGMMA_LOOP = "        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // k kk*8"
LDMATRIX = "            ldmatrix_x4(raw[0], raw[1], raw[2], raw[3], &s.x[warp_row + lane_id % 16][kk * 8 + lane_id / 16 * 4]);"
BARRIER = "    grid_barrier(sync);  // all of T"
# name: [(text in 06, what replaces it)]; each takes one part out and leaves the rest as it is
PARTS = {
    "no copies": [(LOAD, LOAD + "        if (k0 >= 0) return;  // the stage keeps what it held\n")],
    "no split of B": [(SPLIT_LOOP, SPLIT_LOOP.replace("i < BLOCK_N / 4", "i < 0"))],
    "no wgmmas": [(WGMMA_LOOP, WGMMA_LOOP.replace("kk < TILE_K / 8", "kk < 0"))],
    "no A fragment loads": [(LDMATRIX, "            raw[0] = raw[1] = raw[2] = raw[3] = lane_id;")],
    "phase 1 only": [(BARRIER, "    return;\n" + BARRIER)],
    "phase 1 and the barrier": [(BARRIER, "    grid_barrier(sync);\n    return;  // all of T")],
    "returns at once": [("    // Phase 1: T = A * B (M x L), tile by tile.", "    if (M > 0) return;")],
    "no copies, no split": [(LOAD, LOAD + "        if (k0 >= 0) return;\n"),
                            (SPLIT_LOOP, SPLIT_LOOP.replace("i < BLOCK_N / 4", "i < 0"))],
}

CONFIGS = {  # step 07's tiles: (BLOCK_N, SPLIT_K, NUM_STAGES) per size
    512: [(32, 4, 8), (32, 4, 4), (32, 4, 12), (32, 2, 8), (32, 3, 8), (32, 6, 8), (64, 2, 6)],
    1024: [(32, 4, 8), (32, 2, 8), (64, 2, 6), (64, 3, 6), (64, 1, 6)],
    2048: [(64, 1, 6), (64, 2, 6), (64, 3, 6), (32, 2, 8)],
    4096: [(64, 1, 6), (64, 2, 6), (64, 3, 6)],
}
REPEATS = {512: 300, 1024: 200, 2048: 50, 4096: 10}


# Step 07's A fragments as it first split them: every slice split as it is loaded, one wgmma fence for all.
# Left to itself the compiler moved the split's subtractions in between the wgmmas, and ptxas then waited
# for each wgmma before issuing the next (warning C7519: Resources.wgmma_serialized).
SPLIT_NOW = """        u32 raw[TILE_K / 8][4];
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk)  // the A fragment by one ldmatrix.x4, as in 06, swizzled
            ldmatrix_x4(raw[kk][0], raw[kk][1], raw[kk][2], raw[kk][3], &s.x[swizzled(warp_row + lane_id % 16, kk * 8 + lane_id / 16 * 4)]);
        bar_sync(1 + group, NUM_THREADS);  // the split tile is whole, and nobody reads the stage any more
        if (tid == 0) mbarrier_arrive(&empty[stage]);  // the producer may refill it
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // three wgmmas per 8-wide slice, small terms first, as in 06
            u32 a_big[4], a_small[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[kk][q]), a_big[q], a_small[q]);
            wgmma_fence_operands(a_big);  // split before the fence, not in between the wgmmas (see common.cuh)
            wgmma_fence_operands(a_small);
            wgmma_fence();
            const unsigned long long big = wgmma_desc_sw128(&split.big[0][kk * 8], 16, 1024);
            const unsigned long long small = wgmma_desc_sw128(&split.small[0][kk * 8], 16, 1024);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_small, big, kk > 0);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, small, 1);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, big, 1);
"""
SPLIT_FIRST = """        u32 a_big[TILE_K / 8][4], a_small[TILE_K / 8][4];
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // the A fragment by one ldmatrix.x4, split at once
            u32 raw[4];
            ldmatrix_x4(raw[0], raw[1], raw[2], raw[3], &s.x[swizzled(warp_row + lane_id % 16, kk * 8 + lane_id / 16 * 4)]);
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[q]), a_big[kk][q], a_small[kk][q]);
        }
        bar_sync(1 + group, NUM_THREADS);
        if (tid == 0) mbarrier_arrive(&empty[stage]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {
            const unsigned long long big = wgmma_desc_sw128(&split.big[0][kk * 8], 16, 1024);
            const unsigned long long small = wgmma_desc_sw128(&split.small[0][kk * 8], 16, 1024);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_small[kk], big, kk > 0);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big[kk], small, 1);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big[kk], big, 1);
"""
# The fastest configurations of `time` (and of the lane's sweep at 512), and n64 k3, which spills.
SERIALIZED_CONFIGS = {512: [(32, 3, 8), (32, 2, 12)], 1024: [(64, 2, 6), (64, 3, 6)], 2048: [(64, 2, 6), (64, 3, 6)],
                      4096: [(64, 2, 6)]}


def serialized_source() -> str:
    """Step 07's source with its A fragments split as it first did (SPLIT_FIRST)."""
    return patched07([(SPLIT_NOW, SPLIT_FIRST)])


def against(before: str, before_source: str, timed_only: dict | None = None) -> None:
    """Step 07 as it is against `before_source` (its source as it was), both checked, same run, every size;
    `timed_only`: {label: source} of variants whose results are wrong, timed next to them, never checked."""
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for n, configs in SERIALIZED_CONFIGS.items():
        a, b, c, want, calls = experiments.fusion_problem(n)
        del calls["torch a@b@c"]  # the kernels against each other only
        for bn, sk, ns in configs:
            p = dict(BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            for label, source in ((before, before_source), ("as it is", None)):
                k = fusion.step("fused/07_tma_tf32x3", source=source, **p)
                calls[f"{name07(bn, sk, ns)} {label}"], err = fusion.checked_launcher(k, a, b, c, want)
                r = fusion.resources("fused/07_tma_tf32x3", "sm_90", source=source, **p)
                print(f"config n={n} {name07(bn, sk, ns)} {label}: {r.registers} registers, "
                      f"wgmmas serialized {r.wgmma_serialized}, error {err:.2e}")
            for label, source in (timed_only or {}).items():
                k = fusion.step("fused/07_tma_tf32x3", source=source, **p)
                calls[f"{name07(bn, sk, ns)} {label}"] = k.launcher(a, b, c, cupy.empty((n, n), dtype=cupy.float32))
        experiments.time_rounds(calls, n, REPEATS[n])


def serialized() -> None:
    """Step 07 against its first split of the A fragments (C7519)."""
    against("split first", serialized_source())


def loads() -> None:
    """Step 07 against its B tile split element by element, and without the split's work (timed only)."""
    against("split element by element", patched07(ELEMENTWISE), {"no split": patched07(NO_SPLIT)})


# Where step 07's call goes: thread 0 of each block writes %globaltimer (ns, one clock for all SMs) at
# eleven points; (name, text in 07, what replaces it). The marks add a few stores to thread 0's path.
MARKS = ["start", "init done", "p1 first data", "p1 K loop done", "p1 stored", "before barrier", "after barrier",
         "p2 first data", "p2 K loop done", "p2 stored", "end"]
TIMELINE_MARKS = [
    ('#include "common.cuh"\n', '#include "common.cuh"\n__device__ unsigned long long g_marks[1024][16];\n'
     '#define MARK(i) do { if (threadIdx.x == 0) { unsigned long long now; '
     'asm volatile("mov.u64 %0, %globaltimer;" : "=l"(now)); g_marks[blockIdx.x][i] = now; } } while (0)\n'),
    ("    extern __shared__ __align__(1024) unsigned char smem_raw[];\n",
     "    MARK(0);\n    extern __shared__ __align__(1024) unsigned char smem_raw[];\n"),
    ("    __syncthreads();\n\n    u32 step = 0;", "    __syncthreads();\n    MARK(1);\n\n    u32 step = 0;"),
    ("        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n",
     "        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n"
     "        if (kt == group) MARK(step0 == 0 ? 2 : 7);\n"),
    ("    // Groups 1 .. SPLIT_K - 1 hand their sums to group 0",
     "    MARK(step0 == 0 ? 3 : 8);\n    // Groups 1 .. SPLIT_K - 1 hand their sums to group 0"),
    ("    if (SPLIT_K > 1) bar_sync(9, CONSUMERS);  // group 0 has read",
     "    MARK(step0 == 0 ? 4 : 9);\n    if (SPLIT_K > 1) bar_sync(9, CONSUMERS);  // group 0 has read"),
    ("    grid_barrier(sync);  // all of T", "    MARK(5);\n    grid_barrier(sync);\n    MARK(6);  // all of T"),
    ("    phase(N, L, t_map, c_map, E);  // phase 2: E = T * C (M x N)\n",
     "    phase(N, L, t_map, c_map, E);  // phase 2: E = T * C (M x N)\n    MARK(10);\n"),
]
# Phase 2 without the split of C (each round's split, its proxy fence and the barrier before it): the results are
# then wrong, so this variant is timed, never checked. What phase 2's K loop would take if C came split.
NO_SPLIT_P2 = [("        bar_sync(1 + group, NUM_THREADS);  // and the group's wgmmas of its last K tile are done with `split`\n"
                "        split_y(s);\n",
                "        if (step0 == 0) {  // phase 1 only\n"
                "            bar_sync(1 + group, NUM_THREADS);\n"
                "            split_y(s);\n"
                "        }\n")]
TIMELINE_VARIANTS = {"as it is": [], "phase 2 without the split": NO_SPLIT_P2}
RETURNS = [("    extern __shared__ __align__(1024) unsigned char smem_raw[];\n",
            "    if (M > 0) return;\n    extern __shared__ __align__(1024) unsigned char smem_raw[];\n")]
TIMELINE_512 = dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=8)

# Step 07's split of the B tile as it first was: element by element, so that the compiler kept each load
# after the previous element's stores (it cannot tell the stage from the split tile apart).
SPLIT_BATCHED = """        constexpr int BATCH = 8;  // BLOCK_N / 4 elements a thread; more loads in flight would cost registers
#pragma unroll
        for (int i0 = 0; i0 < BLOCK_N / 4; i0 += BATCH) {
            float v[BATCH];
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                int k, n;
                element(i0 + i, k, n);
                v[i] = s.y[n / 32][swizzled(k, n % 32)];
            }
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                int k, n;
                element(i0 + i, k, n);
                const int at = (k / 4 ^ n % 8) * 4 + k % 4;
                split_tf32(v[i], split.big[n][at], split.small[n][at]);
            }
        }
"""
SPLIT_ELEMENTWISE = """#pragma unroll
        for (int i = 0; i < BLOCK_N / 4; ++i) {
            int k, n;
            element(i, k, n);
            const int at = (k / 4 ^ n % 8) * 4 + k % 4;
            split_tf32(s.y[n / 32][swizzled(k, n % 32)], split.big[n][at], split.small[n][at]);
        }
"""
ELEMENTWISE = [(SPLIT_BATCHED, SPLIT_ELEMENTWISE)]
# The split's loads, arithmetic and stores taken out (its fence and the group's barriers stay): the wgmmas
# then read whatever the split tiles hold, so this is timed only. What any cheaper split could buy at most.
NO_SPLIT = [(SPLIT_BATCHED, "")]

# Per K tile, thread 0 of the consumer group that takes it writes %globaltimer after each part of its work.
RING_PARTS = ["group barrier", "split of B", "A fragments", "barrier, release", "wgmmas issued", "wgmmas done"]
RING_MARKS = [
    ('#include "common.cuh"\n', '#include "common.cuh"\n__device__ unsigned long long g_ring[1024][8][64];\n'
     '#define RING(i) do { if (tid == 0) { unsigned long long now; '
     'asm volatile("mov.u64 %0, %globaltimer;" : "=l"(now)); g_ring[blockIdx.x][i][step] = now; } } while (0)\n'),
    ("        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n"
     "        bar_sync(1 + group, NUM_THREADS);  // and the group's wgmmas of its last K tile are done with `split`\n"
     "        split_y(s);\n",
     "        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n        RING(0);\n"
     "        bar_sync(1 + group, NUM_THREADS);\n        RING(1);\n        split_y(s);\n        RING(2);\n"),
    ("        bar_sync(1 + group, NUM_THREADS);  // the split tile is whole, and nobody reads the stage any more\n",
     "        RING(3);\n        bar_sync(1 + group, NUM_THREADS);\n"),
    ("        if (tid == 0) mbarrier_arrive(&empty[stage]);  // the producer may refill it\n",
     "        if (tid == 0) mbarrier_arrive(&empty[stage]);\n        RING(4);\n"),
    ("        wgmma_commit();\n        wgmma_wait<0>();\n", "        RING(5);\n        wgmma_commit();\n        wgmma_wait<0>();\n        RING(6);\n"),
]
RING_VARIANTS = {"as it is": [], "split element by element": ELEMENTWISE}


def in_vocabulary(text: str, fragment: str) -> str:
    """A kernel fragment written with the ring counter's first name, `step` (`step0`: a tile's first K tile), in
    the vocabulary of `text`: the steps' files now call it `ring_pos` (`ring_pos0`); a patch's text at the commit it
    records (patched()) may still say `step`. The lab's substitutions are written once, in the first."""
    if re.search(r"\bring_pos\b", text) and not re.search(r"\bu32 step\b", text):
        return re.sub(r"\bstep(0?)\b", r"ring_pos\1", fragment)
    return fragment


def replaced(text: str, subs, label: str) -> str:
    """`text` with the substitutions `subs` [(old, new)] (in_vocabulary); a ValueError if one does not apply
    exactly once."""
    subs = [(in_vocabulary(text, old), in_vocabulary(text, new)) for old, new in subs]
    for old, new in subs:
        if text.count(old) != 1:
            raise ValueError(f"{label} no longer has {old.strip()[:60]!r} exactly once")
        text = text.replace(old, new)
    return text


def substituted(step: str, subs) -> str:
    """`step`'s source with the substitutions `subs` (replaced())."""
    from gemmlab import fusion
    from gemmlab.runtime.source import kernel_path

    return replaced(kernel_path(fusion.get(step).file).read_text(), subs, step)


def patched(step: str, patch: Path) -> str:
    """`step`'s source with the patch file `patch` applied: to the step's text at the commit the patch records
    (gemmlab.experiments.patched; without git history, to the current file, a ValueError if it changed where the
    patch touches it)."""
    from gemmlab import fusion
    from lab import experiments

    return experiments.patched(patch, fusion.get(step).file)


def patched07(subs) -> str:
    return substituted("fused/07_tma_tf32x3", subs)


def marked(k, a, b, c, marks: str, shape: tuple):
    """(launch, launch config) for FusedKernel `k` whose source writes the __device__ array `marks`:
    launch() runs it once on a, b, c, waits, and returns that array as int64 (compiled here, through
    CuPy's RawModule, to reach the array; `shape`: its declared shape)."""
    launch, cfg = marked_arrays(k, a, b, c, {marks: shape})
    return (lambda: launch()[marks]), cfg


def marked_arrays(k, a, b, c, arrays: dict):
    """marked() for a source that writes several __device__ arrays (name -> declared shape): launch() returns
    {name: array as int64}."""
    import tempfile

    import cupy
    import numpy as np

    from gemmlab import nvrtc

    label = "+".join(arrays)
    art = nvrtc.compile(k.source, k.name_expression, k.step.target("sm_90a"), label=label)
    path = Path(tempfile.mkdtemp()) / "marked.cubin"
    path.write_bytes(art.cubin)
    mod = cupy.RawModule(path=str(path))
    fn = mod.get_function(art.lowered_name)
    n = a.shape[0]
    cfg, args = k.launch_args(a, b, c, cupy.empty((n, c.shape[1]), dtype=cupy.float32))
    fn.max_dynamic_shared_size_bytes = cfg.shared_bytes
    out = {name: cupy.ndarray(shape, dtype=cupy.uint64, memptr=mod.get_global(name)) for name, shape in arrays.items()}

    def launch():
        fn(cfg.grid, cfg.block, tuple(args), shared_mem=cfg.shared_bytes)
        cupy.cuda.Device().synchronize()
        return {name: x.get().astype(np.int64) for name, x in out.items()}

    return launch, cfg


def ring(n: int = 512, runs: int = 20) -> None:
    """Per K tile of step 07, how long each part of the consumer group's work takes (RING_MARKS), as it is
    and with the split element by element: the median over blocks and launches, of every K tile but each
    phase's first SPLIT_K (those start together); both variants checked first."""
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, _ = experiments.fusion_problem(n)
    for variant, subs in RING_VARIANTS.items():
        k = fusion.step("fused/07_tma_tf32x3", source=patched07(RING_MARKS + subs), **TIMELINE_512)
        ring_parts(variant, k, a, b, c, want, runs)


def ring_parts(variant: str, k, a, b, c, want, runs: int = 20, phase: int | None = None) -> None:
    """Check `k` (a fused kernel whose source has the RING marks; want=None: a timed-only variant, not checked),
    then print the median time of each part of a consumer group's K tile (RING_PARTS), over blocks, launches and
    every K tile but each phase's first SPLIT_K (phase 0 or 1: that phase's only), as "part VARIANT: PART  US"
    lines."""
    import numpy as np

    from gemmlab import fusion

    n, sk = a.shape[0], k.params["SPLIT_K"]
    per_phase = n // 32
    steady = [s for s in range(2 * per_phase) if s % per_phase >= sk and phase in (None, s // per_phase)]
    checked = f"error {fusion.checked_launcher(k, a, b, c, want)[1]:.2e}" if want is not None else "timed only"
    launch, cfg = marked(k, a, b, c, "g_ring", (1024, 8, 64))
    x = np.stack([launch()[:cfg.grid[0], :len(RING_PARTS) + 1, :2 * per_phase] for _ in range(runs + 5)][5:])
    part = np.diff(x, axis=2)[:, :, :, steady] / 1e3  # runs x blocks x 6 parts x steps, us
    print(f"ring {variant}: {k.params}, {cfg.grid[0]} blocks, {checked}; us per K tile (median "
          f"over blocks, launches and the {len(steady)} K tiles after each phase's first {sk})")
    for i, name in enumerate(RING_PARTS):
        print(f"part {variant}: {name:18s} {np.median(part[:, :, i, :]):6.3f}")
    print(f"part {variant}: {'tile, in all':18s} {np.median(np.sum(part, axis=2)):6.3f}")


TRANSPOSED_PATCH = HERE / "transposed.patch"  # against kernels/fused/07_tma_tf32x3.cu
TRANSPOSED_CONFIGS = {  # per size: step 07's fastest tiles (BLOCK_N, SPLIT_K, NUM_STAGES), the variant's (BLOCK_M, ...)
    512: ([(32, 3, 8), (32, 2, 12)], [(32, 3, 8), (32, 3, 12)]),
    1024: ([(64, 2, 6)], [(64, 2, 6), (64, 2, 8), (64, 3, 6)]),
    2048: ([(64, 2, 6)], [(64, 2, 6), (64, 2, 8)]),
    4096: ([(64, 2, 6)], [(64, 2, 6), (64, 2, 8)]),
}
# The ring's marks in the transposed kernel (its parts as in 07: the split is of the x tile, in place; the
# "A fragments" part loads the register operand, Y^T, by plain loads).
TRANSPOSED_RING_MARKS = [
    RING_MARKS[0],
    ("        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);  // the K tile has landed\n"
     "        bar_sync(1 + group, NUM_THREADS);  // and the group's wgmmas of its last K tile are done with small_tile\n"
     "        split_x(s);\n",
     "        mbarrier_wait(&full[stage], (step / NUM_STAGES) & 1);\n        RING(0);\n"
     "        bar_sync(1 + group, NUM_THREADS);\n        RING(1);\n        split_x(s);\n        RING(2);\n"),
    ("        bar_sync(1 + group, NUM_THREADS);  // the split tile is whole\n",
     "        RING(3);\n        bar_sync(1 + group, NUM_THREADS);\n        RING(4);\n"),
    ("        wgmma_commit();\n        wgmma_wait<0>();\n", "        RING(5);\n        wgmma_commit();\n        wgmma_wait<0>();\n        RING(6);\n"),
]


def _transposed_smem(p, d=None):
    """The variant's dynamic shared memory: alignment, the ring of stages (BLOCK_M x 32 of X, 32 x 64 of Y),
    each group's small tile, the partial sums of groups 1 .. SPLIT_K - 1, two mbarriers per stage."""
    stage = 4 * (p["BLOCK_M"] * 32 + 32 * 64)
    return (1024 + p["NUM_STAGES"] * stage + p["SPLIT_K"] * 4 * p["BLOCK_M"] * 32
            + 4 * (p["SPLIT_K"] - 1) * 64 * p["BLOCK_M"] + 16 * p["NUM_STAGES"])


def _transposed_rules(p):
    from gemmlab import fusion

    out = [] if p["BLOCK_M"] in (32, 64) else [f"BLOCK_M={p['BLOCK_M']} must be 32 or 64 (one wgmma of that width)"]
    if not 1 <= p["SPLIT_K"] <= 7 or p["NUM_STAGES"] < max(2, p["SPLIT_K"]):
        out.append("1 <= SPLIT_K <= 7 and NUM_STAGES >= max(2, SPLIT_K), as for step 07")
    if not out and _transposed_smem(p) > fusion.smem_limit():
        out.append(f"{_transposed_smem(p)} bytes of shared memory, over the {fusion.smem_limit()} a block may have here")
    return out


def transposed_step():
    """A FusedStep for the transposed variant: step 07's (its tensor maps too: A's and T's boxes take the tile's
    rows), with a tile of BLOCK_M rows x 64 columns."""
    import dataclasses

    from gemmlab import fusion
    from gemmlab.runtime.registry import Param

    return dataclasses.replace(
        fusion.get("fused/07_tma_tf32x3"), name="fused/transposed_tf32x3", symbol="fused_transposed_tf32x3",
        params={"BLOCK_M": Param(32, (32, 64), "rows of a tile (the wgmma's N)"),
                "SPLIT_K": Param(3, (1, 2, 3, 4, 5, 6, 7), "consumer warpgroups per tile"),
                "NUM_STAGES": Param(8, (2, 4, 6, 8, 10, 12), "K tiles of 32 in the ring")},
        fixed={"BLOCK_N": 64, "BLOCK_K": 32}, rules=_transposed_rules, smem=_transposed_smem,
        summary="07 computing each tile transposed (an experiment)", previous="fused/07_tma_tf32x3")


def transposed_source() -> str:
    """Step 07's source with transposed.patch applied (a ValueError if 07 changed where the patch touches it)."""
    return patched("fused/07_tma_tf32x3", TRANSPOSED_PATCH)


def transposed_kernel(backend: str | None = None, subs=(), **params):
    """The transposed variant as a FusedKernel (its source with the substitutions `subs`)."""
    from gemmlab import fusion

    text = replaced(transposed_source(), subs, "the transposed variant")
    return fusion.FusedKernel(transposed_step(), params, backend, source=text)


def transposed() -> None:
    """The transposed variant against step 07 (checked, same run), and both rings at 512 for 1, 2, 3 groups."""
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    print(fusion.check(transposed_kernel("gpu")))
    for n, (c07, c08) in TRANSPOSED_CONFIGS.items():
        a, b, c, want, calls = experiments.fusion_problem(n)
        for bn, sk, ns in c07:
            k = fusion.step("fused/07_tma_tf32x3", BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            calls[name07(bn, sk, ns)], err = fusion.checked_launcher(k, a, b, c, want)
        for bm, sk, ns in c08:
            k = transposed_kernel("gpu", BLOCK_M=bm, SPLIT_K=sk, NUM_STAGES=ns)
            calls[f"transposed m{bm} k{sk} s{ns}"], err = fusion.checked_launcher(k, a, b, c, want)
            print(f"config n={n} transposed m{bm} k{sk} s{ns}: error {err:.2e}")
        experiments.time_rounds(calls, n, REPEATS[n])
    a, b, c, want, _ = experiments.fusion_problem(512)
    for sk in (1, 2, 3):
        ring_parts(f"07 k{sk}", fusion.step("fused/07_tma_tf32x3", source=patched07(RING_MARKS), BLOCK_N=32,
                                             SPLIT_K=sk, NUM_STAGES=8), a, b, c, want)
        ring_parts(f"transposed k{sk}", transposed_kernel("gpu", TRANSPOSED_RING_MARKS, BLOCK_M=32, SPLIT_K=sk,
                                                          NUM_STAGES=8), a, b, c, want)


def block_marks(variant: str, k, a, b, c, names: dict, runs: int = 40) -> None:
    """For FusedKernel `k`, whose source has TIMELINE_MARKS' MARK(i) (MARK(0) at the kernel's start): print, per mark
    i in `names` (i -> name), its time in us from the first block's start, min, median and max over blocks (each the
    median of `runs` launches), as the "mark VARIANT: NAME" lines that record() reads."""
    import numpy as np

    launch, cfg = marked(k, a, b, c, "g_marks", (1024, 16))
    rel = []
    for r in range(runs + 5):
        m = launch()[:cfg.grid[0]]
        if r >= 5:  # ns from the first block's start
            rel.append((m - m[:, 0].min()) / 1e3)
    rel = np.stack(rel)
    print(f"{variant}: {cfg.grid[0]} blocks; us from the first block's start: min, median, max over blocks "
          f"(median of {runs} launches)")
    for i, name in names.items():
        x = rel[:, :, i]
        print(f"mark {variant}: {name:16s} {np.median(x.min(1)):7.2f} {np.median(np.median(x, 1)):7.2f} "
              f"{np.median(x.max(1)):7.2f}")


def timeline(n: int = 512, runs: int = 40) -> None:
    """Step 07's marks per block over `runs` launches, then the event time of the call and of an empty one."""
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, calls = experiments.fusion_problem(n)
    for variant, subs in TIMELINE_VARIANTS.items():
        k = fusion.step("fused/07_tma_tf32x3", source=patched07(TIMELINE_MARKS + subs), **TIMELINE_512)
        if not subs:
            _, err = fusion.checked_launcher(k, a, b, c, want)  # the marked kernel still computes E
            print(f"marked step 07 {TIMELINE_512}: error {err:.2e}")
        block_marks(variant, k, a, b, c, dict(enumerate(MARKS)), runs)
    del calls["torch a@b@c"]
    calls["07 as it is"], _ = fusion.checked_launcher(fusion.step("fused/07_tma_tf32x3", **TIMELINE_512), a, b, c, want)
    k0 = fusion.step("fused/07_tma_tf32x3", source=patched07(RETURNS), **TIMELINE_512)
    calls["07 returns at once"] = k0.launcher(a, b, c, cupy.empty((n, n), dtype=cupy.float32))
    experiments.time_rounds(calls, n, REPEATS[n])


# Step 08 against 07 at the tiles that were fastest for 07 (each size), and one more at 512.
FLAGS_CONFIGS = {512: [(32, 3, 8), (32, 2, 12), (32, 4, 8)], 1024: [(64, 2, 8), (64, 2, 6), (32, 2, 12)],
                 2048: [(64, 2, 6)], 4096: [(64, 2, 6)]}


PERKTILE_PATCH = HERE / "perktile.patch"  # against kernels/fused/08_tile_flags.cu


def perktile_source() -> str:
    """Step 08 as first tried (perktile.patch): the one producer thread takes each K tile's counter in turn."""
    return patched("fused/08_tile_flags", PERKTILE_PATCH)


def flags() -> None:
    """Step 08 (a counter per tile of T, each tile of E waiting for its row panel) against step 07 (the grid
    barrier) and against 08 as first tried (perktile.patch), same tiles, all checked, launched in turn with
    torch a @ b @ c, three rounds per size."""
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for n, confs in FLAGS_CONFIGS.items():
        a, b, c, want, calls = experiments.fusion_problem(n)
        for bn, sk, ns in confs:
            p = dict(BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            for tag, k in ((f"07 n{bn} k{sk} s{ns}", fusion.step("fused/07_tma_tf32x3", **p)),
                           (f"08 n{bn} k{sk} s{ns}", fusion.step("fused/08_tile_flags", **p)),
                           (f"08 per K tile n{bn} k{sk} s{ns}", fusion.step("fused/08_tile_flags", source=perktile_source(), **p))):
                calls[tag], err = fusion.checked_launcher(k, a, b, c, want)
                print(f"{tag}: error {err:.2e}")
        experiments.time_rounds(calls, n, REPEATS[n])


OVERLAP_PATCH = HERE / "overlap.patch"  # against kernels/fused/08_tile_flags.cu
# Step 08's fastest tiles at each size, and SPLIT_K 1 (one group: no other group's split to overlap with).
OVERLAP_CONFIGS = {512: [(32, 3, 8), (32, 2, 12), (32, 1, 4)], 1024: [(64, 2, 8), (64, 2, 6), (64, 1, 4)],
                   2048: [(64, 2, 6)], 4096: [(64, 2, 6)]}
FENCE = "        fence_proxy_async();  // these stores, visible to the wgmmas' reads\n"
SPLIT_LOOP_START = "        for (int i0 = 0; i0 < BLOCK_N / 4; i0 += BATCH) {"


def without_split(text: str) -> str:
    """A step 08 source (as it is or patched) with the split's loads, arithmetic and stores taken out (timed only)."""
    a, b = text.index(SPLIT_LOOP_START), text.index(FENCE)
    return text[:a] + text[b:]


def overlap_source() -> str:
    """Step 08 with overlap.patch applied: two split tiles per group, the next K tile split while this one's
    wgmmas run (a ValueError if 08 changed where the patch touches it)."""
    return patched("fused/08_tile_flags", OVERLAP_PATCH)


def overlap_step():
    """Step 08's FusedStep with two split tiles of shared memory per group, for overlap.patch."""
    import dataclasses

    from gemmlab import fusion

    smem = lambda p, d=None: fusion.tma_smem(p, d, splits_per_group=2)  # noqa: E731
    return dataclasses.replace(fusion.get("fused/08_tile_flags"), smem=smem,
                               rules=lambda p: fusion.tma_rules(p, smem), summary="08 with two split tiles per group")


def overlap_kernel(backend: str | None = None, source: str | None = None, **params):
    from gemmlab import fusion

    return fusion.FusedKernel(overlap_step(), params, backend, source=source or overlap_source())


def overlap() -> None:
    """overlap.patch (two split tiles per group: the split of the next K tile while this one's wgmmas run)
    against step 08 at the same tiles, each launched directly and from a CUDA graph, both checked; then, timed
    only, both without the split (their K loops with nothing to overlap) and the patch without its proxy fence.
    Launched in turn with torch a @ b @ c, three rounds per size."""
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    src08, src_overlap = substituted("fused/08_tile_flags", []), overlap_source()
    for n, confs in OVERLAP_CONFIGS.items():
        a, b, c, want, calls = experiments.fusion_problem(n)
        for bn, sk, ns in confs:
            p = dict(BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            tail = f" n{bn} k{sk} s{ns}"
            for tag, k in (("08", fusion.step("fused/08_tile_flags", **p)),
                           ("overlap", overlap_kernel(source=src_overlap, **p))):
                err = experiments.add_launchers(calls, tag + tail, k, a, b, c, want)
                print(f"{tag + tail}: {k.module.function.num_regs} registers, error {err:.2e}")
            out = cupy.empty((n, n), dtype=cupy.float32)
            for tag, k in (("08 no split", fusion.step("fused/08_tile_flags", source=without_split(src08), **p)),
                           ("overlap no split", overlap_kernel(source=without_split(src_overlap), **p)),
                           ("overlap no fence", overlap_kernel(source=src_overlap.replace(FENCE, ""), **p))):
                calls[tag + tail] = k.launcher(a, b, c, out)
        experiments.time_rounds(calls, n, REPEATS[n])


def name07(bn: int, sk: int, ns: int) -> str:
    return f"07 n{bn} k{sk} s{ns}"


def part_source(name: str) -> str:
    """Step 06's source with one part taken out (PARTS[name]); a ValueError if 06 no longer has the text."""
    return substituted("fused/06_wgmma_tf32x3", PARTS[name])


def parts(n: int = 512) -> None:
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, calls = experiments.fusion_problem(n)
    k = fusion.step("fused/06_wgmma_tf32x3", **STEP06_512)
    calls["06 as it is"], err = fusion.checked_launcher(k, a, b, c, want)
    print(f"step 06 {STEP06_512}: error {err:.2e}")
    for name in PARTS:
        k = fusion.step("fused/06_wgmma_tf32x3", source=part_source(name), **STEP06_512)
        calls["06 " + name] = k.launcher(a, b, c, cupy.empty((n, n), dtype=cupy.float32))
    experiments.time_rounds(calls, n, REPEATS[n])


def main(sizes) -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for n in sizes:
        a, b, c, want, calls = experiments.fusion_problem(n)
        calls["cupy a@b@c"] = lambda: a @ b @ c
        for step in ("fused/05_tf32x3", "fused/06_wgmma_tf32x3"):
            params, calls[f"{step[6:8]} best"] = experiments.recorded_best(step, n, a, b, c, want)
            print(f"step {step[6:8]} n={n}: {params}")
        for bn, sk, ns in CONFIGS[n]:
            k = fusion.step("fused/07_tma_tf32x3", BLOCK_N=bn, SPLIT_K=sk, NUM_STAGES=ns)
            calls[name07(bn, sk, ns)], err = fusion.checked_launcher(k, a, b, c, want)
            print(f"config n={n} {name07(bn, sk, ns)}: grid {k.launch_config((n,) * 4).grid[0]} x "
                  f"{k.step.threads(k.params)} threads, {k.module.function.num_regs} registers, error {err:.2e}")
        experiments.time_rounds(calls, n, REPEATS[n])


# each subcommand's KIND-<gpu>-<date>.log; "limits", "rate", "handover", "fp16", "ordered", "marks", "waits",
# "producers", "early", "wide", "presplit" and "readsplit" are limits.py's, "operand" operand.py's
KINDS = ("parts", "steps", "serialized", "timeline", "loads", "ring", "transposed", "flags", "perktile", "overlap",
         "limits", "rate", "operand", "handover", "fp16", "ordered", "marks", "waits", "producers",
         "early", "wide", "presplit", "readsplit")
RATE_LINE = re.compile(r"^rate( fp16)? n=(\d+) groups=(\d+): ([\d.]+) FMA/clk/SM ([\d.]+) TFLOP/s$", re.M)
STAGGER_LINE = re.compile(r"^stagger ([^:]+): ([\d.-]+) us between consecutive groups' splits, ([\d.]+) us a group's K tile$",
                          re.M)
WAIT_LINE = re.compile(r"^wait ([^:]+): (.+?) +(-?[\d.]+) +(-?[\d.]+) +(-?[\d.]+) +(-?[\d.]+)$", re.M)
CLUSTERS_LINE = re.compile(r"CLUSTER=(\d+)>: at most (\d+) clusters resident$", re.M)


def record() -> dict:
    """results.json[KIND] for each of KINDS: per GPU, the newest log of that kind, {N: {call: [us per round]}}."""
    from lab import experiments

    out: dict = {key: {} for key in KINDS}
    for key in KINDS:
        for gpu, log, text in experiments.gpu_logs(DATA, f"{key}-*.log"):
            us: dict = {}
            for (n, call), v in experiments.rounds_of(text).items():
                us.setdefault(str(n), {})[call] = v
            entry = {"log": log.name, "us": us}
            if key in ("timeline", "presplit"):  # variant -> mark -> [min, median, max] over blocks, us from the start
                entry["blocks"] = int(re.search(r"^as it is: (\d+) blocks", text, re.M).group(1))
                entry["marks"] = {}
                for m in re.finditer(r"^mark ([^:]+): (.{16}) +([\d. -]+)$", text, re.M):
                    entry["marks"].setdefault(m.group(1), {})[m.group(2).strip()] = [float(x) for x in m.group(3).split()]
            # variant -> part of a K tile's work -> us
            if key in ("ring", "transposed", "ordered", "marks", "waits", "producers", "early", "readsplit"):
                entry["parts"] = {}
                for m in re.finditer(r"^part ([^:]+): (.{18}) +([\d.]+)$", text, re.M):
                    entry["parts"].setdefault(m.group(1), {})[m.group(2).strip()] = float(m.group(3))
            # variant -> [us between consecutive groups' splits, us a group's K tile]
            if key in ("ordered", "marks", "producers", "early"):
                entry["stagger"] = {m.group(1): [float(m.group(2)), float(m.group(3))] for m in STAGGER_LINE.finditer(text)}
            if key in ("waits", "readsplit"):  # variant -> figure -> [phase 1 median, mean, phase 2 median, mean], us (or a share)
                entry["waits"] = {}
                for m in WAIT_LINE.finditer(text):
                    entry["waits"].setdefault(m.group(1), {})[m.group(2)] = [float(m.group(i)) for i in range(3, 7)]
            if key == "limits":  # blocks per cluster -> how many such clusters fit at once
                entry["clusters"] = {m.group(1): int(m.group(2)) for m in CLUSTERS_LINE.finditer(text)}
            if key in ("rate", "fp16"):  # [fp16] N -> warpgroups per SM -> FMA per clock per SM, TFLOP/s
                for m in RATE_LINE.finditer(text):
                    entry.setdefault("fp16" if m.group(1) else "n", {}).setdefault(m.group(2), {})[m.group(3)] = {
                        "fma_per_clock": float(m.group(4)), "tflops": float(m.group(5))}
            if key == "steps":
                entry["best"] = {m.group(1): {"n": m.group(2), "params": m.group(3)}
                                 for m in re.finditer(r"^step (\d\d) n=(\d+): (\{.*\})$", text, re.M)}
            out[key][gpu] = entry
    return out


if __name__ == "__main__":
    if sys.argv[1] == "parts":
        parts(*[int(x) for x in sys.argv[2:]])
    elif sys.argv[1] in ("timeline", "serialized", "loads", "ring", "transposed", "flags", "overlap"):
        globals()[sys.argv[1]]()
    elif sys.argv[1] == "record":
        from lab import experiments

        rec = record()
        for key, value in rec.items():
            experiments.save_record(DATA, key, value)
        for key in rec:
            for g, r in rec[key].items():
                for n, calls in r["us"].items():
                    print(key, g, n, {k: round(statistics.median(v), 2) for k, v in calls.items()})
    else:
        main([int(x) for x in sys.argv[2:]] or sorted(CONFIGS))
