"""Chapter 3's model of shared-memory tiling: traffic, intensity, and the sliding-window picture.

Counts are of bytes *requested* from global memory by the whole grid (before any cache), which is
what a tile size changes: each BLOCK x BLOCK tile loaded once into shared memory feeds BLOCK FMAs
per element instead of one.
"""
from __future__ import annotations

from ..runtime.registry import cdiv
from ..measure import bench, check
from ..runtime import kernel, nvrtc
from ..errors import GemmlabError
from ..runtime.registry import get
from ..runtime.source import kernel_path
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import numpy as np

FLOAT_BYTES = 4


def global_bytes(m: int, n: int, k: int, block: int | None) -> int:
    """Bytes of A and B the grid requests from global memory; block=None means no tiling (step 02)."""
    if block is None:  # every thread reads a row of A and a column of B
        return 2 * m * n * k * FLOAT_BYTES
    tiles = cdiv(m, block) * cdiv(n, block)  # blocks in the grid
    steps = cdiv(k, block)  # K steps each block takes
    return tiles * steps * 2 * block * block * FLOAT_BYTES


def intensity(m: int, n: int, k: int, block: int | None) -> float:
    """FLOP per byte requested from global memory (2 FLOP per multiply-add)."""
    return 2 * m * n * k / global_bytes(m, n, k, block)


def shared_bytes(block: int) -> int:
    """Static shared memory of one block: a BLOCK x BLOCK tile of A and one of B."""
    return 2 * block * block * FLOAT_BYTES


def barriers(k: int, block: int) -> int:
    """__syncthreads() a block executes: two per K step (after the load, after the compute)."""
    return 2 * cdiv(k, block)


def draw_sliding_window(block: int = 4, step: int = 1, size: int = 16, axes=None):
    """A, B and C of a size x size problem: the block's C tile, and the K window at `step`."""
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    row0, col0 = block, 2 * block  # the block we follow: tile (1, 2) of C
    k0 = step * block
    panels = [("A (M x K)", (row0, k0), "rows of the C tile, K window"),
              ("B (K x N)", (k0, col0), "K window, columns of the C tile"),
              ("C (M x N)", (row0, col0), "the block's tile")]
    for ax, (title, (r, c), note) in zip(axes, panels):
        ax.set_xlim(0, size)
        ax.set_ylim(size, 0)
        ax.set_aspect("equal")
        ax.set_xticks(range(0, size + 1, block))
        ax.set_yticks(range(0, size + 1, block))
        ax.grid(True, color="0.85")
        ax.tick_params(labelsize=7)
        ax.set_title(f"{title}\n{note}", fontsize=9)
        if title.startswith("A"):
            ax.add_patch(Rectangle((0, row0), size, block, color="tab:blue", alpha=0.15))
            for s in range(step):
                ax.add_patch(Rectangle((s * block, row0), block, block, color="0.6", alpha=0.5))
        if title.startswith("B"):
            ax.add_patch(Rectangle((col0, 0), block, size, color="tab:blue", alpha=0.15))
            for s in range(step):
                ax.add_patch(Rectangle((col0, s * block), block, block, color="0.6", alpha=0.5))
        ax.add_patch(Rectangle((c, r), block, block, color="tab:orange", alpha=0.8))
    axes[0].figure.suptitle(f"K step {step}: the block loads the orange tiles of A and B into shared memory "
                            f"(grey: steps already done)", fontsize=9)
    axes[0].figure.tight_layout()
    return axes


def block_report(block: int, size: int = 2048) -> str:
    """What the tile-size slider shows: feasibility, check, model numbers, and a timing on a GPU."""
    lines = [f"BLOCK = {block}: {block * block} threads per block, {shared_bytes(block)} bytes of shared memory, "
             f"{intensity(size, size, size, block):g} FLOP per global byte requested"]
    try:
        k = kernel.step("sgemm/03_smem_tiling", BLOCK=block)
        lines.append(str(check.verify(k)))
    except GemmlabError as e:
        return lines[0] + "\n" + f"cannot run: {e}"
    if k.backend == "gpu":
        lines.append(bench.timing_line(k, size))
    else:
        lines.append("(no GPU: timings are in the recorded figure above)")
    return "\n".join(lines)


# Step 03 indexes its tile with a 2-D block (threadIdx.x, threadIdx.y); seed 000's kernels use a 1-D block and
# recover the two coordinates with a division and a modulo by the tile edge.
_INDEX_2D = ("    const int tx = threadIdx.x;  // column inside the tile: a warp spans a row, as in 02\n"
             "    const int ty = threadIdx.y;  // row inside the tile\n")
_INDEX_1D = ("    const int tx = threadIdx.x % BLOCK;  // seed 000's indexing: one thread index, split by the tile edge\n"
             "    const int ty = threadIdx.x / BLOCK;\n")


