"""Helpers shared by the emulator tests: compile-and-launch, and the PTX fragment layouts in Python."""
from __future__ import annotations

import numpy as np

from gemmlab import cpu


def run(source: str, name: str, grid, block, args: list, shared_mem: int = 0, timeout: float | None = 60.0):
    """Compile `source` (cached) and launch `name` once."""
    module = cpu.compile_kernel(source, name, label=name)
    cpu.launch(module, grid, block, args, shared_mem=shared_mem, timeout=timeout)
    return args


def pack_half2(lo: float, hi: float) -> int:
    """One 32-bit register holding two halves; the lower 16 bits hold the first (smaller index)."""
    bits = np.array([lo, hi], np.float16).view(np.uint16)
    return int(bits[0]) | int(bits[1]) << 16


def unpack_half2(reg: int) -> tuple[float, float]:
    halves = np.array([reg & 0xFFFF, reg >> 16], np.uint16).view(np.float16)
    return float(halves[0]), float(halves[1])


# PTX ISA "Matrix fragments for mma.m16n8k8 / m16n8k16" (f16 inputs), written from the element
# formulas of the ISA: g = lane >> 2, t = lane % 4, element i of a lane goes to register i // 2.
def a_fragment(A: np.ndarray, lane: int) -> list[int]:
    """Registers of matrix A (16 x K, K = 8 or 16) held by `lane`."""
    g, t = lane >> 2, lane % 4
    elems = []
    for i in range(A.shape[1] // 2):       # 4 elements for k8, 8 for k16
        row = g if i % 4 < 2 else g + 8    # rows g for a0,a1 (a4,a5), g+8 for a2,a3 (a6,a7)
        col = 2 * t + (i & 1) + (8 if i >= 4 else 0)
        elems.append(A[row, col])
    return [pack_half2(elems[2 * r], elems[2 * r + 1]) for r in range(len(elems) // 2)]


def b_fragment(B: np.ndarray, lane: int) -> list[int]:
    """Registers of matrix B (K x 8) held by `lane`: elements (k = 2t + (i & 1) [+ 8 for i >= 2], col g)."""
    g, t = lane >> 2, lane % 4
    elems = [B[2 * t + (i & 1) + (8 if i >= 2 else 0), g] for i in range(B.shape[0] // 4)]
    return [pack_half2(elems[2 * r], elems[2 * r + 1]) for r in range(len(elems) // 2)]


def c_positions(lane: int) -> list[tuple[int, int]]:
    """(row, col) of accumulator elements c0..c3 of `lane`."""
    g, t = lane >> 2, lane % 4
    return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
