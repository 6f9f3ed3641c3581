"""Where does step 12's time go in the last wave? Step 12 with timestamps (%globaltimer, ns) taken by thread 0 of
each consumer warpgroup: its start, the start of its range of the last wave, the hand-over's release, the
finishing part's wait for partial sums (start, end) and its end. Written past the end of `partials` (this script
hands the kernel a longer one). The last of 10 launches, at 4096 and 8192: the last wave shared (MAX_SPLIT 4,
MIN_GAIN 1: whatever it saves) and dealt whole (MAX_SPLIT 1: 11's schedule).

    python lab/hgemm-past-cublas/timeline.py        (an H100 or H200)
"""

import cupy
import numpy as np

import gemmlab
from gemmlab import registry

EVENTS = ("start", "range", "handed", "wait", "waited", "end")
STAMP = ('__device__ __forceinline__ unsigned long long globaltimer() {\n'
         '    unsigned long long t = 0;\n#ifndef GEMMLAB_EMULATOR\n'
         '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));\n#endif\n    return t;\n}\n')
PATCHES = [  # (where, what to add after it)
    ('#include "common.cuh"\n', STAMP),
    ("    int chunk = 0;  // C boxes this warpgroup has stored so far: the staging ring's position\n",
     "    unsigned long long* trace = reinterpret_cast<unsigned long long*>(partials + (size_t)gridDim.x * 128 * BLOCK_N)\n"
     "                                + (blockIdx.x * CONSUMERS + consumer) * 8;\n"
     "    if (threadIdx.x % 128 == 0) trace[0] = globaltimer();\n"),
    ("        tile_origin(id, block_row, block_col);\n        float d[ACC];\n",
     "        if (u == whole_count && threadIdx.x % 128 == 0) trace[1] = globaltimer();\n"),
    ("            if (threadIdx.x % 128 == 0) atom_add_release_gpu(&flags[blockIdx.x * CONSUMERS + consumer], 1u);\n",
     "            if (threadIdx.x % 128 == 0) trace[2] = globaltimer();\n"),
    ("        const int tile_begin = (id - whole_tiles) * num_tiles;  // in the last wave's numbering\n",
     "        if (k_begin > 0 && threadIdx.x % 128 == 0) trace[3] = globaltimer();\n"),
    ("        // Epilogue: 64 columns",
     "        if (k_begin > 0 && threadIdx.x % 128 == 0) trace[4] = globaltimer();\n"),
    ("    if (threadIdx.x % 128 == 0) bulk_wait_group<0>();  // every store done before the block exits\n",
     "    if (threadIdx.x % 128 == 0) trace[5] = globaltimer();\n"),
]


def patched_source() -> str:
    src = open(registry.get("hgemm/12_stream_k").file).read()
    for where, what in PATCHES:
        assert src.count(where) == 1, where
        src = src.replace(where, where + what) if not where.startswith("        // Epilogue") else \
            src.replace(where, what + where)
    return src


def main() -> None:
    real = registry.stream_k_workspace
    longer = {}

    def workspace(backend, m, n, p):  # partials with room for 8 stamps per warpgroup after it
        partials, flags = real(backend, m, n, p)
        key = (partials.size, flags.size)
        if key not in longer:
            longer[key] = (cupy.zeros(partials.size + flags.size * 8 * 2, np.float32), flags)
        return longer[key]

    registry.stream_k_workspace = workspace
    src = patched_source()
    for n in (4096, 8192):
        a, b = (cupy.asarray(np.random.default_rng(i).uniform(-1, 1, (n, n)).astype(np.float16)) for i in range(2))
        c = cupy.empty((n, n), np.float16)
        for split in (4, 1):
            kern = gemmlab.step("hgemm/12_stream_k", backend="gpu", source=src, MAX_SPLIT=split, MIN_GAIN=1)
            partials, flags = workspace("gpu", n, n, kern.params)
            grid = flags.size // 2
            trace = partials[grid * 128 * kern.params["BLOCK_N"]:].view(np.uint64).reshape(-1, 8)
            for _ in range(10):
                trace[:] = 0
                kern.run(a, b, c)
            cupy.cuda.runtime.deviceSynchronize()
            t = trace.get().astype(np.int64)
            t0 = t[:, 0].min()
            rel = np.where(t > 0, (t - t0) / 1e3, np.nan)  # us from the first warpgroup's start
            print(f"{n} MAX_SPLIT={split} MIN_GAIN=1: {grid} blocks, launch {np.nanmax(rel[:, 5]):.1f} us (first start to last end)")
            for e, name in enumerate(EVENTS):
                col = rel[:, e][~np.isnan(rel[:, e])]
                if len(col):
                    print(f"    {name:7s} n={len(col):3d}  min {col.min():7.1f}  median {np.median(col):7.1f}  "
                          f"max {col.max():7.1f}")
            waits = (rel[:, 4] - rel[:, 3])[~np.isnan(rel[:, 4] - rel[:, 3])]
            if len(waits):
                print(f"    wait for partial sums: median {np.median(waits):.2f} us, max {waits.max():.2f} us "
                      f"({(waits > 1).sum()} of {len(waits)} over 1 us)")
            ends = rel[:, 5]
            print(f"    end: {np.sum(ends < np.nanmax(ends) - 10)} warpgroups done 10 us or more before the last")
            if split > 1:
                # where a range's time goes: from its start to the hand-over, and to the end
                span = (rel[:, 5] - rel[:, 1])[~np.isnan(rel[:, 1])]
                print(f"    last wave per warpgroup: median {np.median(span):.1f} us, max {span.max():.1f} us")


if __name__ == "__main__":
    main()
