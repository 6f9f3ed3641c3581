"""The operands a check draws for a step: structured inputs first (identity, ones: a failure there is a layout bug),
then random shapes off the tile grid, and an Inf (and, for E = A B C, a NaN) that the step must carry through.

A step names its generators in the registry (registry.Step.cases / make_inputs for C = A B, registry.FusedStep's for
E = A B C); check.verify draws through the step and never asks which kind it has. A case is (kind, dims): dims are
the step's problem sizes in its own order, (M, N, K) for C = A B and (M, K, L, N) for E = A B C."""
from __future__ import annotations

import numpy as np


def tile_of(params: dict) -> tuple[int, int, int]:
    """The (M, N, K) tile a step's parameters describe, used to pick shapes around its edges."""
    p = params
    edge = p.get("BLOCK", 0)
    tm = p.get("BLOCK_M", edge or p.get("BLOCK_X", 16))
    tn = p.get("BLOCK_N", edge or p.get("BLOCK_Y", 16))
    tk = p.get("BLOCK_K", edge or 8)
    return tm, tn, tk


def gemm_cases(params: dict, multiple: int = 1) -> list[tuple[str, tuple]]:
    """C = A B's cases: identity and ones first, then random shapes off the tile grid, then an Inf.
    `multiple`: a step that needs N and K multiples of it (TMA: 8) gets them rounded up, still off the grid."""
    tm, tn, tk = tile_of(params)
    t = max(tm, tn)
    up = lambda x: -(-x // multiple) * multiple  # noqa: E731
    return [("identity", (t, up(tn + 1), up(t))), ("ones", (tm + 1, up(tn + 3), up(2 * tk + 5))),
            ("random", (1, up(1), up(1))), ("random", (2 * tm, 2 * tn, 4 * tk)),
            ("random", (2 * tm + 3, up(tn + 5), up(3 * tk + 7))), ("random", (67, up(129), up(33))),
            ("inf", (2 * tm + 3, up(tn + 5), up(3 * tk + 7)))]


def gemm_inputs(kind: str, m: int, n: int, k: int, dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N) of `dtype` for one case of C = A B."""
    rng = np.random.default_rng(seed + 7919 * m + 104729 * n + k)
    if kind == "identity":
        a = np.eye(m, k)
        b = rng.integers(-8, 9, size=(k, n))  # small integers: exact in fp16 and fp32
    elif kind == "inf":  # small integers (exact in TF32 too: 3xTF32's small parts are 0) and zeros
        a, b = rng.integers(-2, 3, size=(m, k)).astype(float), rng.integers(-2, 3, size=(k, n)).astype(float)
        a[m // 2, k // 2], b[k // 3, n // 2] = np.inf, -np.inf
    elif kind == "ones":
        a, b = np.ones((m, k)), np.ones((k, n))
    else:
        a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    return a.astype(dtype), b.astype(dtype)


def abc_cases(tile: tuple[int, int] = (16, 16)) -> list[tuple[str, tuple]]:
    """E = A B C's cases for an output tile of (rows, columns): structured inputs first, then shapes off the tile
    grid, a NaN in A and an Inf (dims (M, K, L, N); the step rounds them to shapes it takes, FusedStep.fit)."""
    bm, bn = tile
    t = max(bm, bn, 4)
    return [("identity", (t, t, t + 1, t + 3)), ("ones", (bm + 1, 2 * t + 5, bn + 3, t - 1)),
            ("random", (1, 1, 1, 1)), ("random", (17, 17, 17, 17)), ("random", (2 * t + 3, t + 5, 3 * t + 7, t + 1)),
            ("random", (67, 33, 70, 129)), ("nan", (t + 2, t + 1, t + 3, t + 2)), ("inf", (t + 2, t + 1, t + 3, t + 2))]


def abc_inputs(kind: str, m: int, k: int, l: int, n: int, seed: int = 0):
    """A, B, C (float32) for one case: identity A with small integers (exact), ones, uniform [-1, 1], a NaN in
    A, or ("inf") small integers with zeros (exact in TF32: 3xTF32's small parts are 0), +Inf in A and -Inf in C."""
    rng = np.random.default_rng(seed + 7919 * m + 104729 * n + 31 * k + l)
    if kind == "identity":
        a = np.eye(m, k)
        b, c = rng.integers(-4, 5, size=(k, l)), rng.integers(-4, 5, size=(l, n))
    elif kind == "ones":
        a, b, c = np.ones((m, k)), np.ones((k, l)), np.ones((l, n))
    elif kind == "inf":
        a, b, c = (rng.integers(-2, 3, size=s).astype(float) for s in ((m, k), (k, l), (l, n)))
        a[m // 2, k // 2], c[l // 2, n // 3] = np.inf, -np.inf
    else:
        a, b, c = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, l)), rng.uniform(-1, 1, (l, n))
    a, b, c = a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)
    if kind == "nan":
        a[m // 2, k // 2] = np.nan
    return a, b, c
