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
    import numpy as np

    return np.array([[tile_offset(r, c, width, pad, swizzle) * elem_bytes // WORD % BANKS for c in range(width)]
                     for r in range(rows)])


def draw_bank_map(rows: int, width: int, elem_bytes: int = 4, pad: int = 0, swizzle: Swizzle = IDENTITY,
                  touched: Sequence[tuple[int, int]] = (), ax=None, title: str = ""):
    """Colour = bank; the cells a request touches are outlined and numbered by their bank."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

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
