"""Shared-memory banks, wavefronts and XOR swizzles: the Python model chapter 5 draws and counts.

- `Swizzle(B, M, S)` is the twin of CuTe's `Swizzle<B,M,S>`: on an element offset it XORs the B bits
  found S bits above bit M + S... into the B bits at bit M, i.e. `o ^ ((o & yyy) >> S)`.
- `wavefronts()` counts the passes shared memory needs for one warp request, with the hardware rule:
  32 banks of 4 bytes; requests of 4-byte (or smaller) accesses are served 32 lanes at a time, 8-byte
  accesses in two half-warps, 16-byte accesses in four quarter-warps; each pass costs the largest
  number of *distinct* 4-byte words that fall in one bank (the same word is a broadcast).
- `ldmatrix_wavefronts()`: each 8x8 matrix's 8 row addresses (16 bytes each) form one pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import html
from ..runtime import optional
widgets = optional.lazy("ipywidgets")  # the live controls only: the command line runs without it
from .glue import ipy_display as display  # IPython's, imported when first called


BANKS = 32
WORD = 4  # bytes per bank word


@dataclass(frozen=True)
class Swizzle:
    """CuTe's Swizzle<B, M, S>: 2^B rows of 2^M-element units permuted by XOR (S >= B here)."""

    bits: int  # B: how many bits are XORed
    base: int  # M: the lowest bit that changes (units of 2^M elements keep their order inside)
    shift: int  # S: how far above the changed bits the bits that select the XOR mask sit

    def __call__(self, offset: int) -> int:
        mask = ((1 << self.bits) - 1) << (self.base + self.shift)
        return offset ^ ((offset & mask) >> self.shift)


IDENTITY = Swizzle(0, 0, 0)


def tile_offset(row: int, col: int, width: int, pad: int = 0, swizzle: Swizzle = IDENTITY) -> int:
    """Element offset of (row, col) in a row-major tile of `width` columns, padded or swizzled."""
    return swizzle(row * (width + pad) + col)


