"""verify(): a step against a float64 reference, structured inputs before random ones.

The tolerance is the classical bound on a sum of K products, |fl(sum) - sum| <= K u sum|a||b|
(u = unit roundoff of the accumulator), plus the output's rounding. Any summation order passes it;
a layout bug (wrong row, missing tile) misses it by orders of magnitude. Where float64 gives Inf or
NaN (the "inf" case: an Inf in A and a -Inf in B among small integers, zeros included), the step must
give the same; elsewhere NaN and Inf never pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..runtime import registry
from ..errors import ShapeError, VerificationError
from ..runtime.kernel import FusedKernel, Kernel, step as make_step, to_array
from ..runtime.bounds import UNIT_ROUNDOFF, compare, compare_abc, special_values  # noqa: F401 (check.X)
from ..runtime.registry import Dims, product64

MAX_LISTED = 8


@dataclass
class Case:
    kind: str  # "identity", "ones", "random", "inf"
    m: int
    n: int
    k: int
    worst: float = 0.0  # largest |error| / bound over the output (< 1 passes)
    rejected: str = ""  # the ShapeError text, if the step refused this shape


@dataclass
class VerifyReport:
    name: str
    label: str
    cases: list[Case] = field(default_factory=list)
    mismatches: list[tuple[int, int, float, float]] = field(default_factory=list)
    failed_case: Case | None = None

    @property
    def passed(self) -> bool:
        return self.failed_case is None

    def __str__(self) -> str:
        if not self.passed:
            c = self.failed_case
            listed = ", ".join(f"({r}, {col}, {g:.6g}, {w:.6g})" for r, col, g, w in self.mismatches)
            return (f"FAIL: {self.name} on the {c.kind} input {c.m}x{c.n}x{c.k}: first mismatches "
                    f"(row, col, got, want): {listed}")
        ran = [c for c in self.cases if not c.rejected and c.kind != "inf"]  # shapes; "inf" reuses one
        text = f"PASS: {self.name} matches the float64 reference on {len(ran)} shape{'' if len(ran) == 1 else 's'}"
        rejected = [c for c in self.cases if c.rejected]
        if rejected:
            text += f"; it rejects {len(rejected)} shape(s) before launch"
        return text

    def _repr_pretty_(self, p, cycle):  # IPython shows the sentence, not the dataclass
        p.text(str(self))


def tile_of(params: dict) -> tuple[int, int, int]:
    """The (M, N, K) tile a step's parameters describe, used to pick shapes around its edges."""
    p = params
    edge = p.get("BLOCK", 0)
    tm = p.get("BLOCK_M", edge or p.get("BLOCK_X", 16))
    tn = p.get("BLOCK_N", edge or p.get("BLOCK_Y", 16))
    tk = p.get("BLOCK_K", edge or 8)
    return tm, tn, tk


