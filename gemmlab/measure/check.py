"""verify(): a step against a float64 reference, structured inputs before random ones.

The tolerance is the classical bound on a sum of K products, |fl(sum) - sum| <= K u sum|a||b|
(u = unit roundoff of the accumulator), plus the output's rounding. Any summation order passes it;
a layout bug (wrong row, missing tile) misses it by orders of magnitude. Where float64 gives Inf or
NaN (the "inf" case: an Inf in A and a -Inf in B among small integers, zeros included), the step must
give the same; elsewhere NaN and Inf never pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import ShapeError, VerificationError
from ..runtime import operands
from ..runtime.kernel import Kernel, step as make_step, to_array
from ..runtime.bounds import UNIT_ROUNDOFF, compare, compare_abc, special_values  # noqa: F401 (check.X)
from ..runtime.operands import abc_inputs, gemm_inputs as make_inputs, tile_of  # noqa: F401 (check.X)
from ..runtime.registry import product64

MAX_LISTED = 8
# A case's sizes by name, from how many it has: (M, N, K) for C = A B, (M, K, L, N) for E = A B C (the steps' order)
_AXES = {3: "mnk", 4: "mkln"}


class Case:
    """One input of a check: its kind ("identity", "ones", "random", "nan", "inf") and its sizes in the step's order,
    Case("random", M, N, K) for C = A B or Case("random", M, K, L, N) for E = A B C; after the check, the worst
    |error| / bound over the output (< 1 passes) or the ShapeError text if the step refused the shape."""

    def __init__(self, kind: str, *dims: int, worst: float = 0.0, rejected: str = ""):
        self.kind, self.dims, self.worst, self.rejected = kind, tuple(int(d) for d in dims), worst, rejected

    def _size(self, axis: str) -> int:
        return self.dims[_AXES[len(self.dims)].index(axis)]

    m = property(lambda self: self._size("m"))
    n = property(lambda self: self._size("n"))
    k = property(lambda self: self._size("k"))
    l = property(lambda self: self._size("l"))  # noqa: E741 (the fused problem's L)

    def __eq__(self, other) -> bool:
        return isinstance(other, Case) and (self.kind, self.dims, self.worst, self.rejected) == (
            other.kind, other.dims, other.worst, other.rejected)

    def __repr__(self) -> str:
        return f"Case({self.kind!r}, {', '.join(map(str, self.dims))}, worst={self.worst:.3g})"


FusedCase = Case  # chapter 8's name (fusion.Case): a case with four sizes


@dataclass
class VerifyReport:
    """What a check found: the cases run, and the first that failed with its first mismatches."""
    name: str
    label: str
    cases: list[Case] = field(default_factory=list)
    mismatches: list[tuple[int, int, float, float]] = field(default_factory=list)
    failed_case: Case | None = None
    shape_text: Callable = lambda dims: "x".join(map(str, dims))  # the step's (StepSpec.shape_text)

    @property
    def passed(self) -> bool:
        return self.failed_case is None

    @property
    def failed(self) -> Case | None:
        return self.failed_case

    @property
    def rejected(self) -> list[str]:
        return [c.rejected for c in self.cases if c.rejected]

    def __str__(self) -> str:
        if not self.passed:
            c = self.failed_case
            listed = ", ".join(f"({r}, {col}, {g:.6g}, {w:.6g})" for r, col, g, w in self.mismatches)
            return (f"FAIL: {self.name} on the {c.kind} input {self.shape_text(c.dims)}: first mismatches "
                    f"(row, col, got, want): {listed}")
        ran = len({c.dims for c in self.cases if not c.rejected and c.kind not in ("inf", "nan")})  # "inf" reuses one
        text = f"PASS: {self.name} matches the float64 reference on {ran} shape{'' if ran == 1 else 's'}"
        if self.rejected:
            text += f"; it rejects {len(self.rejected)} shape(s) before launch"
        if any(c.kind == "nan" for c in self.cases):
            text += "; a NaN in A fills its row of E with NaN"
        return text

    def _repr_pretty_(self, p, cycle):  # IPython shows the sentence, not the dataclass
        p.text(str(self))


FusedReport = VerifyReport  # chapter 8's name (fusion.Report)


def default_cases(params: dict, multiple: int = 1) -> list[Case]:
    """A GEMM step's cases for `params` (operands.gemm_cases): identity and ones first, then random shapes off the
    tile grid. `multiple`: a step that needs N and K multiples of it (TMA: 8) gets them rounded up."""
    return [Case(kind, *dims) for kind, dims in operands.gemm_cases(params, multiple)]


def fused_cases(kern: Kernel | None = None) -> list[Case]:
    """A fused step's cases (the step's own, FusedStep.cases); with no kernel, those of a 16 x 16 tile."""
    if kern is None:
        return [Case(kind, *dims) for kind, dims in operands.abc_cases()]
    return cases_of(kern)


def cases_of(kernel: Kernel) -> list[Case]:
    """The cases verify runs on `kernel` by default: its step's (StepSpec.cases)."""
    return [Case(kind, *dims) for kind, dims in kernel.step.cases(kernel.params, kernel.backend)]


def run_on_inputs(kernel, m: int, n: int, k: int, kind: str = "random", seed: int = 0):
    """(kernel(A, B), A, B) on make_inputs(kind, m, n, k) in the kernel's dtype: one call, for a test or a reader."""
    a, b = make_inputs(kind, m, n, k, kernel.dtype, seed)
    return kernel(a, b), a, b


def reference_abc(a, b, c) -> np.ndarray:
    """E = A B C in float64."""
    return product64(a, b, c)


def verify(kernel: Kernel | str, cases: list[Case] | None = None, raise_on_fail: bool = True,
           **params) -> VerifyReport:
    """Check a step, GEMM or fused, on several shapes against float64; raise VerificationError listing mismatches.
    The step gives its cases (StepSpec.cases), draws their operands (make_inputs) and bounds the error (compare);
    a case whose shape the step refuses before launch is listed as rejected."""
    if isinstance(kernel, str):
        kernel = make_step(kernel, **params)
    step = kernel.step
    report = VerifyReport(kernel.name, kernel.label, shape_text=step.shape_text)
    for case in cases or cases_of(kernel):
        inputs = step.make_inputs(case.kind, case.dims)
        try:
            got = np.asarray(to_array(np, kernel(*inputs)))
        except ShapeError as e:
            case.rejected = str(e)
            report.cases.append(case)
            continue
        bad, ratio = step.compare(got, *inputs)
        case.worst = float(ratio.max()) if ratio.size else 0.0
        report.cases.append(case)
        if bad.any():
            want = step.reference(*inputs)
            rows, cols = np.nonzero(bad)
            report.mismatches = [(int(r), int(c), float(got[r, c]), float(want[r, c]))
                                 for r, c in zip(rows[:MAX_LISTED], cols[:MAX_LISTED])]
            report.failed_case = case
            break
    if raise_on_fail and not report.passed:
        raise VerificationError(str(report))
    return report


check_fused = verify  # chapter 8's name (fusion.check): the one check