def wavefronts(byte_addresses: Sequence[int | None], access_bytes: int = 4) -> int:
    """Passes shared memory needs for one warp request (None = inactive lane)."""
    lanes_per_phase = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}[access_bytes]
    total = 0
    for start in range(0, len(byte_addresses), lanes_per_phase):
        banks: dict[int, set[int]] = {}
        for addr in byte_addresses[start:start + lanes_per_phase]:
            if addr is None:
                continue
            for word in range(addr // WORD, (addr + access_bytes - 1) // WORD + 1):
                banks.setdefault(word % BANKS, set()).add(word)
        if banks:
            total += max(len(words) for words in banks.values())
    return total


def ldmatrix_wavefronts(row_addresses: Sequence[int]) -> int:
    """Passes for an ldmatrix: every 8 row addresses (one 8x8 matrix of 16-byte rows) are one pass."""
    return sum(wavefronts(row_addresses[i:i + 8], 16) for i in range(0, len(row_addresses), 8))


def ldmatrix_rows(tile_width: int, row0: int, col0: int, matrices: int = 1, elem_bytes: int = 2,
                  pad: int = 0, swizzle: Swizzle = IDENTITY) -> list[int]:
    """Byte addresses of the rows an ldmatrix reads: matrix j covers rows row0.., columns col0 + 8j.."""
    return [tile_offset(row0 + r, col0 + 8 * j, tile_width, pad, swizzle) * elem_bytes
            for j in range(matrices) for r in range(8)]


def column_read(tile_width: int, col: int, rows: int = 32, elem_bytes: int = 4, pad: int = 0,
                swizzle: Swizzle = IDENTITY) -> list[int]:
    """Byte addresses of a warp reading one column of a tile, lane i reading row i."""
    return [tile_offset(i, col, tile_width, pad, swizzle) * elem_bytes for i in range(rows)]


def bank_map(rows: int, width: int, elem_bytes: int = 4, pad: int = 0, swizzle: Swizzle = IDENTITY):
    """The bank of every element of a tile (a rows x width int array)."""
    return np.array([[tile_offset(r, c, width, pad, swizzle) * elem_bytes // WORD % BANKS for c in range(width)]
                     for r in range(rows)])


def draw_bank_map(rows: int, width: int, elem_bytes: int = 4, pad: int = 0, swizzle: Swizzle = IDENTITY,
                  touched: Sequence[tuple[int, int]] = (), ax=None, title: str = ""):
    """Colour = bank; the cells a request touches are outlined and numbered by their bank."""
    banks = bank_map(rows, width, elem_bytes, pad, swizzle)
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12, width / 4 + 1), min(8, rows / 4 + 1)))
    ax.imshow(banks, cmap="twilight", vmin=0, vmax=BANKS - 1, interpolation="nearest")
    for r, c in touched:
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.5))
        ax.text(c, r, str(banks[r, c]), ha="center", va="center", fontsize=6)
    ax.set_title(title or f"banks of a {rows}x{width} tile, {elem_bytes}-byte elements", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


# ------------------------------------------------------------------------------------------------
# The swizzle the hgemm kernels use, and the shared accesses the kernels make (Python twins)
# ------------------------------------------------------------------------------------------------
def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, not {n}")
    return n.bit_length() - 1


def kernel_swizzle(width: int) -> Swizzle:
    """The Swizzle<B,M,S> of the hgemm kernels' `swizzle<WIDTH>(row, col)` (03_swizzled.cu, 05_tuned_tiles.cu)
    on a row-major fp16 tile `width` halves wide: chunk (8 halves) c of row r goes to c ^ ((r / ROWS) % XOR),
    XOR = min(width / 8, 8), ROWS = 8 / XOR rows per 128-byte line of the banks."""
    if width < 16:
        raise ValueError(f"swizzled tile width must be at least 16 halves (two 16-byte chunks), not {width}")
    chunks = width // 8
    xor = min(chunks, 8)
    rows = 8 // xor
    return Swizzle(_log2(xor, "width / 8"), 3, _log2(rows * width, "width") - 3)


def swizzle_for(width: int, elem_bytes: int = 2, bits: int | None = None) -> Swizzle:
    """A chunk swizzle for any tile: 16-byte units (M), rows of one 128-byte line XORed in (S), `bits`
    bits of chunk index permuted (B; default: as many as a row has chunks, at most 8 chunks).
    For fp16 and the default bits this is `kernel_swizzle(width)`."""
    units_per_chunk = max(1, 16 // elem_bytes)
    base = _log2(units_per_chunk, "16 / element size")
    _log2(width, "tile width")
    chunks = max(1, width // units_per_chunk)
    if bits is None:
        bits = _log2(min(chunks, 8), "chunks per row")
    if bits == 0:
        return IDENTITY
    line = max(width, 128 // elem_bytes)  # elements per row, or per 128-byte line if rows are shorter
    return Swizzle(bits, base, max(bits, _log2(line, "line") - base))


def ldmatrix_x4_rows(width: int, row0: int, col0: int, elem_bytes: int = 2, pad: int = 0,
                     swizzle: Swizzle = IDENTITY) -> list[int]:
    """Byte addresses the 32 lanes of the kernels' ldmatrix.x4 give: lane l points at row row0 + l % 16,
    column col0 + 8 * (l / 16) of a 16x16 piece (matrix j = lanes 8j..8j+7)."""
    return [tile_offset(row0 + lane % 16, col0 + 8 * (lane // 16), width, pad, swizzle) * elem_bytes
            for lane in range(32)]


def hgemm_ldmatrix_requests(operand: str, BLOCK_M: int = 128, BLOCK_N: int = 128, BLOCK_K: int = 32,
                            WARP_M: int = 64, WARP_N: int = 64, layout: str = "plain", pad: int = 0,
                            **_ignored) -> list[list[int]]:
    """Every ldmatrix.x4 request (32 row addresses) all warps of an hgemm block make on one K tile.

    operand 'A': sA is BLOCK_M x BLOCK_K, piece (m, kk) at row warp_row + 16m, column kk;
    operand 'B': sB is BLOCK_K x BLOCK_N (read with .trans), piece (kk, n) at row kk, column warp_col + 8n
    (n even). layout: 'plain', 'padded' (rows `pad` halves longer) or 'swizzled' (kernel_swizzle)."""
    width = BLOCK_K if operand == "A" else BLOCK_N
    sw = kernel_swizzle(width) if layout == "swizzled" else IDENTITY
    pad = pad if layout == "padded" else 0
    warps_n = BLOCK_N // WARP_N
    reqs = []
    for w in range((BLOCK_M // WARP_M) * warps_n):
        warp_row, warp_col = w // warps_n * WARP_M, w % warps_n * WARP_N
        for kk in range(0, BLOCK_K, 16):
            if operand == "A":
                reqs += [ldmatrix_x4_rows(width, warp_row + 16 * m, kk, 2, pad, sw) for m in range(WARP_M // 16)]
            else:
                reqs += [ldmatrix_x4_rows(width, kk, warp_col + 8 * n, 2, pad, sw) for n in range(0, WARP_N // 8, 2)]
    return reqs


def hgemm_store_requests(operand: str, BLOCK_M: int = 128, BLOCK_N: int = 128, BLOCK_K: int = 32,
                         WARP_M: int = 64, WARP_N: int = 64, layout: str = "plain", pad: int = 0,
                         **_ignored) -> list[list[int]]:
    """The 16-byte shared stores of the hgemm copy (steps 02 on): chunk e of the tile goes to thread
    e % NUM_THREADS, at row e / (width / 8), column e % (width / 8) * 8; one request per warp and round."""
    width, rows = (BLOCK_K, BLOCK_M) if operand == "A" else (BLOCK_N, BLOCK_K)
    sw = kernel_swizzle(width) if layout == "swizzled" else IDENTITY
    pad = pad if layout == "padded" else 0
    threads = (BLOCK_M // WARP_M) * (BLOCK_N // WARP_N) * 32
    chunks = rows * width // 8
    reqs = []
    for i in range(-(-chunks // threads)):
        for w in range(threads // 32):
            lanes = [i * threads + 32 * w + lane for lane in range(32)]
            addrs = [tile_offset(e // (width // 8), e % (width // 8) * 8, width, pad, sw) * 2
                     for e in lanes if e < chunks]
            if addrs:
                reqs.append(addrs)
    return reqs


def sgemm_requests(step: str, access: str, BLOCK_M: int = 128, BLOCK_N: int = 128, BLOCK_K: int = 8,
                   THREAD_M: int = 8, THREAD_N: int = 8, WARP_M: int = 64, WARP_N: int = 32, pad: int = 0,
                   **_ignored) -> tuple[list[list[int]], int]:
    """(requests, access bytes) of one K tile for the FP32 steps 06 and 07 (twins of their index code).

    access: 'sA load' / 'sB load' (128-bit slivers at each k) or 'sA store' (the float4 of A stored
    transposed, one float into each of 4 rows of sA[BLOCK_K][BLOCK_M + pad]). `pad` pads sA's rows."""
    if step.endswith("06_vectorized"):
        threads = (BLOCK_M // THREAD_M) * (BLOCK_N // THREAD_N)

        def rows_cols(tid):  # the thread's first row and column, and its float4 offsets in each
            return ([tid // (BLOCK_N // THREAD_N) * THREAD_M + m for m in range(0, THREAD_M, 4)],
                    [tid % (BLOCK_N // THREAD_N) * THREAD_N + n for n in range(0, THREAD_N, 4)])
    elif step.endswith("07_warptiling"):
        warps_n, lanes_n = BLOCK_N // WARP_N, WARP_N // THREAD_N
        threads = (BLOCK_M // WARP_M) * warps_n * 32
        sub_m, sub_n = WARP_M // (THREAD_M // 4), WARP_N // (THREAD_N // 4)

        def rows_cols(tid):
            w, lane = tid // 32, tid % 32
            row = w // warps_n * WARP_M + lane // lanes_n * 4
            col = w % warps_n * WARP_N + lane % lanes_n * 4
            return ([row + i * sub_m for i in range(THREAD_M // 4)], [col + j * sub_n for j in range(THREAD_N // 4)])
    else:
        raise ValueError(f"sgemm_requests knows sgemm/06_vectorized and sgemm/07_warptiling, not {step}")
    a_width = BLOCK_M + pad
    reqs: list[list[int]] = []
    for w in range(threads // 32):
        tids = range(32 * w, 32 * w + 32)
        if access == "sA store":
            for i in range(-(-(BLOCK_M * BLOCK_K // 4) // threads)):
                for j in range(4):
                    es = [i * threads + t for t in tids if i * threads + t < BLOCK_M * BLOCK_K // 4]
                    if es:
                        reqs.append([((e % (BLOCK_K // 4) * 4 + j) * a_width + e // (BLOCK_K // 4)) * 4 for e in es])
            continue
        for k in range(BLOCK_K):
            if access == "sA load":
                for idx in range(THREAD_M // 4):
                    reqs.append([(k * a_width + rows_cols(t)[0][idx]) * 4 for t in tids])
            elif access == "sB load":
                for idx in range(THREAD_N // 4):
                    reqs.append([(k * BLOCK_N + rows_cols(t)[1][idx]) * 4 for t in tids])
            else:
                raise ValueError(f"access is 'sA load', 'sB load' or 'sA store', not {access!r}")
    return reqs, (4 if access == "sA store" else 16)


def per_request(requests: Sequence[Sequence[int]], access_bytes: int = 4, ldmatrix: bool = False) -> float:
    """Average wavefronts per warp request over `requests` (the model's counterpart of the emulator's)."""
    counts = [ldmatrix_wavefronts(r) if ldmatrix else wavefronts(r, access_bytes) for r in requests]
    return sum(counts) / len(counts)


def ideal_wavefronts(lanes: int, access_bytes: int) -> int:
    """The fewest wavefronts a request of `lanes` distinct accesses can take: 128 bytes per wavefront."""
    return max(1, -(-lanes * access_bytes // (BANKS * WORD)))


# ------------------------------------------------------------------------------------------------
# Pictures and the chapter 5 sliders
# ------------------------------------------------------------------------------------------------
ACCESSES = ("row write", "column read", "ldmatrix 8x8")
LAYOUTS = ("plain", "padded", "swizzled")


@dataclass(frozen=True)
class AccessCount:
    """One warp request on one tile layout, counted by the model."""

    access: str
    width: int
    elem_bytes: int
    pad: int
    swizzle: Swizzle
    rows: int  # rows of the tile the request touches (what to draw)
    touched: tuple[tuple[int, int], ...]  # (row, col) of every element the request reads or writes
    wavefronts: int
    ideal: int

    @property
    def layout(self) -> str:
        return "swizzled" if self.swizzle != IDENTITY else "padded" if self.pad else "plain"

    def __str__(self) -> str:
        sw = self.swizzle
        how = (f"swizzled with Swizzle<{sw.bits},{sw.base},{sw.shift}>" if sw != IDENTITY
               else f"padded by {self.pad} element(s) per row" if self.pad else "plain row-major")
        cost = f", {100 * self.pad / self.width:.1f}% more shared memory" if self.pad and sw == IDENTITY else ""
        return (f"{self.access} on a {self.width}-wide tile of {self.elem_bytes}-byte elements, {how}{cost}: "
                f"{self.wavefronts} wavefront(s), ideal {self.ideal} ({self.wavefronts / self.ideal:g}-way)")


def config_problem(width: int, elem_bytes: int, pad: int, bits: int, access: str) -> str | None:
    """Why this slider setting cannot be drawn, in one sentence; None when it can."""
    if access not in ACCESSES:
        return f"access must be one of {', '.join(ACCESSES)}, not {access!r}"
    if width < 1 or width & (width - 1):
        return f"tile width {width} is not a power of two"
    if pad and bits:
        return ("padding and swizzling are alternatives: the XOR assumes rows of a power-of-two size; "
                "set padding or swizzle bits to 0")
    if bits and width * elem_bytes < 32:
        return f"a row of {width * elem_bytes} bytes has fewer than two 16-byte chunks: nothing to swizzle"
    if bits and 1 << bits > width * elem_bytes // 16:
        return (f"{bits} swizzle bits permute {1 << bits} chunks, but a row of {width * elem_bytes} bytes has only "
                f"{width * elem_bytes // 16}: chunks would leave their row; use at most "
                f"{(width * elem_bytes // 16).bit_length() - 1} bits")
    if access == "ldmatrix 8x8" and width * elem_bytes < 16:
        return f"ldmatrix reads 16-byte rows, wider than this tile's {width * elem_bytes}-byte rows"
    if (pad * elem_bytes) % 16 and access == "ldmatrix 8x8":
        return f"ldmatrix needs 16-byte aligned rows: pad by a multiple of {16 // elem_bytes} elements"
    return None


def count_access(access: str, width: int = 64, elem_bytes: int = 2, pad: int = 0, bits: int = 0) -> AccessCount:
    """The model's count for one warp request on a tile: 'row write' (lanes 0-31 along the rows),
    'column read' (lane i reads row i, column 0) or 'ldmatrix 8x8' (8 rows of 16 bytes at column 0)."""
    problem = config_problem(width, elem_bytes, pad, bits, access)
    if problem:
        raise ValueError(problem)
    sw = swizzle_for(width, elem_bytes, bits) if bits else IDENTITY
    if access == "row write":
        cells = [(i // width, i % width) for i in range(32)]
        addrs = [tile_offset(r, c, width, pad, sw) * elem_bytes for r, c in cells]
        waves, ideal, touched = wavefronts(addrs, elem_bytes), ideal_wavefronts(32, elem_bytes), cells
    elif access == "column read":
        cells = [(i, 0) for i in range(32)]
        addrs = [tile_offset(r, c, width, pad, sw) * elem_bytes for r, c in cells]
        waves, ideal, touched = wavefronts(addrs, elem_bytes), ideal_wavefronts(32, elem_bytes), cells
    else:
        per_row = 16 // elem_bytes
        addrs = [tile_offset(r, 0, width, pad, sw) * elem_bytes for r in range(8)]
        waves, ideal = ldmatrix_wavefronts(addrs), 1
        touched = [(r, c) for r in range(8) for c in range(per_row)]
    rows = max(r for r, _ in touched) + 1
    return AccessCount(access, width, elem_bytes, pad, sw, max(rows, 4 if width < 8 else rows), tuple(touched),
                       waves, ideal)


def draw_access(count: AccessCount, ax=None, max_cols: int = 64):
    """The tile in logical (row, column) order, each element coloured by the bank it is stored in (after
    padding or swizzling); the request's elements outlined. Repeated colours among them = a conflict."""
    width = min(count.width, max_cols)
    ax = draw_bank_map(count.rows, count.width, count.elem_bytes, count.pad, count.swizzle, (), ax=ax,
                       title=f"{count.layout}: {count.wavefronts} wavefront(s)")
    ax.set_xlim(-0.5, width - 0.5)
    for r, c in count.touched:
        if c < width:
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.2))
    ax.set_xlabel("colour: the bank an element is stored in; outlined: the request", fontsize=7)
    return ax


def draw_three_layouts(access: str, width: int, elem_bytes: int, pad: int, axes=None):
    """The same request on the plain, padded and (kernel-style) swizzled tile, side by side."""
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(12, 2.6))
    counts = [count_access(access, width, elem_bytes, 0, 0), count_access(access, width, elem_bytes, pad, 0),
              count_access(access, width, elem_bytes, 0, swizzle_for(width, elem_bytes).bits)]
    for ax, c in zip(axes, counts):
        draw_access(c, ax)
    axes[0].figure.suptitle(f"{access}, {width}-wide tile of {elem_bytes}-byte elements", fontsize=9)
    return counts


def draw_permutation(rows: int, width: int, swizzle: Swizzle, unit: int = 1, ax=None, title: str = ""):
    """Where each logical column (in units of `unit` elements) of each row is stored: cell (r, p) shows
    the logical unit that lands in physical slot p of row r, coloured by that logical unit."""
    slots = width // unit
    grid = np.zeros((rows, slots), int)
    for r in range(rows):
        for u in range(slots):
            phys = swizzle(r * width + u * unit) - r * width
            grid[r, phys // unit] = u
    if ax is None:
        _, ax = plt.subplots(figsize=(slots * 0.45 + 1, rows * 0.45 + 0.6))
    ax.imshow(grid, cmap="tab10" if slots <= 10 else "twilight", interpolation="nearest")
    for r in range(rows):
        for p in range(slots):
            ax.text(p, r, str(grid[r, p]), ha="center", va="center", fontsize=8, color="white")
    ax.set_xticks(range(slots))
    ax.set_yticks(range(rows))
    ax.set_xlabel("physical slot" + (f" ({unit} elements each)" if unit > 1 else ""), fontsize=8)
    ax.set_ylabel("row", fontsize=8)
    ax.set_title(title or f"Swizzle<{swizzle.bits},{swizzle.base},{swizzle.shift}>", fontsize=9)
    return grid


def bank_explorer(width: int = 64, elem_bytes: int = 2, pad: int = 0, bits: int = 3, access: str = "ldmatrix 8x8"):
    """Chapter 5's sliders: tile width, element size, padding and swizzle bits redraw the bank map of one
    warp request and its wavefront count. Pure model: works the same with or without a GPU."""
    w_width = widgets.SelectionSlider(options=[4, 8, 16, 32, 64, 128], value=width, description="width",
                                      continuous_update=False)
    w_elem = widgets.Dropdown(options=[1, 2, 4, 8], value=elem_bytes, description="elem bytes")
    w_pad = widgets.IntSlider(value=pad, min=0, max=16, description="padding", continuous_update=False)
    w_bits = widgets.IntSlider(value=bits, min=0, max=3, description="swizzle bits", continuous_update=False)
    w_access = widgets.Dropdown(options=list(ACCESSES), value=access, description="access")
    picture, report = widgets.Output(), widgets.HTML()

    def redraw(_change=None) -> None:
        args = (w_access.value, w_width.value, w_elem.value, w_pad.value, w_bits.value)
        problem = config_problem(args[1], args[2], args[3], args[4], args[0])
        text = problem or str(count_access(*args))
        report.value = f"<pre>{html.escape(text)}</pre>"
        with picture:
            picture.clear_output(wait=True)
            if problem is None:
                fig, ax = plt.subplots(figsize=(9, 2.8))
                draw_access(count_access(*args), ax)
                display(fig)
                plt.close(fig)

    for w in (w_width, w_elem, w_pad, w_bits, w_access):
        w.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([w_width, w_elem, w_access]), widgets.HBox([w_pad, w_bits]), report, picture])
