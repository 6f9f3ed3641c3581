"""Each step's error bound: how far a float32 (or float16) result may be from the float64 product of the same inputs
and still be right, for C = A B (compare, within the rounding of the step's accumulation over K) and E = A B C
(compare_abc, within both products'). A step declares its bound through these (registry.Step.compare,
registry.FusedStep.compare); check.verify applies it."""
from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "float64": 2.0**-53}


def compare(got: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: str) -> tuple[np.ndarray, np.ndarray]:
    """(bad mask, error/bound ratio) of `got` against the float64 product of the same inputs."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore"):  # Inf * 0 and Inf - Inf in the "inf" case
        want = a64 @ b64
        bound = 2 * k * UNIT_ROUNDOFF[accumulate] * (np.abs(a64) @ np.abs(b64))
        # output rounding: relative for normal numbers, one subnormal step near zero
        bound += UNIT_ROUNDOFF[str(got.dtype)] * np.abs(want) + float(np.finfo(got.dtype).smallest_subnormal)
        err = np.abs(g - want)
        ratio = err / bound
    bad = ~(err <= bound)  # NaN compares False, so NaN and Inf count as bad
    return special_values(bad, ratio, g, want)


def compare_abc(got: np.ndarray, a, b, c) -> tuple[np.ndarray, np.ndarray]:
    """(bad mask, error/bound) of `got` against float64. The bound covers any summation order of
    both products: 2 (K + L) u (|A| |B|) |C| plus the output's rounding. Where the reference is
    Inf or NaN, the kernel must give the same (check.special_values); elsewhere NaN and Inf never pass."""
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    k, l = a.shape[1], b.shape[1]
    with np.errstate(invalid="ignore"):  # Inf * 0 and Inf - Inf in the "inf" case
        want = (a64 @ b64) @ c64
        bound = 2 * (k + l) * UNIT_ROUNDOFF["float32"] * ((np.abs(a64) @ np.abs(b64)) @ np.abs(c64))
        bound += UNIT_ROUNDOFF["float32"] * np.abs(want) + float(np.finfo(np.float32).smallest_subnormal)
        g = got.astype(np.float64)
        err = np.abs(g - want)
        ratio, bad = err / bound, ~(err <= bound)
    return special_values(bad, ratio, g, want)


def special_values(bad: np.ndarray, ratio: np.ndarray, got: np.ndarray, want: np.ndarray):
    """(bad, ratio) where float64 gives Inf or NaN (`want`): right only if `got` is the same Inf, or NaN;
    ratio 0 where right, inf where not (also where a finite `want` got a non-finite answer)."""
    special = ~np.isfinite(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    bad = np.where(special, ~same, bad)
    ratio = np.where(special, np.where(same, 0.0, np.inf), ratio)
    return bad, np.where(np.isfinite(ratio), ratio, np.inf)
