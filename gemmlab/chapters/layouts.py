"""Python twins of the warp-level index maps the chapters draw: mma fragments and ldmatrix.

Conventions (PTX ISA, "Matrix Fragments for mma.m16n8k8 / mma.m16n8k16" and "ldmatrix"):
``group_id = lane // 4`` and ``thread_in_group = lane % 4``. Element ``i`` of a fragment is the
PTX ``a_i`` / ``b_i`` / ``c_i``; fp16 data packs two elements per 32-bit register (element ``i``
lives in register ``i // 2``, low half first), fp32 accumulators use one register per element.
"""
from __future__ import annotations

from typing import Dict, Tuple

WARP_SIZE = 32

Coord = Tuple[int, int]

MMA_SHAPES: Dict[str, Tuple[int, int, int]] = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16)}


def mma_operand_shape(shape: str, operand: str) -> Coord:
    """(rows, cols) of operand "a" (M x K), "b" (K x N) or "c" (M x N) for an mma shape."""
    m, n, k = mma_mnk(shape)
    return {"a": (m, k), "b": (k, n), "c": (m, n)}[_check_operand(operand)]


def elements_per_lane(shape: str, operand: str) -> int:
    """How many matrix elements each of the 32 lanes holds for this operand."""
    rows, cols = mma_operand_shape(shape, operand)
    return rows * cols // WARP_SIZE


def mma_fragment(shape: str, operand: str, accum: str = "f32") -> Dict[Coord, Coord]:
    """Map (lane, element i) -> (row, col) of one operand of mma.sync.`shape`.row.col (f16)."""
    mma_mnk(shape)
    operand = _check_operand(operand)
    if accum not in ("f32", "f16"):
        raise ValueError(f"accum must be 'f32' or 'f16', not {accum!r}")
    # accum changes only how C/D elements pack into registers, never which lane holds which.
    out: Dict[Coord, Coord] = {}
    for lane in range(WARP_SIZE):
        g, t = lane // 4, lane % 4
        for i in range(elements_per_lane(shape, operand)):
            if operand == "a":
                # pairs of elements: (a0,a1) rows 0-7, (a2,a3) rows 8-15, then the same for k + 8
                row = g + 8 * ((i // 2) % 2)
                col = 2 * t + (i % 2) + 8 * (i // 4)
            elif operand == "b":
                # (b0,b1) k rows 2t, 2t+1; (b2,b3) the same 8 rows further down (m16n8k16 only)
                row = 2 * t + (i % 2) + 8 * (i // 2)
                col = g
            else:
                row = g + 8 * (i // 2)
                col = 2 * t + (i % 2)
            out[(lane, i)] = (row, col)
    return out


def ldmatrix_fragment(
    num: int, trans: bool = False
) -> Dict[Tuple[int, int, int], Tuple[int, int, int]]:
    """Map (lane, register j, half e) -> (matrix, row, col) of the 8x8 matrices of ldmatrix.xN."""
    check_ldmatrix_num(num)
    out: Dict[Tuple[int, int, int], Tuple[int, int, int]] = {}
    for lane in range(WARP_SIZE):
        for j in range(num):
            for e in range(2):
                # Register j holds matrix j; row and col are as stored (row = which row address).
                r, c = lane // 4, 2 * (lane % 4) + e
                out[(lane, j, e)] = (j, c, r) if trans else (j, r, c)
    return out


def ldmatrix_row_provider(num: int) -> Dict[int, Tuple[int, int]]:
    """Map lane -> (matrix, row) whose 16-byte row address that lane supplies to ldmatrix.xN."""
    check_ldmatrix_num(num)
    return {lane: (lane // 8, lane % 8) for lane in range(8 * num)}


def mma_mnk(shape: str) -> Tuple[int, int, int]:
    """(M, N, K) of an mma shape such as "m16n8k16"; a ValueError naming the known shapes otherwise."""
    if shape not in MMA_SHAPES:
        raise ValueError(f"unknown mma shape {shape!r}: use one of {sorted(MMA_SHAPES)}")
    return MMA_SHAPES[shape]


def _check_operand(operand: str) -> str:
    if operand not in ("a", "b", "c"):
        raise ValueError(f"operand must be 'a', 'b' or 'c' (c also stands for d), not {operand!r}")
    return operand


def check_ldmatrix_num(num: int) -> None:
    """A ValueError unless `num` is a number of matrices one ldmatrix loads (1, 2 or 4)."""
    if num not in (1, 2, 4):
        raise ValueError(f"ldmatrix loads 1, 2 or 4 matrices (.x1/.x2/.x4), not {num!r}")