def default_cases(params: dict, multiple: int = 1) -> list[Case]:
    """Identity and ones first (a failure there is a layout bug), then random shapes off the tile grid.
    `multiple`: a step that needs N and K multiples of it (TMA: 8) gets them rounded up, still off the grid."""
    tm, tn, tk = tile_of(params)
    t = max(tm, tn)
    up = lambda x: -(-x // multiple) * multiple  # noqa: E731
    return [Case("identity", t, up(tn + 1), up(t)), Case("ones", tm + 1, up(tn + 3), up(2 * tk + 5)),
            Case("random", 1, up(1), up(1)), Case("random", 2 * tm, 2 * tn, 4 * tk),
            Case("random", 2 * tm + 3, up(tn + 5), up(3 * tk + 7)), Case("random", 67, up(129), up(33)),
            Case("inf", 2 * tm + 3, up(tn + 5), up(3 * tk + 7))]


def make_inputs(kind: str, m: int, n: int, k: int, dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
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


def run_on_inputs(kernel, m: int, n: int, k: int, kind: str = "random", seed: int = 0):
    """(kernel(A, B), A, B) on make_inputs(kind, m, n, k) in the kernel's dtype: one call, for a test or a reader."""
    a, b = make_inputs(kind, m, n, k, kernel.dtype, seed)
    return kernel(a, b), a, b


def verify(kernel: Kernel | str, cases: list[Case] | None = None, raise_on_fail: bool = True,
           **params) -> VerifyReport:
    """Check a step on several shapes against float64; raise VerificationError listing mismatches.
    A fused step (its name or its FusedKernel, registry.is_fused) is checked by check_fused: its FusedReport."""
    if isinstance(kernel, str):
        kernel = make_step(kernel, **params)
    if registry.is_fused(kernel):
        return check_fused(kernel, cases, raise_on_fail)
    report = VerifyReport(kernel.name, kernel.label)
    if not cases:
        cases = (default_cases({**kernel.step.fixed_tile, **kernel.params}, kernel.step.shape_multiple)
                 + [Case(*shape) for shape in kernel.step.more_cases(kernel.params, kernel.backend)])
    for case in cases:
        a, b = make_inputs(case.kind, case.m, case.n, case.k, kernel.dtype)
        try:
            got = kernel(a, b)
        except ShapeError as e:
            case.rejected = str(e)
            report.cases.append(case)
            continue
        bad, ratio = kernel.step.compare(np.asarray(got), a, b)
        case.worst = float(ratio.max()) if ratio.size else 0.0
        report.cases.append(case)
        if bad.any():
            with np.errstate(invalid="ignore"):
                want = a.astype(np.float64) @ b.astype(np.float64)
            rows, cols = np.nonzero(bad)
            report.mismatches = [(int(r), int(c), float(got[r, c]), float(want[r, c]))
                                 for r, c in zip(rows[:MAX_LISTED], cols[:MAX_LISTED])]
            report.failed_case = case
            break
    if raise_on_fail and not report.passed:
        raise VerificationError(str(report))
    return report


# ------------------------------------------------------------------------------------------------
# The fused steps (E = A B C) against float64: their cases, inputs, bound and check
# ------------------------------------------------------------------------------------------------
@dataclass
class FusedCase:
    kind: str  # "identity", "ones", "random", "nan", "inf"
    m: int
    k: int
    l: int
    n: int
    worst: float = 0.0

    @property
    def dims(self) -> Dims:
        return (self.m, self.k, self.l, self.n)


@dataclass
class FusedReport:
    name: str
    label: str
    cases: list[FusedCase] = field(default_factory=list)
    failed: FusedCase | None = None
    mismatches: list[tuple[int, int, float, float]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.failed is None

    def __str__(self) -> str:
        if self.failed:
            c = self.failed
            listed = ", ".join(f"({r}, {col}, {g:.6g}, {w:.6g})" for r, col, g, w in self.mismatches)
            return (f"FAIL: {self.name} on the {c.kind} input M={c.m} K={c.k} L={c.l} N={c.n}: first mismatches "
                    f"(row, col, got, want): {listed}")
        shapes = len({c.dims for c in self.cases if c.kind not in ("nan", "inf")})
        text = f"PASS: {self.name} matches the float64 reference on {shapes} shapes"
        if any(c.kind == "nan" for c in self.cases):
            text += "; a NaN in A fills its row of E with NaN"
        return text

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def fused_cases(kern: FusedKernel | None = None) -> list[FusedCase]:
    """Structured inputs first (a failure there is a layout bug), then shapes off the tile grid."""
    bm, bn = kern.step.tile(kern.params) if kern else (16, 16)
    t = max(bm, bn, 4)
    cases = [FusedCase("identity", t, t, t + 1, t + 3), FusedCase("ones", bm + 1, 2 * t + 5, bn + 3, t - 1),
             FusedCase("random", 1, 1, 1, 1), FusedCase("random", 17, 17, 17, 17), FusedCase("random", 2 * t + 3, t + 5, 3 * t + 7, t + 1),
             FusedCase("random", 67, 33, 70, 129), FusedCase("nan", t + 2, t + 1, t + 3, t + 2),
             FusedCase("inf", t + 2, t + 1, t + 3, t + 2)]
    if kern:  # shapes the step takes (step 07: K, L, N multiples of 4)
        cases = [FusedCase(c.kind, *kern.step.fit(c.dims)) for c in cases]
    return cases


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


def reference_abc(a, b, c) -> np.ndarray:
    """E = A B C in float64."""
    return product64(a, b, c)


def check_fused(kern: FusedKernel | str, cases: list[FusedCase] | None = None, raise_on_fail: bool = True, **params) -> FusedReport:
    """Check a fused step on several shapes against float64; raise VerificationError listing mismatches."""
    if isinstance(kern, str):
        kern = make_step(kern, **params)
    report = FusedReport(kern.name, kern.label)
    for case in cases or fused_cases(kern):
        a, b, c = abc_inputs(case.kind, *case.dims)
        got = np.asarray(to_array(np, kern(a, b, c)))
        bad, ratio = kern.step.compare(got, a, b, c)
        case.worst = float(ratio.max()) if ratio.size else 0.0
        report.cases.append(case)
        if bad.any():
            want = reference_abc(a, b, c)
            rows, cols = np.nonzero(bad)
            report.mismatches = [(int(r), int(col), float(got[r, col]), float(want[r, col]))
                                 for r, col in zip(rows[:8], cols[:8])]
            report.failed = case
            break
    if raise_on_fail and not report.passed:
        raise VerificationError(str(report))
    return report
