"""Python twins of chapter 2's thread mappings, and the global-memory sectors a warp touches.

The two kernels differ only in which thread computes which element of C (blockDim = (BLOCK_X,
BLOCK_Y); a block's threads form warps in order of tid = threadIdx.x + threadIdx.y * BLOCK_X):

- ``naive`` (sgemm/01_naive): ``row = blockIdx.x * BLOCK_X + threadIdx.x``,
  ``col = blockIdx.y * BLOCK_Y + threadIdx.y``;
- ``coalesced`` (sgemm/02_coalesced): ``col = blockIdx.x * BLOCK_X + threadIdx.x``,
  ``row = blockIdx.y * BLOCK_Y + threadIdx.y``.

Each thread then loads ``A[row, k]`` and ``B[k, col]`` for every k and stores ``C[row, col]``.
Global memory moves 32-byte sectors (four per 128-byte cache line); a warp-wide load or store costs
one sector per distinct sector its 32 addresses fall in. All matrices are row-major float32 whose
base addresses are 256-byte aligned (as cudaMalloc's are).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.colors import LogNorm

WARP_SIZE = 32
SECTOR_BYTES = 32
LINE_BYTES = 128
ELEMENT_BYTES = 4
MAPPINGS = ("naive", "coalesced")
OPERANDS = ("A", "B", "C")
STEP_OF = {"naive": "sgemm/01_naive", "coalesced": "sgemm/02_coalesced"}
DEFAULT_SHAPE = (4096, 4096, 4096)   # (M, N, K): large, so no warp straddles an edge


def _check(mapping: str, block_dim: Sequence[int]) -> tuple[int, int]:
    """Validate a mapping name and a block shape; returns (BLOCK_X, BLOCK_Y)."""
    if mapping not in MAPPINGS:
        raise ValueError(f"unknown mapping {mapping!r}: use one of {MAPPINGS}")
    bx, by = (int(v) for v in block_dim)
    if bx < 1 or by < 1:
        raise ValueError(f"block shape ({bx}, {by}) must be positive in both dimensions")
    if bx * by > 1024:
        raise ValueError(f"block shape ({bx}, {by}) has {bx * by} threads; a block holds "
                         "at most 1024")
    return bx, by


def thread_element(mapping: str, block_dim: Sequence[int], block_idx: Sequence[int],
                   thread_idx: Sequence[int]) -> tuple[int, int]:
    """(row, col) of the C element that thread `thread_idx` of block `block_idx` computes."""
    bx, by = _check(mapping, block_dim)
    (gx, gy), (tx, ty) = block_idx, thread_idx
    if mapping == "naive":
        return gx * bx + tx, gy * by + ty
    return gy * by + ty, gx * bx + tx


def grid_dim(mapping: str, block_dim: Sequence[int], m: int, n: int) -> tuple[int, int]:
    """The launch grid (gridDim.x, gridDim.y) that covers an m x n C with this mapping."""
    bx, by = _check(mapping, block_dim)
    ceil = lambda a, b: -(-a // b)  # noqa: E731
    return (ceil(m, bx), ceil(n, by)) if mapping == "naive" else (ceil(n, bx), ceil(m, by))


def warp_threads(block_dim: Sequence[int], warp: int = 0) -> list[tuple[int, int]]:
    """threadIdx (x, y) of each lane of warp `warp` in a block (fewer than 32 in a last, partial warp)."""
    bx, by = (int(v) for v in block_dim)
    first, last = warp * WARP_SIZE, min((warp + 1) * WARP_SIZE, bx * by)
    return [(tid % bx, tid // bx) for tid in range(first, last)]


def warps_per_block(block_dim: Sequence[int]) -> int:
    """Number of warps in a block (the last one may be partial)."""
    bx, by = (int(v) for v in block_dim)
    return -(-(bx * by) // WARP_SIZE)


def warp_addresses(mapping: str, operand: str, block_dim: Sequence[int], *, warp: int = 0,
                   block_idx: Sequence[int] = (0, 0), k: int = 0,
                   shape: Sequence[int] = DEFAULT_SHAPE) -> list[int | None]:
    """Byte offset (from the operand's base) each lane of a warp reads or writes in one request.

    `operand` 'A' is the load of A[row, k], 'B' the load of B[k, col], 'C' the store of
    C[row, col]. A lane whose (row, col) falls outside C is masked by the kernel's guard: None.
    """
    if operand not in OPERANDS:
        raise ValueError(f"unknown operand {operand!r}: use one of {OPERANDS}")
    m, n, kk = shape
    if not 0 <= k < kk:
        raise ValueError(f"k={k} is outside 0..{kk - 1}")
    out: list[int | None] = []
    for tidx in warp_threads(_check(mapping, block_dim), warp):
        row, col = thread_element(mapping, block_dim, block_idx, tidx)
        if row >= m or col >= n:
            out.append(None)
        elif operand == "A":
            out.append((row * kk + k) * ELEMENT_BYTES)
        elif operand == "B":
            out.append((k * n + col) * ELEMENT_BYTES)
        else:
            out.append((row * n + col) * ELEMENT_BYTES)
    return out


def count_sectors(addresses: Sequence[int | None], size: int = SECTOR_BYTES) -> int:
    """Distinct `size`-byte blocks that 4-byte accesses at `addresses` touch (None: masked lane)."""
    touched = set()
    for a in addresses:
        if a is not None:
            touched.update(range(a // size, (a + ELEMENT_BYTES - 1) // size + 1))
    return len(touched)


@dataclass(frozen=True)
class Request:
    """What one warp-wide load or store costs in global memory."""

    sectors: int        # 32-byte sectors moved
    lines: int          # 128-byte cache lines touched
    words: int          # distinct 4-byte elements the warp asked for
    lanes: int          # active lanes

    @property
    def bytes_moved(self) -> int:
        """Bytes the memory system moves for this request."""
        return self.sectors * SECTOR_BYTES


def request(mapping: str, operand: str, block_dim: Sequence[int], **where) -> Request:
    """Sectors, lines, distinct words and active lanes of one warp's request (see warp_addresses)."""
    addrs = warp_addresses(mapping, operand, block_dim, **where)
    live = [a for a in addrs if a is not None]
    return Request(count_sectors(live), count_sectors(live, LINE_BYTES), len(set(live)), len(live))


def sectors_per_request(mapping: str, operand: str, block_dim: Sequence[int],
                        shape: Sequence[int] = DEFAULT_SHAPE) -> float:
    """Mean sectors per warp request over the warps of block (0, 0) (the Nsight Compute metric)."""
    counts = [request(mapping, operand, block_dim, warp=w, shape=shape).sectors
              for w in range(warps_per_block(block_dim))]
    return sum(counts) / len(counts)


def sector_table(block_dim: Sequence[int], shape: Sequence[int] = DEFAULT_SHAPE
                 ) -> dict[str, dict[str, float]]:
    """{mapping: {operand: mean sectors per request}} for both mappings and A, B, C."""
    return {mp: {op: sectors_per_request(mp, op, block_dim, shape) for op in OPERANDS}
            for mp in MAPPINGS}


def sectors_per_k_step(mapping: str, block_dim: Sequence[int],
                       shape: Sequence[int] = DEFAULT_SHAPE) -> float:
    """Sectors one warp loads per iteration of the k loop (A plus B): 32 FMAs' worth of operands."""
    return (sectors_per_request(mapping, "A", block_dim, shape)
            + sectors_per_request(mapping, "B", block_dim, shape))


def bytes_per_fma(mapping: str, block_dim: Sequence[int],
                  shape: Sequence[int] = DEFAULT_SHAPE) -> float:
    """Bytes the A and B loads move per fused multiply-add, over the warps of block (0, 0).

    Each active lane does one FMA per k step, so a full warp moving 33 sectors does 32 FMAs
    with 1056 bytes (33 B per FMA); idle lanes of a partial warp make every byte dearer.
    """
    moved = lanes = 0
    for w in range(warps_per_block(block_dim)):
        a = request(mapping, "A", block_dim, warp=w, shape=shape)
        b = request(mapping, "B", block_dim, warp=w, shape=shape)
        moved += a.bytes_moved + b.bytes_moved
        lanes += a.lanes
    return moved / lanes


def describe(block_dim: Sequence[int], shape: Sequence[int] = DEFAULT_SHAPE) -> str:
    """One line per operand: sectors per warp request, naive -> coalesced (same on every backend)."""
    table = sector_table(block_dim, shape)
    bx, by = (int(v) for v in block_dim)
    lines = [f"block ({bx}, {by}), sectors per warp request (32-byte sectors):"]
    for op in OPERANDS:
        verb = "store" if op == "C" else "load"
        lines.append(f"  {op} {verb}: naive {table['naive'][op]:g} -> coalesced "
                     f"{table['coalesced'][op]:g}")
    lines.append(f"  per k step (A + B): naive {sectors_per_k_step('naive', block_dim, shape):g}"
                 f" -> coalesced {sectors_per_k_step('coalesced', block_dim, shape):g}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Pictures


def _owner_grid(mapping: str, block_dim: Sequence[int], size: int):
    """(warp id, lane) of the thread that computes each C element of the top-left size x size."""
    bx, by = _check(mapping, block_dim)
    warp_of = np.full((size, size), -1)
    lane_of = np.full((size, size), -1)
    gx_max, gy_max = grid_dim(mapping, (bx, by), size, size)
    per_block = warps_per_block((bx, by))
    for gx in range(gx_max):
        for gy in range(gy_max):
            block_no = gx + gy * gx_max
            for tid in range(bx * by):
                row, col = thread_element(mapping, (bx, by), (gx, gy), (tid % bx, tid // bx))
                if row < size and col < size:
                    warp_of[row, col] = block_no * per_block + tid // WARP_SIZE
                    lane_of[row, col] = tid % WARP_SIZE
    return warp_of, lane_of


def draw_mapping(mapping: str, block_dim: Sequence[int], *, axes=None, size: int = 32):
    """Three panels for one mapping: who computes which C element, and warp 0's first A and B loads.

    Left: the top-left `size` x `size` corner of C, coloured by warp (warp 0 of block (0, 0) in red,
    with lane numbers). Middle: A's rows of that corner, columns 0..15, with the elements warp 0
    loads at k = 0 in red and the 32-byte sectors those loads pull in shaded. Right: the same for
    B's rows 0..7. Returns the figure.
    """
    bx, by = _check(mapping, block_dim)
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(11, 4.2),
                                 gridspec_kw={"width_ratios": [32, 16, 32]})
    else:
        fig = axes[0].figure
    ax_c, ax_a, ax_b = axes
    words_per_sector = SECTOR_BYTES // ELEMENT_BYTES

    warp_of, lane_of = _owner_grid(mapping, (bx, by), size)
    palette = plt.get_cmap("tab20")(np.arange(20))[:, :3] * 0.35 + 0.65   # pale colours
    rgb = palette[np.where(warp_of >= 0, warp_of % 20, 0)]
    rgb[warp_of < 0] = 1.0
    rgb[warp_of == 0] = (0.85, 0.15, 0.15)
    ax_c.imshow(rgb, interpolation="nearest")
    if size <= 32:
        for r, c in zip(*np.nonzero(warp_of == 0)):
            ax_c.text(c, r, str(lane_of[r, c]), ha="center", va="center", fontsize=5,
                      color="white")
    rows, cols = (bx, by) if mapping == "naive" else (by, bx)
    ax_c.add_patch(plt.Rectangle((-0.5, -0.5), min(cols, size), min(rows, size), fill=False,
                                 lw=1.5, ec="black"))
    ax_c.set_title(f"C: thread -> element ({mapping})\nblock (0, 0) outlined; warp 0 in red",
                   fontsize=9)

    def panel(ax, operand: str, rows: int, cols: int, row_len: int) -> None:
        addrs = [a for a in warp_addresses(mapping, operand, (bx, by)) if a is not None]
        grid = np.ones((rows, cols, 3))
        for a in addrs:
            word = a // ELEMENT_BYTES
            r, c = divmod(word, row_len)
            if r < rows and c < cols:
                first = c - c % words_per_sector
                grid[r, first:first + words_per_sector] = (1.0, 0.8, 0.55)   # the sector
        for a in addrs:
            r, c = divmod(a // ELEMENT_BYTES, row_len)
            if r < rows and c < cols:
                grid[r, c] = (0.85, 0.15, 0.15)                              # the element
        ax.imshow(grid, interpolation="nearest", aspect="auto")
        for x in range(0, cols + 1, words_per_sector):
            ax.axvline(x - 0.5, color="0.3", lw=0.8)
        for y in range(rows + 1):
            ax.axhline(y - 0.5, color="0.85", lw=0.3)
        req = request(mapping, operand, (bx, by))
        ax.set_title(f"{operand} at k = 0: {req.sectors} sector{'s' * (req.sectors != 1)}, "
                     f"{req.lines} line{'s' * (req.lines != 1)}\n"
                     f"({req.words} distinct word{'s' * (req.words != 1)} for {req.lanes} lanes)",
                     fontsize=9)

    m, n, k = DEFAULT_SHAPE
    panel(ax_a, "A", size, 2 * words_per_sector, k)
    panel(ax_b, "B", 8, size, n)
    ax_c.set_xlabel("column of C")
    ax_c.set_ylabel("row of C")
    ax_a.set_xlabel("column of A (k); a box is one 32-byte sector")
    ax_a.set_ylabel("row of A")
    ax_b.set_xlabel("column of B; a box is one 32-byte sector")
    ax_b.set_ylabel("row of B (k)")
    for ax in axes:
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{STEP_OF[mapping]}, block ({bx}, {by})", fontsize=10)
    fig.tight_layout()
    return fig


def draw_comparison(block_dim: Sequence[int] = (32, 8)):
    """Both mappings, one above the other (six panels); returns the figure."""
    fig, axes = plt.subplots(2, 3, figsize=(11, 8.4),
                             gridspec_kw={"width_ratios": [32, 16, 32]})
    for row, mapping in zip(axes, MAPPINGS):
        draw_mapping(mapping, block_dim, axes=row)
        row[0].set_title(f"{STEP_OF[mapping]}: thread -> element of C\nblock (0, 0) "
                         "outlined; warp 0 in red", fontsize=9)
    fig.suptitle(f"Block ({int(block_dim[0])}, {int(block_dim[1])}): which element each thread "
                 "computes, and what warp 0 loads at k = 0", fontsize=10)
    fig.tight_layout()
    return fig


def draw_sector_sweep(choices: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)):
    """Bytes the A and B loads move per FMA, for every block shape, both mappings; the figure.

    A static summary of what the chapter's slider shows one shape at a time; shapes of more than
    1024 threads are left blank.
    """
    vals = {mp: np.full((len(choices), len(choices)), np.nan) for mp in MAPPINGS}
    for i, by in enumerate(choices):
        for j, bx in enumerate(choices):
            if bx * by <= 1024:
                for mp in MAPPINGS:
                    vals[mp][i, j] = bytes_per_fma(mp, (bx, by))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, mp in zip(axes, MAPPINGS):
        im = ax.imshow(vals[mp], cmap="viridis_r", norm=LogNorm(vmin=4, vmax=64), origin="lower")
        for i in range(len(choices)):
            for j in range(len(choices)):
                if not np.isnan(vals[mp][i, j]):
                    v = vals[mp][i, j]
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7,
                            color="white" if v > 20 else "black")
        ax.set_xticks(range(len(choices)), [str(c) for c in choices])
        ax.set_yticks(range(len(choices)), [str(c) for c in choices])
        ax.set_xlabel("BLOCK_X")
        ax.set_ylabel("BLOCK_Y")
        ax.set_title(f"{STEP_OF[mp]}", fontsize=10)
    fig.suptitle("Bytes moved per FFMA by the A and B loads (fewer is better)", fontsize=10)
    bar = fig.colorbar(im, ax=axes, shrink=0.8, label="bytes per FFMA")
    bar.ax.minorticks_off()
    bar.set_ticks([4, 8, 16, 32, 64], labels=["4", "8", "16", "32", "64"])
    return fig