def one_d_indexing(source_text: str | None = None) -> str:
    """Step 03's kernel text with seed 000's 1-D indexing (tx = threadIdx.x % BLOCK, ty = threadIdx.x / BLOCK) in
    place of the 2-D block's: for compile-only SASS (its launch would need a 1-D block of BLOCK^2 threads)."""
    text = source_text if source_text is not None else kernel_path(get("sgemm/03_smem_tiling").file).read_text()
    if _INDEX_2D not in text:
        raise ValueError("step 03's two index lines (tx = threadIdx.x, ty = threadIdx.y) were not found")
    return text.replace(_INDEX_2D, _INDEX_1D)


POWER_OF_TWO_OPS = ("IMAD", "LEA", "SHF", "IADD3", "LOP3", "LDS", "LDS.128", "FFMA")


def power_of_two_counts(block: int, indexing: str = "2-D", arch: str = "sm_90") -> dict[str, dict[str, int]]:
    """Step 03's SASS for tile edge `block` (compile-only), counted before its K loop (the set-up each thread runs
    once) and in one iteration of the loop: IMAD (any form), LEA, SHF, IADD3, LOP3 (integer), LDS.128, the other
    LDS and FFMA. `indexing`: '2-D' (the step as written) or '1-D' (seed 000's, see one_d_indexing)."""
    source = one_d_indexing() if indexing == "1-D" else None
    parts = nvrtc.split_at_loop(kernel.instance("sgemm/03_smem_tiling", source=source, BLOCK=block).sass(arch))

    def count(ops: list[str]) -> dict[str, int]:
        out = dict.fromkeys(POWER_OF_TWO_OPS, 0)
        for op in ops:
            key = "LDS.128" if op == "LDS.128" else op.split(".")[0]  # IMAD.WIDE is an IMAD, LDS.64 an LDS
            if key in out:
                out[key] += 1
        return out

    return {"before": count(parts["before"]), "loop": count(parts["loop"])}


# --- chapter 4: register tiling ----------------------------------------------------------------
def shared_loads_per_fma(thread_m: int, thread_n: int) -> float:
    """Shared-memory floats a thread loads per multiply-add when it computes THREAD_M x THREAD_N outputs:
    at each k it loads THREAD_M values of A and THREAD_N of B for THREAD_M * THREAD_N multiply-adds."""
    return (thread_m + thread_n) / (thread_m * thread_n)


def owners(step: str, p: dict):
    """Which thread (tid) computes each element of a BLOCK_M x BLOCK_N tile of C, as an int array.

    The Python twin of the kernels' index arithmetic: step 04 gives each thread THREAD_M rows of one column
    (thread_col = tid % BLOCK_N, thread_row = tid / BLOCK_N * THREAD_M); step 05/06 give each thread a solid
    THREAD_M x THREAD_N tile; step 07 gives a warp a WARP_M x WARP_N tile and each lane 4x4 pieces,
    one per sub-tile, so that the 32 lanes of a warp sit side by side in every sub-tile.
    """
    bm, bn = p["BLOCK_M"], p["BLOCK_N"]
    own = np.full((bm, bn), -1, dtype=int)
    if step.endswith("04_1d_blocktiling"):
        tm = p["THREAD_M"]
        for tid in range(bm // tm * bn):
            own[tid // bn * tm:tid // bn * tm + tm, tid % bn] = tid
        return own
    if step.endswith(("05_2d_blocktiling", "06_vectorized")):
        tm, tn = p["THREAD_M"], p["THREAD_N"]
        for tid in range((bm // tm) * (bn // tn)):
            r, c = tid // (bn // tn) * tm, tid % (bn // tn) * tn
            own[r:r + tm, c:c + tn] = tid
        return own
    wm, wn, tm, tn = p["WARP_M"], p["WARP_N"], p["THREAD_M"], p["THREAD_N"]
    lanes_n = wn // tn
    iters_m, iters_n = tm // 4, tn // 4
    sub_m, sub_n = wm // iters_m, wn // iters_n
    for warp in range((bm // wm) * (bn // wn)):
        wr, wc = warp // (bn // wn) * wm, warp % (bn // wn) * wn
        for lane in range(32):
            lr, lc = lane // lanes_n * 4, lane % lanes_n * 4
            for i in range(iters_m):
                for j in range(iters_n):
                    r, c = wr + i * sub_m + lr, wc + j * sub_n + lc
                    own[r:r + 4, c:c + 4] = warp * 32 + lane
    return own


def draw_owners(step: str, p: dict, ax=None, highlight: int = 0):
    """The ownership map: colour = warp, grey = the elements thread `highlight` computes."""
    own = owners(step, p)
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    warp = own // 32
    img = np.where(own == highlight, -1, warp).astype(float)
    ax.imshow(np.ma.masked_equal(img, -1), cmap="tab20", interpolation="nearest")
    ax.imshow(np.ma.masked_not_equal(img, -1), cmap="gray_r", vmin=-2, vmax=0, interpolation="nearest")
    ax.set_title(f"{step.split('/')[-1]}\ncolour = warp, grey = thread {highlight}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax
