"""Exercises the reader solves and the course checks: one per core chapter, each a variation of a real step, with a gap.

An exercise is a step's `.cu` (`kernels/exercises/chN_<idea>.cu`), changed into a variation the chapter taught but
did not show (its own listing pasted in fails), in which the lines of one idea are cut
out between `// ---- EXERCISE: ... ----` and `// ---- END ----`. The reader writes those lines; `check()`
splices them into the template, runs the kernel against float64 on several shapes (non-multiples of the
tile among them) on the GPU or in the CPU emulator, then checks the property the chapter is about
(sectors per request, barriers, registers and spills, wavefronts, the order of loads and FMAs, lane
addresses, traffic of the fused kernel) and, on a GPU, the speed against the chapter's own step.
The verdict says what passed and what failed, with a hint in the chapter's terms; it never raises for a
wrong answer, so a notebook cell shows it as output. Solutions sit apart, in `kernels/exercises/solutions/`.

    from gemmlab import exercises
    exercises.show("ch2/coalesced_index")              # the template, the gap marked
    exercises.check("ch2/coalesced_index", r'''
        const int col = ...;
        const int row = ...;
    ''')                                               # the gap's code only, or a whole file
"""
from __future__ import annotations

import functools

import ast
import html
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import BackendError, ConfigError, GemmlabError
from ..measure import hardware
from ..measure.check import Case, verify
from ..runtime import cpu, nvrtc, registry
from ..runtime.kernel import Kernel, backend as pick_backend, instance, step
from ..runtime.registry import Launch, Param, cdiv
from ..runtime.source import KERNELS
from ..measure import fusion
from .show import Listing, highlighted_lines
from ..measure.fusion import check as fcheck
from ..runtime.kernel import Instance
from . import swizzle as sw_model

EXERCISES_DIR = KERNELS / "exercises"
SOLUTIONS_DIR = EXERCISES_DIR / "solutions"
_START = re.compile(r"^([ \t]*)(?://|#) ---- EXERCISE: (.*?) ----[ \t]*$", re.M)  # `#`: a Python exercise
_END = re.compile(r"^[ \t]*(?://|#) ---- END ----[ \t]*$", re.M)


# ------------------------------------------------------------------------------------------------
# The verdict
# ------------------------------------------------------------------------------------------------
@dataclass
class Item:
    """One line of a verdict: what was checked, whether it passed (None: not checked here), why, a hint."""

    label: str
    passed: bool | None
    detail: str
    hint: str = ""
    note: bool = False  # an explanation of a failure above it, not a check of its own

    @property
    def mark(self) -> str:
        return "note" if self.note else {True: "PASS", False: "FAIL", None: "skip"}[self.passed]


_COLORS = {True: "#1a7f37", False: "#cf222e", None: "#6e7781"}


@dataclass
class Verdict:
    """What `check()` found: `passed` is True only if every checked item passed. Prints as plain text;
    shows as a small table in Jupyter."""

    exercise: str
    what: str  # "your code", "the solution", a file's name
    backend: str
    items: list[Item] = field(default_factory=lambda: [])

    def __post_init__(self):
        _remember(self)  # the verdict `hint()` reads its first stage from (the items are filled in later)

    @property
    def passed(self) -> bool:
        """Every item checked passed and none could not be checked (a GPU-only speed item aside)."""
        return bool(self.items) and all(i.passed is not False for i in self.items) and not self.unchecked

    @property
    def unchecked(self) -> list[Item]:
        """Properties this machine could not measure (no NVRTC, say): the verdict is partial, not a pass."""
        return [i for i in self.items if i.passed is None and not i.note and i.label != "speed"]

    def _head(self) -> str:
        if self.passed or self.failures or not self.unchecked:
            return "PASS" if self.passed else "FAIL"
        return f"PARTIAL (not checked: {', '.join(i.label for i in self.unchecked)}; the rest passed)"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failures(self) -> list[Item]:
        return [i for i in self.items if i.passed is False]

    def _where(self) -> str:
        return {"gpu": "GPU", "python": "Python"}.get(self.backend, "CPU emulator")

    def __str__(self) -> str:
        lines = [f"{self.exercise} ({self.what}, {self._where()}): {self._head()}"]
        for i in self.items:
            lines.append(f"  {i.mark:4s}  {i.label}: {i.detail}")
        lines += textwrap.wrap(self.next_step(), width=100, initial_indent="  ", subsequent_indent="    ")
        return "\n".join(lines)

    def next_step(self) -> str:
        """The verdict's last line: on a pass, how long it should have taken and what to do next; on a failure,
        how to ask for the first hint (the hints come in stages: `hint()`)."""
        try:
            ex = get(self.exercise)
        except ConfigError:
            return ""
        if self.passed:
            return f"done (it should take about {ex.minutes} min). Next: {ex.after}"
        n = len(hint_stages(ex.name, self))
        return (f"stuck? exercises.hint({ex.name!r}) (or `python -m gemmlab exercise check {ex.name} --hint`) gives "
                f"hint 1 of {n}; asking again gives the next (about {ex.minutes} min in all)")

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):  # IPython's plain text: the sentences, not the dataclass
        p.text(str(self))

    def _repr_html_(self) -> str:
        head_color = _COLORS[None if self.unchecked and not self.failures else self.passed]
        rows = []
        for i in self.items:
            hint = ""
            rows.append(f'<tr><td style="color:{_COLORS[i.passed]};font-weight:bold;vertical-align:top;'
                        f'padding:2px 8px 2px 0;text-align:left">{i.mark}</td><td style="text-align:left;'
                        f'padding:2px 0"><b>{html.escape(i.label)}</b>: {html.escape(i.detail)}{hint}</td></tr>')
        return (f'<div class="gemmlab-verdict" style="font-family:sans-serif;font-size:13px;margin:4px 0">'
                f'<p style="margin:0 0 4px 0"><b>{html.escape(self.exercise)}</b> ({html.escape(self.what)}, '
                f'{self._where()}): <b style="color:{head_color}">{html.escape(self._head())}</b></p>'
                f'<table style="border-collapse:collapse">{"".join(rows)}</table>'
                f'<p style="margin:4px 0 0 0;color:#444">{html.escape(self.next_step())}</p></div>')


# ------------------------------------------------------------------------------------------------
# The exercises
# ------------------------------------------------------------------------------------------------
@dataclass
class Context:
    """What a property check gets: the exercise, the source checked, the backend and the compiled kernel."""

    exercise: "Exercise"
    source: str
    backend: str
    kernel: object
    report: object = None  # the correctness report (check.VerifyReport or fusion.Report)

    def cpu_kernel(self, source: str | None = None):
        """The same source (or `source`) compiled for the emulator: counters run there, GPU or not."""
        return build(self.exercise, "cpu", self.source if source is None else source)


@dataclass(frozen=True)
class Exercise:
    name: str  # "chN/<idea>"
    chapter: int
    step: str  # the step the template is cut from, e.g. "sgemm/02_coalesced"
    summary: str
    prop: Callable[[Context], list[Item]] = field(repr=False, compare=False)
    diagnose: Callable[[Context], list[Item]] | None = field(default=None, repr=False, compare=False)
    minutes: int = 20  # how long it should take a reader who has read the chapter
    after: str = "the next section of the chapter."  # what to do after a pass: the next section, a harder variant
    hints: tuple[str, ...] = ()  # the stages after the check's own diagnosis, each a step closer to the answer
    variation: bool = False  # True: it asks for something the chapter did not show (its listing pasted fails)
    python: bool = False  # a Python exercise (kernels/exercises/chN_<idea>.py): no kernel, a function is checked
    # A variation's own step: the base step's registry entry with these fields replaced (params, geometry, ...);
    # its kernel file is the template, its reference kernel the solution. None: the step `step` itself.
    variant: dict | None = field(default=None, repr=False, compare=False)
    aliases: tuple[str, ...] = ()  # earlier names that still find it

    @property
    def stem(self) -> str:
        return self.name.replace("/", "_")

    @property
    def file(self) -> Path:
        return EXERCISES_DIR / f"{self.stem}.{'py' if self.python else 'cu'}"

    @property
    def solution_file(self) -> Path:
        return SOLUTIONS_DIR / f"{self.stem}.{'py' if self.python else 'cu'}"

    @property
    def fused(self) -> bool:
        return self.step.startswith("fused/")

    def __str__(self) -> str:
        return f"{self.name:24s} ch{self.chapter_id:3s} ~{self.minutes:2d} min  {self.summary}"

    @property
    def chapter_id(self) -> str:
        """The chapter as the book numbers it: "1", "7c" (from the name's prefix)."""
        return self.name.split("/")[0].removeprefix("ch")



# --- shared helpers for the property checks -----------------------------------------------------
def _per_request(counters, space: str, kind: str, array: str) -> float | None:
    try:
        return (counters.global_sectors_per_request if space == "global" else
                counters.shared_wavefronts_per_request)(kind=kind, array=array)
    except KeyError:
        return None


def _gemm_counters(kern, size=(256, 256, 256), blocks: int = 4):
    return kern.counters(*size, max_blocks=blocks)


def _reference_kernel(ex: Exercise):
    """The chapter's own step (a variation: the course's solution), compiled for the emulator (for the numbers a
    hint quotes)."""
    return build(ex, "cpu")


def step_spec(ex: Exercise):
    """The registry entry the exercise's kernel runs as: its step's, or for a variation that entry with the
    variation's parameters, launch geometry and file (the template)."""
    base = registry.lookup(ex.step)
    if not ex.variant:
        return base
    return replace(base, name=f"exercises/{ex.stem}", path=str(ex.file.relative_to(KERNELS.parent)), **ex.variant)


def build(ex: Exercise, backend: str, source: str | None = None, **params):
    """The exercise's kernel from `source` (None: the chapter's step, or a variation's solution) for `backend`."""
    if ex.fused:
        if source is None and ex.variation:
            source = splice(ex.name, solution(ex.name))
        return fusion.step(ex.step, backend=backend, source=source, **params)
    if not ex.variant:
        return step(ex.step, backend=backend, source=source, **params)
    text = splice(ex.name, solution(ex.name)) if source is None else source
    return Kernel(step_spec(ex), params, backend, text)


def _at_most(label: str, got: float, want: float, detail: str, hint: str, slack: float = 1.05) -> Item:
    """An item that passes when `got` (the reader's count) is within `slack` of `want` (the step's)."""
    return Item(label, True, detail) if got <= want * slack else Item(label, False, detail, hint)


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.1f}"


# --- ch2: coalescing ------------------------------------------------------------------------------
_CH2_WHY = {
    "A": "consecutive threads of a warp (threadIdx.x) read A[row * K + k] of consecutive rows, K floats "
         "apart, one 32-byte sector each",
    "B": "consecutive threads of a warp do not read consecutive floats of a row of B",
    "C": "consecutive threads of a warp write elements of C that are not side by side in a row",
}


def _ch2_diagnose(ctx: Context) -> list[Item]:
    """chapter 2's 2D mapping in a 1D block: say what differs."""
    region = gap_of(ctx.source)[1] if _START.search(ctx.source) else ctx.source
    if "threadIdx.y" in re.sub(r"//[^\n]*", "", region):
        return [Item("diagnosis", None, "the gap uses threadIdx.y, which is 0 in every thread here (the block is "
                     "one-dimensional: blockDim = (BLOCK_X * BLOCK_Y, 1)); threadIdx.x runs to BLOCK_X * BLOCK_Y - 1, "
                     "so the 2D mapping of chapter 2 computes one row of the tile and columns of other blocks' tiles",
                     "split the flat index threadIdx.x into a row and a column of the BLOCK_Y x BLOCK_X tile (/ and %)",
                     note=True)]
    return [Item("diagnosis", None, "some elements of C are computed twice and others never",
                 "row and column must take every pair in the BLOCK_Y x BLOCK_X tile exactly once as threadIdx.x runs "
                 "from 0 to BLOCK_X * BLOCK_Y - 1", note=True)]


def _geometry_1d(m, n, k, p):
    return Launch((cdiv(n, p["BLOCK_X"]), cdiv(m, p["BLOCK_Y"]), 1), (p["BLOCK_X"] * p["BLOCK_Y"], 1, 1))


def _variant_params(**params):
    return {name: Param(default, choices) for name, (default, choices) in params.items()}


def _ch2_property(ctx: Context) -> list[Item]:
    mine = _gemm_counters(ctx.cpu_kernel())
    ref = _gemm_counters(_reference_kernel(ctx.exercise))
    got = {"A": _per_request(mine, "global", "load", "A"), "B": _per_request(mine, "global", "load", "B"),
           "C": _per_request(mine, "global", "store", "C")}
    want = {"A": _per_request(ref, "global", "load", "A"), "B": _per_request(ref, "global", "load", "B"),
            "C": _per_request(ref, "global", "store", "C")}
    detail = (f"sectors per request: A loads {_fmt(got['A'])}, B loads {_fmt(got['B'])}, C stores {_fmt(got['C'])} "
              f"(the coalesced mapping: {_fmt(want['A'])}, {_fmt(want['B'])}, {_fmt(want['C'])}; 256^3, 4 blocks)")
    bad = [x for x in "ABC" if got[x] is not None and want[x] is not None and got[x] > max(want[x], 4.0) + 0.01]
    if not bad:
        return [Item("coalesced", True, detail)]
    worst = max(bad, key=lambda x: got[x])
    verb = "stores" if worst == "C" else "loads"
    hint = (f"{worst}'s {verb} take {got[worst]:.0f} sectors per request, the coalesced mapping's "
            f"{want[worst]:.0f}: {_CH2_WHY[worst]}. Consecutive threadIdx.x (one warp) must give consecutive columns "
            "of one row of C: then a warp shares one A element (a broadcast) and reads 32 consecutive floats of B, "
            "4 sectors.")
    return [Item("coalesced", False, detail, hint)]


# --- ch3: the tile loads and the two barriers ---------------------------------------------------------
def _barriers_per_tile(kern, m=64, n=64, k=64) -> float:
    counters = kern.counters(m, n, k, max_blocks=None)
    tiles = -(-k // kern.params.get("BLOCK_K", kern.params["BLOCK"]))
    return counters.barriers / (counters.blocks * tiles), counters


def _ch3_property(ctx: Context) -> list[Item]:
    kern = ctx.cpu_kernel()
    per_tile, counters = _barriers_per_tile(kern)
    items = []
    detail = f"{per_tile:g} __syncthreads() per K tile (the step: 2, one after the stores, one after the reads)"
    if per_tile == 2:
        items.append(Item("barriers", True, detail))
    elif per_tile < 2:
        items.append(Item("barriers", False, detail, "fewer than two barriers per tile can be right only by luck: "
                          "on a GPU the warps run in any order. The emulator runs each thread until it reaches a "
                          "barrier, so it shows the race as a wrong result; a GPU may not, until it does."))
    else:
        items.append(Item("barriers", False, detail, f"{per_tile:g} barriers per tile where two do: each one "
                          "stops every warp of the block. One after the stores (no thread reads the tile before "
                          "it is complete), one after the compute loop (no thread overwrites it while others "
                          "still read it)."))
    ref = _gemm_counters(_reference_kernel(ctx.exercise))
    for x in "AB":
        got, want = _per_request(counters, "global", "load", x), _per_request(ref, "global", "load", x)
        if got is not None and want is not None and got > want + 0.01:
            items.append(Item("coalesced", False, f"{x}'s tile loads take {got:.1f} sectors per request (the step: "
                              f"{want:.1f})", f"thread (tx, ty) should copy {x}'s element in column "
                              f"{'k0 + tx' if x == 'A' else 'col = blockIdx.x * BLOCK + tx'}: consecutive tx, "
                              "consecutive floats of a row, as chapter 2 taught."))
    return items


def _ch3_rect_property(ctx: Context) -> list[Item]:
    """The barriers and loads at the default BLOCK_K (8, shallower than the block), then BLOCK_K = 64 (deeper)."""
    items = _ch3_property(ctx)
    try:
        deep = build(ctx.exercise, "cpu", ctx.source, BLOCK_K=64)
        report = verify(deep, raise_on_fail=False)
    except GemmlabError as e:
        return items + [Item("BLOCK_K = 64", False, f"does not run: {e}")]
    if report.passed:
        return items + [Item("BLOCK_K = 64", True, "right with a tile deeper than the block too (each thread copies "
                             "two elements of each tile)")]
    return items + [Item("BLOCK_K = 64", False, "wrong with BLOCK = 32, BLOCK_K = 64: "
                         + str(report).removeprefix("FAIL: ").split("\n")[0],
                         "with BLOCK_K > BLOCK a thread copies more than one element of each tile: the elements of "
                         "its row of sA (column of sB) that lie BLOCK apart")]


def _ch3_rect_diagnose(ctx: Context) -> list[Item]:
    """The square tile's code in a rectangular tile: name what differs, then the barrier diagnosis."""
    region = gap_of(ctx.source)[1] if _START.search(ctx.source) else ctx.source
    code = re.sub(r"//[^\n]*", "", region)
    bk, blk = ctx.kernel.params["BLOCK_K"], ctx.kernel.params["BLOCK"]
    found = []
    if re.search(r"\bk\s*<\s*BLOCK\s*;", code):
        found.append(f"the compute loop runs k up to BLOCK ({blk}), but a tile is BLOCK_K ({bk}) deep: sA[ty][k] "
                     f"and sB[k][tx] past column/row {bk - 1} lie outside the tiles")
    if re.search(r"sA\s*\[\s*ty\s*\]\s*\[\s*tx\s*\]", code) or re.search(r"sB\s*\[\s*ty\s*\]\s*\[\s*tx\s*\]",
                                                                             code):
        found.append(f"thread (tx, ty) stores sA[ty][tx] or sB[ty][tx], the square tile's one element each: here sA "
                     f"has BLOCK_K = {bk} columns and sB {bk} rows, while tx and ty run to {blk - 1}")
    if re.search(r"\bk0\s*\+\s*t[xy]\b", code) and "kk" not in code and "BLOCK_K" not in code:
        found.append("the loads name no BLOCK_K: a tile of A is BLOCK x BLOCK_K here, not BLOCK x BLOCK")
    if found:
        return [Item("diagnosis", None, "this is the square tile's code (chapter 3's listing): " + "; ".join(found),
                     "work out, for BLOCK_K < BLOCK and for BLOCK_K > BLOCK, which elements of sA and sB each thread "
                     "copies, and keep every __syncthreads() where all threads of the block reach it", note=True)]
    return _ch3_diagnose(ctx)


def _ch3_diagnose(ctx: Context) -> list[Item]:
    """Why the result is wrong: a single K tile against several, and the barriers counted."""
    kern = ctx.cpu_kernel()
    block = kern.params.get("BLOCK_K", kern.params["BLOCK"])  # the tile's depth along K
    try:
        one = verify(kern, cases=[Case("random", block + 7, block + 9, block - 5)], raise_on_fail=False).passed
        several = verify(kern, cases=[Case("random", block + 7, block + 9, 3 * block + 5)], raise_on_fail=False).passed
        per_tile, _ = _barriers_per_tile(kern)
    except GemmlabError as e:
        return [Item("diagnosis", False, f"the kernel fails to run: {e}")]
    detail = (f"K within one tile ({block - 5}): {'right' if one else 'wrong'}; K over four tiles ({3 * block + 5}): "
              f"{'right' if several else 'wrong'}; {per_tile:g} __syncthreads() per K tile")
    if one and not several:
        hint = ("right with one tile, wrong with several: a thread went on to the next tile and overwrote sA/sB while "
                "other threads were still reading the current one. Put a __syncthreads() after the compute loop "
                "(barrier 2). The emulator runs each thread until it reaches a barrier, so a missing barrier shows as "
                "a wrong result every time.")
    elif per_tile < 1:
        hint = ("no barrier in the loop: a thread reads sA/sB before the other threads have written their elements. "
                "Put a __syncthreads() between the stores and the compute loop (barrier 1), and one after the "
                "compute loop (barrier 2).")
    elif per_tile < 2:
        hint = ("wrong already with one K tile: a thread reads the tile before every thread has stored its element. "
                "Put a __syncthreads() between the stores and the compute loop (barrier 1); keep one after the "
                "compute loop (barrier 2).")
    else:
        hint = ("the barriers are there, so look at the loads: thread (tx, ty) stores A[row][k0 + tx] in sA[ty][tx] "
                "and B[k0 + ty][col] in sB[ty][tx], and 0 where the row or column lies outside A or B (the identity "
                "input shows which rows or columns went wrong).")
    return [Item("diagnosis", None, detail, hint, note=True)]


# --- ch4: registers ---------------------------------------------------------------------------------
_ARCHS = ("sm_75", "sm_90")


def _instance(ex: Exercise, source: str | None = None):
    """The exercise's kernel for compile-only analysis (registers, SASS): `source`, or the chapter's step (a
    variation: the course's solution), at the variation's parameters."""
    if not ex.variant:
        return instance(ex.step, source=source)
    return Instance(step_spec(ex), {}, splice(ex.name, solution(ex.name)) if source is None else source)


def _ch4_property(ctx: Context) -> list[Item]:
    items = []
    ex = ctx.exercise
    if not nvrtc.available():
        items.append(Item("registers", None, "NVRTC is not installed here: pip install nvidia-cuda-nvrtc "
                          "(gemmlab[analysis]) to count registers and spills without a GPU"))
    else:
        mine_text, ref_text = [], []
        worse = []
        for arch in _ARCHS:
            mine = _instance(ex, ctx.source).resources(arch)
            ref = _instance(ex).resources(arch)
            mine_text.append(f"{arch}: {mine.registers} registers, {mine.local_bytes} B stack, spills "
                             f"{mine.spill_stores}/{mine.spill_loads} B")
            ref_text.append(f"{ref.registers}, {ref.local_bytes} B, {ref.spill_stores}/{ref.spill_loads} B")
            if mine.local_bytes > ref.local_bytes or mine.spills > ref.spills:
                worse.append(arch)
        detail = "; ".join(mine_text) + f" (the solution: {'; '.join(ref_text)})"
        if worse:
            items.append(Item("registers", False, detail,
                              f"on {', '.join(worse)} part of a[], b[] or acc[][] lives in local memory (stack, "
                              "spills): an array stays in registers only if every index is known at compile time. "
                              "Unroll every loop over m, n and j with #pragma unroll and index with the loop "
                              "counters."))
        else:
            items.append(Item("registers", True, detail))
    p = ctx.kernel.params
    tm, tn = p["THREAD_M"], p["THREAD_N"]
    mine_c = _gemm_counters(ctx.cpu_kernel(), (128, 128, 64), 1)
    ref_c = _gemm_counters(_reference_kernel(ex), (128, 128, 64), 1)
    got = mine_c.totals.get("shared_load_requests", 0)
    want = ref_c.totals.get("shared_load_requests", 0)
    warps, steps = _threads_2d_of(p) // 32, 64
    per_k = got / (warps * steps)
    detail = (f"{per_k:g} shared loads per thread per k step, {got} for one 128x128x64 block (this {tm} x {tn} "
              f"block with b[] as float4s: {want / (warps * steps):g} = {tm} + {tn} / 4; {tm * tn} FMAs per k step "
              "either way)")
    if got <= want * 1.05:
        items.append(Item("shared loads", True, detail))
    elif round(per_k) == tm + tn:
        items.append(Item("shared loads", False, detail + f": your gap reads b[] one float at a time, as the "
                          f"chapter's 8 x 8 loop does; this exercise asks for a {tm} x {tn} block whose sB sliver is "
                          f"{tn // 4} float4 loads",
                          f"{tm} + {tn} = {tm + tn} loads a k step, where the chapter's 8 x 8 block paid 8 + 8 = 16 "
                          f"for the same {tm * tn} FMAs: a long thin block costs more loads unless its long sliver "
                          f"is read 16 bytes at a time. Which of a[] and b[] is contiguous in shared memory?"))
    else:
        items.append(Item("shared loads", False, detail,
                          f"each k step should read the {tm} values of sA's column k and the {tn} of sB's row k once, "
                          f"b[] as {tn // 4} float4s, then do {tm} x {tn} FMAs from registers; reading sA or sB "
                          "inside the m/n loop pays a shared load per FMA."))
    return items


def _threads_2d_of(p: dict) -> int:
    return (p["BLOCK_M"] // p["THREAD_M"]) * (p["BLOCK_N"] // p["THREAD_N"])


# --- ch5: the swizzle ---------------------------------------------------------------------------------
def _ch5_property(ctx: Context) -> list[Item]:
    size = (256, 256, 96)
    mine = _gemm_counters(ctx.cpu_kernel(), size, 1)
    ref = _gemm_counters(_reference_kernel(ctx.exercise), size, 1)
    items = []
    params = ctx.kernel.params
    rows = {"sA": params["BLOCK_K"] * 2, "sB": params["BLOCK_N"] * 2}
    for arr in ("sA", "sB"):
        for kind, what in (("ldmatrix", "ldmatrix"), ("store", "16-byte stores")):
            got, want = _per_request(mine, "shared", kind, arr), _per_request(ref, "shared", kind, arr)
            if got is None or want is None:
                continue
            detail = f"{arr}'s {what} take {got:.1f} wavefronts per request (swizzled: {want:.1f})"
            if got <= want + 0.01:
                items.append(Item(f"bank conflicts ({arr} {kind})", True, detail))
                continue
            if kind == "ldmatrix":
                nway = got / want
                chunks = rows[arr] // 16
                repeat = 8 // np.gcd(chunks, 8)  # rows r and r + repeat start on the same 16-byte bank group
                hint = (f"{nway:.0f}-way conflicts: a row of {arr} is {rows[arr]} bytes ({chunks} chunks of 16 "
                        f"bytes), so without a swizzle rows r and r + {repeat} start on the same 16-byte group of the "
                        f"32 banks (128 bytes): the 8 rows of an 8x8 matrix fall on {repeat} group(s) where they need "
                        f"8. Which rows of those 8 must move, and by how many chunks, without leaving their row of "
                        f"{chunks} chunks?")
            else:
                hint = "the 16-byte stores conflict: 8 consecutive chunks of a row must stay on 8 different bank groups."
            items.append(Item(f"bank conflicts ({arr} {kind})", False, detail, hint))
    return items


def _ch5_diagnose(ctx: Context) -> list[Item]:
    code = _gap_code(ctx)
    chunks = ctx.kernel.params["BLOCK_K"] // 8
    if re.search(r"CHUNKS\s*<\s*8\s*\?\s*CHUNKS\s*:\s*8", code):
        return [Item("diagnosis", None, f"this is the chapter's swizzle (XOR = min(chunks per row, 8)), made for rows "
                     f"of a power-of-two width: here a row of sA has {chunks} chunks (BLOCK_K = "
                     f"{ctx.kernel.params['BLOCK_K']}, 96 bytes), so XOR = {min(chunks, 8)} and chunk c ^ (row % "
                     f"{min(chunks, 8)}) reaches chunks 6 and 7, outside the row: two elements land on one place",
                     f"an XOR with mask x keeps chunk c inside a row of {chunks} chunks only if it never flips a bit "
                     f"that can carry c past {chunks - 1}: which masks are safe for {chunks} chunks?", note=True)]
    return [Item("diagnosis", None, "the swizzle moved data to the wrong place (two elements on one place, or "
                 "outside the tile)",
                 "swizzle<WIDTH> must be a permutation inside each row that keeps the 8 halves of a chunk together: "
                 "row * WIDTH + (new chunk) * 8 + col % 8, the new chunk between 0 and WIDTH / 8 - 1 and different for "
                 f"different chunks of a row; sA's rows have {chunks} chunks here, sB's {ctx.kernel.params['BLOCK_N'] // 8}.",
                 note=True)]


# --- ch6: prefetch -----------------------------------------------------------------------------------
def _loop_order(inst, arch: str, two_slots: bool = False) -> tuple[bool, str]:
    """Whether, in the SASS of the K loop of `inst`, the global loads come before the FMAs and the shared stores
    after (two_slots: the stores go to the slot nobody reads, so only the loads' place is checked)."""
    loop = [op.split(".")[0] for op in nvrtc.split_at_loop(inst.sass(arch))["loop"]]
    runs: list[list] = []
    for op in loop:
        if op in ("LDG", "STS", "BAR", "FFMA", "LDS"):
            if runs and runs[-1][0] == op:
                runs[-1][1] += 1
            else:
                runs.append([op, 1])
    order = " ".join(f"{o}x{n}" for o, n in runs)
    short = re.sub(r"(?:(?:LDS|FFMA)x\d+ )+(?:LDS|FFMA)x\d+", "LDS/FFMA...", order)
    short = re.sub(r"(?:(?:LDS/FFMA\.\.\.|FFMAx\d+|STSx\d+) )+(?:LDS/FFMA\.\.\.|FFMAx\d+)", "LDS/FFMA/STS...",
                   short)  # stores to the other slot, scheduled among the FMAs
    if "LDG" not in loop or "FFMA" not in loop or "STS" not in loop:
        return False, short
    if two_slots:  # each stretch between barriers that has FMAs issues its loads first; its stores may mix in
        stretches = " ".join(loop).split("BAR")
        with_fma = [s.split() for s in stretches if "FFMA" in s.split()]
        ok = any("LDG" in s for s in with_fma) and all(s.index("LDG") < s.index("FFMA") for s in with_fma
                                                        if "LDG" in s)
        return ok, short
    first_ffma, last_ffma = loop.index("FFMA"), len(loop) - 1 - loop[::-1].index("FFMA")
    ok = loop.index("LDG") < first_ffma and len(loop) - 1 - loop[::-1].index("STS") > last_ffma
    return ok, short


def _tiles_and_barriers(kern, tiles: int = 6) -> tuple[float, float]:
    """K tiles loaded from global memory per K tile computed, and __syncthreads() per K tile in the loop (the
    one before it, after tile 0's store, left out): one 128 x 128 block over `tiles` K tiles."""
    p = kern.params
    c = kern.counters(128, 128, p["BLOCK_K"] * tiles, max_blocks=1)
    tile_bytes = 4 * p["BLOCK_K"] * (p["BLOCK_M"] + p["BLOCK_N"])
    loaded = c.totals.get("global_load_bytes", 0) / c.blocks / tile_bytes
    return loaded / tiles, (c.barriers / c.blocks - 1) / tiles


def _ch6_property(ctx: Context) -> list[Item]:
    ex = ctx.exercise
    items = []
    if not nvrtc.available():
        items.append(Item("prefetch", None, "NVRTC is not installed here (pip install nvidia-cuda-nvrtc): the order "
                          "of loads and FMAs in the SASS is not checked"))
    else:
        ok, order = _loop_order(_instance(ex, ctx.source), "sm_75", two_slots=True)
        detail = f"the K loop's SASS on sm_75: {order}"
        ref_ok = ok or _loop_order(_instance(ex), "sm_75", two_slots=True)[0]
        if ok:
            items.append(Item("prefetch", True, detail + " (each tile's global loads issued before its FMAs)"))
        elif not ref_ok:  # this NVRTC schedules even the course's solution otherwise: the order cannot be judged
            items.append(Item("prefetch", None, f"{detail}: NVRTC {nvrtc.version()} here schedules the course's own "
                              f"solution that way too, so the order is not checked (the course pins NVRTC "
                              f"{nvrtc.pinned_version()}: pip install -r requirements.txt)"))
        else:
            items.append(Item("prefetch", False, detail, "in the loop the LDGs come after the FMAs: the loads then "
                              "wait for global memory with nothing to hide behind. Which tile's loads can be issued "
                              "before this tile's FMAs, and into which registers?"))
        mine, ref = _instance(ex, ctx.source).resources("sm_75"), _instance(ex).resources("sm_75")
        detail = (f"sm_75: {mine.registers} registers, {mine.local_bytes} B stack, spills {mine.spill_stores}/"
                  f"{mine.spill_loads} B (the solution: {ref.registers}, {ref.local_bytes} B, {ref.spill_stores}/"
                  f"{ref.spill_loads} B)")
        if mine.local_bytes > ref.local_bytes or mine.spills > ref.spills:
            items.append(Item("registers", False, detail, "r0 and r1 (or acc) live in local memory: a set of "
                              "registers picked at run time (by t % 2, a reference or pointer that depends on t) "
                              "cannot stay in registers. Make the choice at compile time."))
        else:
            items.append(Item("registers", True, detail))
    loaded, per_tile = _tiles_and_barriers(ctx.cpu_kernel())
    want_loaded, want_barriers = _tiles_and_barriers(_reference_kernel(ex))
    detail = (f"{per_tile:g} __syncthreads() and {loaded:.3g} tile loads from global memory per K tile (6 K tiles "
              f"of one block; two tiles ahead: {want_barriers:g} and {want_loaded:g})")
    if per_tile <= want_barriers + 1e-9 and loaded <= want_loaded + 1e-9:
        items.append(Item("two tiles ahead", True, detail))
        return items
    found = []
    if loaded > want_loaded + 1e-9:
        found.append(f"{(loaded - want_loaded) * 6:.0f} of the 6 tiles were loaded twice: tile 1, waiting in r1 since "
                     "before the loop, is loaded again, so the loop keeps only one tile ahead")
    if per_tile > want_barriers + 1e-9:
        found.append(f"{per_tile:g} barriers per K tile, as the chapter's one-buffer loop (08) has: with two slots "
                     "one is enough")
    items.append(Item("two tiles ahead", False, detail + ": " + "; ".join(found),
                      "with two slots, the store of tile t + 1 goes to the slot nobody reads during tile t, so no "
                      "barrier is needed before it; and with two sets of registers, the loads of tile t + 2 can start "
                      "while tile t + 1 still waits in the other set. Draw the three tiles t, t + 1, t + 2: where is "
                      "each during the FMAs of tile t?"))
    return items


def _ch6_diagnose(ctx: Context) -> list[Item]:
    """A wrong result with the helpers of two tiles ahead: the usual slips."""
    code = _gap_code(ctx)
    found = []
    if re.search(r"load_tiles\s*\(\s*r\w*\s*,\s*\(?\s*t\s*\+\s*1\b", code):
        found.append("a load of tile t + 1: before the loop tile 1 already waits in r1, so the loop loads t + 2")
    if re.search(r"compute_tile\s*\(\s*t\s*%\s*2\s*\)", code) or "? r0 : r1" in code.replace(" ", " "):
        found.append("a slot or register set picked at run time (t % 2)")
    detail = "; ".join(found) if found else ("a tile was computed from a slot before its store, or a set of registers "
                                              "overwritten before it was stored")
    return [Item("diagnosis", None, detail, "follow tiles 0, 1, 2 and 3 through the loop by hand: when is each loaded, "
                 "into which set, stored into which slot, and computed from it? A store into a slot must come after "
                 "the barrier that ends the last read of that slot, and before the barrier that precedes its read.",
                 note=True)]


# --- ch7: the ldmatrix address ------------------------------------------------------------------------
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub,
            ast.Mult, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift,
            ast.USub, ast.Invert)


def _c_int_expr(expr: str, lane: int) -> int | None:
    """A C integer expression of lane_id (no calls, no ?:) evaluated for one lane, or None if it is not one."""
    text = re.sub(r"(?<!/)/(?!/)", "//", expr.strip())
    if not re.fullmatch(r"[\w\s()+\-*/%&|^<>~]*", text):
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, _ALLOWED) for n in ast.walk(tree)):
        return None
    if any(isinstance(n, ast.Name) and n.id != "lane_id" for n in ast.walk(tree)):
        return None
    return _eval_int32(tree.body, lane)


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _eval_int32(node, lane: int) -> int | None:
    """`node` evaluated as C's 32-bit int arithmetic (wrapping; a shift by 32 or more, a division by 0: None),
    so no expression a reader writes can make Python build a huge number."""
    if isinstance(node, ast.Constant):
        return _wrap32(node.value) if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.Name):
        return lane
    if isinstance(node, ast.UnaryOp):
        v = _eval_int32(node.operand, lane)
        if v is None:
            return None
        return _wrap32(-v) if isinstance(node.op, ast.USub) else _wrap32(~v)
    if not isinstance(node, ast.BinOp):
        return None
    a, b = _eval_int32(node.left, lane), _eval_int32(node.right, lane)
    if a is None or b is None:
        return None
    op = node.op
    if isinstance(op, (ast.LShift, ast.RShift)):
        if not 0 <= b < 32:
            return None
        return _wrap32(a << b) if isinstance(op, ast.LShift) else a >> b
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
        return _wrap32(q) if isinstance(op, ast.FloorDiv) else _wrap32(a - q * b)
    ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.BitAnd: lambda: a & b,
           ast.BitOr: lambda: a | b, ast.BitXor: lambda: a ^ b}
    return _wrap32(ops[type(op)]()) if type(op) in ops else None


def _lane_table(source: str) -> tuple[list[tuple[int, int]] | None, str]:
    found = {}
    region = gap_of(source)[1] if _START.search(source) else source
    for var in ("lane_row", "lane_col"):
        m = re.search(rf"\b{var}\s*=\s*([^;]+);", region)
        if not m:
            return None, f"no `{var} = ...;` found"
        found[var] = m.group(1)
    table = []
    for lane in range(32):
        r, c = _c_int_expr(found["lane_row"], lane), _c_int_expr(found["lane_col"], lane)
        if r is None or c is None:
            return None, "the expressions use more than lane_id and integer arithmetic"
        table.append((r, c))
    return table, ""


_A_WALK = [(lane % 16, lane // 16 * 8) for lane in range(32)]  # the chapter's: A's quarters (and B's with .trans)
_BT_WALK = [(lane // 16 * 8 + lane % 8, lane // 8 % 2 * 8) for lane in range(32)]  # B stored transposed, no .trans


def _ch7_lanes(ctx: Context) -> list[Item]:
    table, why = _lane_table(ctx.source)
    if table is None:
        return [Item("lane addresses", None, f"not evaluated ({why}); the result above is the check")]
    want = _BT_WALK
    quarters = ["n 0-7, k 0-7", "n 0-7, k 8-15", "n 8-15, k 0-7", "n 8-15, k 8-15"]
    for lane, (got, exp) in enumerate(zip(table, want)):
        if got != exp:
            i = lane // 8
            same = (" These are the chapter's addresses (A's walk: matrices 0..3 = top/bottom at k 0-7, then at "
                    "k 8-15), which read B's quarters in another order: matrix 1 would be n 8-15, k 0-7."
                    if table == _A_WALK else "")
            return [Item("lane addresses", False, f"lane {lane} points at row {got[0]}, column {got[1]} of the 16x16 "
                         f"piece of sB; it gives row {lane % 8} of matrix {i}, which must be the ({quarters[i]}) "
                         f"quarter: row {exp[0]}, column {exp[1]}.{same}",
                         "lanes 8i .. 8i + 7 give the 8 row addresses of matrix i, and matrix i lands in the i-th "
                         "register: rB[n][0], rB[n][1] (n 0-7, k 0-7 then k 8-15), rB[n + 1][0], rB[n + 1][1] "
                         "(n 8-15). Write down, for each matrix, its first row (n) and column (k) in the piece.")]
    return [Item("lane addresses", True, "all 32 lanes point at the rows and columns the four matrices need")]


def _ch7_property(ctx: Context) -> list[Item]:
    return _ch7_lanes(ctx)


# --- ch8: the fused kernel's second phase ------------------------------------------------------------
def _fused_counts(kern, dims=(16, 48, 80, 144), blocks: int = 2):
    m, k, l, n = dims
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, l), (l, n)))
    e = np.zeros((m, n), np.float32)
    cfg, args = kern.launch_args(a, b, c, e)
    return cpu.analyze(kern.module, cfg.grid, cfg.block, args, shared_mem=cfg.shared_bytes, max_blocks=blocks,
                       names=["M", "K", "L", "N", "A", "B", "C", "E"])


def _ch8_property(ctx: Context) -> list[Item]:
    mine, ref = _fused_counts(ctx.cpu_kernel()), _fused_counts(_reference_kernel(ctx.exercise))

    def c_bytes(cn):
        return sum(s.bytes for s in cn.select("global", "load", "C")) / cn.blocks

    stores = sorted({s.array for s in mine.select("global", "store")})
    got, want = c_bytes(mine), c_bytes(ref)
    items = []
    detail = f"each block reads {got:.0f} B of C (the solution: {want:.0f} B; M=16 K=48 L=80 N=144)"
    items.append(_at_most("C read once per block", got, want, detail,
                          "stage C's slice with stage_Y(C, L, N, l0, n0) into sY once for the whole block, then read "
                          "sY: every thread of the block uses every element of the slice, so reading C from global "
                          "memory in the FMA loop multiplies its traffic by the threads that share it."))
    if stores != ["E"]:
        items.append(Item("T stays on chip", False, f"global stores go to {stores or 'nothing'}",
                          "phase 2 writes only E; T lives in sT, in shared memory."))
    else:
        items.append(Item("T stays on chip", True, "the only global stores are to E"))

    def panel_loads(cn):  # sT is the kernel's dynamic shared memory, read in phase 2 only
        return sum(s.requests for s in cn.select("shared", "load", "dynamic")) / cn.blocks

    got, want = panel_loads(mine), panel_loads(ref)
    tm = ctx.kernel.params["THREAD_M"]
    detail = (f"{got:.0f} shared load requests of the panel per block (the M-major panel read in float2s: "
              f"{want:.0f}; THREAD_M = {tm})")
    items.append(_at_most("panel read in pairs", got, want, detail,
                          f"a thread reads its {tm} values of one column of T one float at a time; in the M-major "
                          "panel they sit side by side, so one 8-byte load (float2) takes two of them."))
    return items


def _ch8_diagnose(ctx: Context) -> list[Item]:
    """A wrong E: the row-major panel of step 02 read from the M-major one, or another slip."""
    code = re.sub(r"\s+", "", _gap_code(ctx))
    if "*LP+" in code or re.search(r"sT\[\(?thread_row\+m\)?\*", code):
        return [Item("diagnosis", None, "your a[m] reads sT[(thread_row + m) * LP + l], the row-major panel of step 02 "
                     "(chapter 8's phase 2); here phase 1 stores the panel M-major, T[panel_row + m][l] at "
                     "sT[l * PANEL_M + m], so those reads pick up other rows and columns of T",
                     "write down where phase 1 (above the gap) stores acc[m][n] of its tile, and read it back from "
                     "the same place", note=True)]
    return [Item("diagnosis", None, "E is wrong: check the index of sT, the slice of C staged for each (l0, n0), and "
                 "the barriers around sY",
                 "phase 1 (above the gap) shows where the panel lives: T[panel_row + m][l] is sT[l * PANEL_M + m]",
                 note=True)]


# --- ch1: the roofline, turned around (a Python exercise) -----------------------------------------------
_PRECISIONS = {"fp32": ("fp32_tflops", 4), "fp16": ("fp16_tensor_tflops", 2)}


def _ch1_cases():
    """(label, GpuSpec, precision): every GPU of the table in both precisions, and one that is in no table."""

    gpus = [*hardware.SPECS.values(),
            replace(hardware.SPECS["t4"], key="made-up", name="a GPU in no table (10 TFLOP/s fp32, 150 fp16, "
                    "700 GB/s)", fp32_tflops=10.0, fp16_tensor_tflops=150.0, dram_gbps=700.0)]
    return [(f"{g.name}, {p}", g, p) for g in gpus for p in _PRECISIONS]


def _ch1_intensity(n: float, size: int) -> float:
    return hardware.gemm_intensity(n, n, n, size)


def _ch1_want(gpu, precision: str) -> int:
    attr, size = _PRECISIONS[precision]
    balance = hardware.balance_point(getattr(gpu, attr), gpu.dram_gbps)
    n = max(1, int(1.5 * size * balance) - 2)
    while _ch1_intensity(n, size) < balance:
        n += 1
    return n


def _ch1_property(ctx: Context) -> list[Item]:
    fn = ctx.kernel.get("smallest_n")
    if not callable(fn):
        return [Item("smallest_n", False, "no function smallest_n(gpu, precision) defined",
                     "keep the line `def smallest_n(gpu, precision):` and return an integer")]
    wrong = []
    for label, gpu, precision in _ch1_cases():
        attr, size = _PRECISIONS[precision]
        balance = hardware.balance_point(getattr(gpu, attr), gpu.dram_gbps)
        want = _ch1_want(gpu, precision)
        try:
            got = fn(gpu, precision)
        except Exception as e:  # noqa: BLE001 (the reader's code: any error is a verdict)
            return [Item("smallest_n", False, f"{label}: smallest_n raised {type(e).__name__}: {e}",
                         "it gets a hardware.GpuSpec (gpu.fp32_tflops, gpu.fp16_tensor_tflops, gpu.dram_gbps) and "
                         "'fp32' or 'fp16'")]
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)):
            return [Item("smallest_n", False, f"{label}: smallest_n returned {got!r}, not a number",
                         "return N, an integer: the number of rows (and columns) of the square matrices")]
        if got == want and float(got).is_integer():
            continue
        if not float(got).is_integer():
            why = (f"smallest_n gives {got:.4g}, not an integer: N counts rows, so round"
                   + (" up (the intensity only reaches the balance point at the next integer)" if got < want else ""))
            if abs(got - balance) < 0.01 * balance:
                why = (f"smallest_n gives {got:.4g}, which is the balance point itself (FLOP per byte): the "
                       f"intensity N must reach, not N")
            wrong.append((label, why))
            continue
        got = int(got)
        if got < 1:
            why = f"smallest_n gives {got}: a GEMM has at least one row"
        elif got < want:
            why = (f"at N = {got} the intensity is {_ch1_intensity(got, size):.2f} FLOP/byte, below the balance "
                   f"point {balance:.2f}: that GEMM is still memory-bound")
        else:
            why = (f"at N = {got - 1} the intensity is already {_ch1_intensity(got - 1, size):.2f} FLOP/byte, at or "
                   f"above the balance point {balance:.2f}: a smaller N is compute-bound too")
        if got in (want * 2, want // 2, round(want * 2 / size), round(want * size / 2)):
            why += " (off by a factor of about 2: count the bytes of one element for this precision)"
        wrong.append((label, why))
    n = len(_ch1_cases())
    if not wrong:
        return [Item("smallest_n", True, f"right on all {n} cases (every GPU of hardware.SPECS in fp32 and fp16, "
                     "and a GPU in no table)")]
    first_label, first_why = wrong[0]
    return [Item("smallest_n", False, f"wrong on {len(wrong)} of {n} cases; first, {first_label}: {first_why}",
                 "an N^3 GEMM's intensity grows with N; the answer is where it first reaches the GPU's balance point "
                 "for that precision (its own peak, its own element size)")]


def _check_python(ex: Exercise, code: str | None, path: str | Path | None, solution_: bool) -> Verdict:
    """A Python exercise: run the reader's file (the template with their gap), then check its function."""
    text, what = _resolve_source(ex, code, path, solution_)
    verdict = Verdict(ex.name, what, "python")
    namespace: dict = {"__name__": f"gemmlab_exercise_{ex.stem}"}
    try:
        exec(compile(text, ex.file.name, "exec"), namespace)  # noqa: S102 (the reader's own code)
    except Exception as e:  # noqa: BLE001
        verdict.items.append(Item("runs", False, f"{type(e).__name__}: {e}",
                                  "fix the first error Python names"))
        return verdict
    verdict.items += _guard(ex.prop, Context(ex, text, "python", namespace))
    return verdict


# --- ch7c (Hopper): the consumer's (stage, phase) in the ring of hgemm/08 -------------------------------
def _gap_code(ctx: Context) -> str:
    """The reader's lines (the gap, or the whole file), comments removed."""
    region = gap_of(ctx.source)[1] if _START.search(ctx.source) else ctx.source
    return _without_comments(region)


def _ring_static(code: str) -> list[str]:
    """What the reader's lines do to s and phase, read from the text (for the diagnosis)."""
    found = []
    if re.search(r"\b(?:const\s+)?(?:int|unsigned)\s+s\s*=", code):
        found.append("the gap declares a new `s` (as step 08 does at the top of its loop): it lives until the end of "
                     "this iteration only, so the loop's own s, declared before the loop, never changes")
    elif not re.search(r"(?:\+\+\s*s\b|\bs\s*(?:\+\+|[-+*%^|&]?=(?!=)))", code):
        found.append("s never changes: every k tile waits on full[0] and reads stage 0")
    if not re.search(r"(?:\bphase\s*(?:\^|\+|-|\|)?=(?!=)|\+\+\s*phase|\bphase\s*\+\+)", code):
        found.append("phase never changes: from the second trip round the ring, mbarrier_wait(&full[s], 0) returns at "
                     "once (phase 0 of full[s] completed a trip ago) and the consumer reads stage s before TMA has "
                     "refilled it")
    return found


def _ring_trips(ctx: Context, stages: int) -> tuple[bool, str]:
    tiles = 2 * stages + 1
    try:
        kern = build(ctx.exercise, "cpu", ctx.source, NUM_STAGES=stages)
        ok = verify(kern, cases=[Case("random", 128, 128, 64 * tiles)], raise_on_fail=False).passed
        return ok, f"NUM_STAGES = {stages}, K = {64 * tiles} ({tiles} k tiles, two trips round the ring): " + \
            ("right" if ok else "wrong")
    except GemmlabError as e:
        return False, f"NUM_STAGES = {stages}, K = {64 * tiles}: did not finish ({str(e).splitlines()[0]})"


def _ring_property(ctx: Context) -> list[Item]:
    runs = [_ring_trips(ctx, stages) for stages in (3, 5)]
    detail = "; ".join(d for _, d in runs)
    if all(ok for ok, _ in runs):
        return [Item("trips round the ring", True, detail)]
    found = _ring_static(_gap_code(ctx))
    return [Item("trips round the ring", False, detail + (": " + "; ".join(found) if found else ""),
                 "right while t < NUM_STAGES, wrong after: the first trip round the ring waits for phase 0 of each "
                 "full[s]; the next trip must wait for the next phase, whose parity is the other one")]


def _ring_diagnose(ctx: Context) -> list[Item]:
    found = _ring_static(_gap_code(ctx))
    if not found:
        return [Item("diagnosis", None, "the consumer reads a stage other than the one the producer filled for this "
                     "k tile", "tile t lies in stage t % NUM_STAGES; s must follow it without any division", note=True)]
    return [Item("diagnosis", None, "; ".join(found),
                 "the producer puts k tile t into stage t % NUM_STAGES; the consumer must read the same stage, and wait "
                 "for the phase of full[s] that this trip round the ring completes", note=True)]


def frame(ctx: Context) -> list[Item]:
    """A variation's answer must be its template with the gap filled: a whole file that is not (the chapter's own
    step pasted in, say) fails here even when it computes the right C, since it skips what the variation asks."""
    ex = ctx.exercise
    if not ex.variation or ex.python:
        return []
    if not _START.search(ctx.source):
        return [Item("the exercise's template", False, "your file has no `---- EXERCISE` / `---- END` lines: it is not "
                     f"this exercise's template but another kernel (the chapter's step {ex.step}?), which does not do "
                     "what the variation asks", f"start from `python -m gemmlab exercise start {ex.name}` and change "
                     "only the gap, or pass only the gap's lines")]
    mine, tmpl = gap_of(ctx.source), gap_of(template(ex.name))
    for part, (a, b) in (("before", (mine[0], tmpl[0])), ("after", (mine[2], tmpl[2]))):
        a_lines, b_lines = a.split("\n"), b.split("\n")
        for i, (x, y) in enumerate(zip(a_lines, b_lines)):
            if x.strip() != y.strip() and not y.lstrip().startswith("//"):
                return [Item("the exercise's template", False, f"your file changes the template {part} the gap: "
                             f"{x.strip()!r} where the template has {y.strip()!r}",
                             "the check is about the gap: change only the lines between the EXERCISE and END markers")]
    return []  # only the gap differs: nothing to say


# ------------------------------------------------------------------------------------------------
# Exercises of chapters 5, 7b, 7d and 9 (issue 53): Python models of the idea, checked case by case
# ------------------------------------------------------------------------------------------------
def _py_fn(ctx: Context, name: str, signature: str) -> Callable | Item:
    """The reader's function `name` from the executed file, or a failed item saying it is missing."""
    fn = ctx.kernel.get(name)
    if callable(fn):
        return fn
    return Item(name, False, f"no function {name}{signature} defined", f"keep the line `def {name}{signature}:`")


def _py_call(fn, *args):
    """fn(*args), or (None, the error as a sentence): the reader's code may raise anything."""
    try:
        return fn(*args), ""
    except Exception as e:  # noqa: BLE001 (the reader's code: any error is a verdict)
        return None, f"{fn.__name__}{args} raised {type(e).__name__}: {e}"


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


# --- ch5: the transposed store of sA at a deeper tile (BLOCK_K = 16, 32) --------------------------------
_CH5_PARAMS = dict(BLOCK_M=128, BLOCK_N=128, WARP_M=64, WARP_N=32, THREAD_M=8, THREAD_N=8)  # sgemm/07's
_CH5_DEPTHS = (8, 16, 32)


def _ch5_chapter_offset(k: int, m: int, block_k: int) -> int:
    return k * 128 + (m ^ ((k & 4) << 2))  # the chapter's Swizzle<1,4,5> on sA[k][m]


def _ch5_requests(fn, block_k: int, access: str):
    """The model's requests of one K tile of step 07 at this BLOCK_K (swizzle.sgemm_requests), each address of
    sA[k][m] moved to the reader's offset."""
    reqs, size = sw_model.sgemm_requests("sgemm/07_warptiling", access, BLOCK_K=block_k, **_CH5_PARAMS)
    return [[4 * fn(*divmod(a // 4, 128), block_k) for a in r] for r in reqs], size


def _ch5_placement(fn, block_k: int) -> str:
    """'' if sa_offset places the BLOCK_K x 128 tile one to one, every float4 of a row whole and 16-byte aligned,
    within twice the tile's floats; else what is wrong, for the first element that shows it."""
    seen: dict[int, tuple[int, int]] = {}
    for k in range(block_k):
        for m in range(128):
            off, err = _py_call(fn, k, m, block_k)
            if err:
                return err
            if not _is_int(off):
                return f"sa_offset({k}, {m}, {block_k}) returned {off!r}, not an integer"
            if not 0 <= off < 2 * 128 * block_k:
                return (f"sa_offset({k}, {m}, {block_k}) = {off}: outside 0 .. {2 * 128 * block_k - 1} (twice the "
                        f"tile's {128 * block_k} floats, more shared memory than a pad or a swizzle needs)")
            if off in seen:
                k0, m0 = seen[off]
                return (f"sA[{k0}][{m0}] and sA[{k}][{m}] both land at offset {off} (BLOCK_K = {block_k}): one "
                        "overwrites the other")
            seen[off] = (k, m)
            if m % 4 and off != fn(k, m - m % 4, block_k) + m % 4:
                return (f"the float4 sA[{k}][{m - m % 4}..{m - m % 4 + 3}] is split (sa_offset gives "
                        f"{[fn(k, m - m % 4 + i, block_k) for i in range(4)]}): the compute loop reads it with one "
                        "16-byte load, so its 4 floats must stay side by side")
            if m % 4 == 0 and off % 4:
                return (f"sa_offset({k}, {m}, {block_k}) = {off}: a float4 read from there is not 16-byte aligned "
                        "(the first float of each aligned float4 must land on a multiple of 4: a pad of a multiple of 4 "
                        "floats, an XOR on bit 2 of m or above)")
    return ""


_PY_TO_C = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%", ast.BitXor: "^",
            ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>"}


def _py_expr_to_c(node, names: dict) -> str | None:
    """An integer expression of Python (names, int constants, + - * // % ^ & | << >>, unary -) as C, fully
    parenthesized; None for anything else (a call, a conditional, a float)."""
    if isinstance(node, ast.Constant) and _is_int(node.value) and abs(node.value) < 2**31:
        return str(node.value)
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _py_expr_to_c(node.operand, names)
        return None if inner is None else f"(-{inner})"
    if isinstance(node, ast.BinOp) and type(node.op) in _PY_TO_C:
        a, b = _py_expr_to_c(node.left, names), _py_expr_to_c(node.right, names)
        return None if a is None or b is None else f"({a} {_PY_TO_C[type(node.op)]} {b})"
    return None


def _ch5_c_offset(source: str) -> str | None:
    """The reader's sa_offset as C, if its body is one `return` of an integer expression of k, m and block_k."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "sa_offset" and len(fn.args.args) == 3:
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                k, m, bk = (a.arg for a in fn.args.args)
                return _py_expr_to_c(body[0].value, {k: "k", m: "m", bk: "BLOCK_K"})
    return None


def _ch5_step07_with(offset_c: str) -> str:
    """Step 07's kernel with sA flat (twice the tile, the most sa_offset may use) and every access of sA[k][m]
    through the reader's offset."""
    text = (KERNELS / "sgemm" / "07_warptiling.cu").read_text()
    edits = [("__shared__ __align__(16) float sA[BLOCK_K][BLOCK_M];",
              "__shared__ __align__(16) float sA[2 * BLOCK_K * BLOCK_M];"),
             ("&sA[k][thread_row + i * WARP_SUB_M]", "&sA[sa_offset_<BLOCK_K>(k, thread_row + i * WARP_SUB_M)]"),
             ("template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int THREAD_M, int THREAD_N>\n"
              "__global__",
              "template <int BLOCK_K>\n__device__ __forceinline__ int sa_offset_(int k, int m) { return "
              f"{offset_c}; }}\n\ntemplate <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, "
              "int THREAD_M, int THREAD_N>\n__global__")]
    edits += [(f"sA[c + {j}][r] =", f"sA[sa_offset_<BLOCK_K>(c + {j}, r)] =") for j in range(4)]
    for old, new in edits:
        if old not in text:
            raise ConfigError(f"step 07 no longer holds {old!r}: ch5/deep_tile_swizzle's emulator check needs "
                              "updating")
        text = text.replace(old, new)
    return text


def _ch5_emulated(ctx: Context, block_k: int = 16) -> Item:
    """The reader's sa_offset spliced into step 07 at BLOCK_K = 16, run in the emulator: C against float64, and
    the sA store's and load's wavefronts per request as the emulator counts them (analysis mode, one block)."""
    offset_c = _ch5_c_offset(ctx.source)
    label = f"emulator (step 07, BLOCK_K = {block_k})"
    if offset_c is None:
        return Item(label, None, "not run: sa_offset is not one `return` of an integer expression of k, m and "
                    "block_k, so it cannot be spliced into the kernel; the model above is the check", note=True)
    try:
        kern = step("sgemm/07_warptiling", backend="cpu", source=_ch5_step07_with(offset_c), BLOCK_K=block_k)
        report = verify(kern, raise_on_fail=False)
        counters = kern.counters(256, 256, 64, max_blocks=1)
    except GemmlabError as e:
        return Item(label, False, f"your sa_offset in step 07 does not run: {str(e).splitlines()[0]}")
    store = counters.shared_wavefronts_per_request("store", array="sA")
    load = counters.shared_wavefronts_per_request("load", array="sA")
    detail = (f"sa_offset spliced into the kernel: C {'right' if report.passed else 'wrong'} against float64 "
              f"on {len(report.cases)} shapes; sA stores {store:g}, sA float4 loads {load:g} wavefronts per "
              "request (256 x 256 x 64, one block)")
    if not report.passed:
        return Item(label, False, detail + ": " + str(report).removeprefix("FAIL: ").split("\n")[0])
    return Item(label, store <= 1.0 + 1e-9 and load <= 4.0 + 1e-9, detail)


def _ch5_deep_property(ctx: Context) -> list[Item]:
    fn = _py_fn(ctx, "sa_offset", "(k, m, block_k)")
    if isinstance(fn, Item):
        return [fn]
    for bk in _CH5_DEPTHS:
        why = _ch5_placement(fn, bk)
        if why:
            return [Item("placement", False, why, "sa_offset must place each of the BLOCK_K x 128 floats of the tile "
                         "at its own offset, keep the 4 floats of each aligned float4 of a row together, and use at "
                         "most twice the tile's shared memory")]
    depths = ", ".join(map(str, _CH5_DEPTHS))
    items = [Item("placement", True, f"one to one, float4s whole and aligned, at BLOCK_K = {depths}")]
    got = {}
    for bk in _CH5_DEPTHS:
        for access in ("sA store", "sA load"):
            reqs, size = _ch5_requests(fn, bk, access)
            got[bk, access] = (sw_model.per_request(reqs, size), sw_model.ideal_wavefronts(32, size))
    detail = "; ".join(f"BLOCK_K = {bk}: store {got[bk, 'sA store'][0]:g}, load {got[bk, 'sA load'][0]:g}"
                       for bk in _CH5_DEPTHS) + " wavefronts per request (the fewest: store 1, load 4)"
    bad = [(bk, a) for (bk, a), (per, ideal) in got.items() if per > ideal + 1e-9]
    if not bad:
        return items + [Item("bank conflicts", True, detail), _ch5_emulated(ctx)]
    bk, access = bad[0]
    per, ideal = got[bk, access]
    if access == "sA store":
        rows = ", ".join(f"k + {4 * q}" if q else "k" for q in range(bk // 4))
        hint = (f"at BLOCK_K = {bk} the {bk // 4} lanes that share a row m of A store its float4s transposed into "
                f"rows {rows} of sA, {128 // bk} columns per row in one request: those rows must start on different "
                f"banks ({per:g}-way conflict now). Which bits of k tell those rows apart?")
        if all(fn(k, m, bk) == _ch5_chapter_offset(k, m, bk) for k in range(bk) for m in range(128)):
            detail += (f": this is the chapter's Swizzle<1,4,5>, m ^ ((k & 4) << 2), made for BLOCK_K = 8, where a "
                       f"warp's store touches rows k and k + 4 only; at BLOCK_K = {bk} it touches rows {rows}, and "
                       "rows k and k + 8 get the same XOR")
    else:
        hint = (f"the compute loop's float4 reads of one row k of sA take {per:g} wavefronts, not {ideal}: a "
                "swizzle must move whole 16-byte chunks and keep the 8 chunks a quarter warp reads on different banks")
    return items + [Item("bank conflicts", False, detail, hint), _ch5_emulated(ctx)]


# --- ch7b: cp.async.wait_group in a ring that commits a group only for a tile it loads -------------------
def _ch7b_want(t: int, num_tiles: int, num_stages: int) -> int:
    """Groups newer than tile t's own at its wait: the tiles loaded after it, t + 1 .. t + NUM_STAGES - 2."""
    return min(num_stages - 2, num_tiles - 1 - t)


_CH7B_CASES = [(s, n) for s in (2, 3, 4, 5, 6) for n in range(1, 3 * s + 2)]


_PY_CMP_TO_C = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def _py_expr_to_c_ext(node, names: dict) -> str | None:
    """_py_expr_to_c, plus min(a, b), max(a, b), `a if c else b` and one comparison (for wait_count)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
            and len(node.args) == 2 and not node.keywords:
        a, b = (_py_expr_to_c_ext(x, names) for x in node.args)
        return None if a is None or b is None else f"{node.func.id}({a}, {b})"
    if isinstance(node, ast.IfExp):
        c, a, b = (_py_expr_to_c_ext(x, names) for x in (node.test, node.body, node.orelse))
        return None if None in (c, a, b) else f"({c} ? {a} : {b})"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _PY_CMP_TO_C:
        a, b = _py_expr_to_c_ext(node.left, names), _py_expr_to_c_ext(node.comparators[0], names)
        return None if a is None or b is None else f"({a} {_PY_CMP_TO_C[type(node.ops[0])]} {b})"
    if isinstance(node, ast.BinOp) and type(node.op) in _PY_TO_C:
        a, b = _py_expr_to_c_ext(node.left, names), _py_expr_to_c_ext(node.right, names)
        return None if a is None or b is None else f"({a} {_PY_TO_C[type(node.op)]} {b})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _py_expr_to_c_ext(node.operand, names)
        return None if inner is None else f"(-{inner})"
    return _py_expr_to_c(node, names)


def _py_return_as_c(source: str, name: str, c_names: tuple, ext: bool = False) -> str | None:
    """Function `name`'s body as C, if it is one `return` of an integer expression of its arguments (named
    c_names in C); None otherwise."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == name and len(fn.args.args) == len(c_names):
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                names = {a.arg: c for a, c in zip(fn.args.args, c_names)}
                return (_py_expr_to_c_ext if ext else _py_expr_to_c)(body[0].value, names)
    return None


def _ch7b_step07_with(wait_c: str) -> str:
    """Step 07's kernel committing a group only for a tile it loads, each wait_group taking the reader's count."""
    text = (KERNELS / "hgemm" / "07_cp_async.cu").read_text()
    waits = "\n".join(f"    {'if' if n == 0 else 'else if'} (n == {n}) cp_async_wait_group<{n}>();" for n in range(8))
    edits = [("        if (s < num_tiles) copy_tiles(s, s * BLOCK_K);\n        cp_async_commit();",
              "        if (s < num_tiles) { copy_tiles(s, s * BLOCK_K); cp_async_commit(); }"),
             ("        cp_async_wait_group<NUM_STAGES - 2>();", "        wait_tile_<NUM_STAGES>(t, num_tiles);"),
             ("        if (t + NUM_STAGES - 1 < num_tiles) copy_tiles(next_stage, (t + NUM_STAGES - 1) * BLOCK_K);\n"
              "        cp_async_commit();",
              "        if (t + NUM_STAGES - 1 < num_tiles) {\n"
              "            copy_tiles(next_stage, (t + NUM_STAGES - 1) * BLOCK_K);\n"
              "            cp_async_commit();\n        }"),
             ("template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int NUM_STAGES>\n__global__",
              "template <int NUM_STAGES>\n__device__ __forceinline__ void wait_tile_(int t, int num_tiles) {\n"
              f"    const int n = {wait_c};\n{waits}\n    else cp_async_wait_group<8>();\n}}\n\n"
              "template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int NUM_STAGES>\n__global__")]
    for old, new in edits:
        if old not in text:
            raise ConfigError(f"step 07 no longer holds {old!r}: ch7b/ring_wait's emulator check needs updating")
        text = text.replace(old, new)
    return text


def _ch7b_emulated(ctx: Context) -> Item:
    """The reader's wait_count in step 07 (no empty groups) at NUM_STAGES = 3 and 4, K of 2 x NUM_STAGES + 1
    k tiles, against float64. The emulator lands a thread's cp.async copies only when a wait_group retires their
    group, so a wait that leaves tile t's group pending computes on a stage's old contents: a wrong C."""
    wait_c = _py_return_as_c(ctx.source, "wait_count", ("t", "num_tiles", "NUM_STAGES"), ext=True)
    label = "emulator (step 07, NUM_STAGES = 3 and 4)"
    if wait_c is None:
        return Item(label, None, "not run: wait_count is not one `return` of an integer expression of t, num_tiles "
                    "and num_stages (min, max and `a if c else b` allowed), so it cannot be spliced into the kernel; "
                    "the model above is the check", note=True)
    parts, ok = [], True
    for stages in (3, 4):
        tiles = 2 * stages + 1
        try:
            kern = step("hgemm/07_cp_async", backend="cpu", source=_ch7b_step07_with(wait_c), NUM_STAGES=stages,
                        BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
            right = verify(kern, cases=[Case("random", 64, 64, 32 * tiles)], raise_on_fail=False).passed
        except GemmlabError as e:
            return Item(label, False, f"your wait_count in step 07 does not run: {str(e).splitlines()[0]}")
        ok &= right
        parts.append(f"NUM_STAGES = {stages}, {tiles} k tiles: C {'right' if right else 'wrong'}")
    return Item(label, ok, "wait_count spliced into the kernel (a group committed only for a tile loaded), "
                "against float64: " + "; ".join(parts)
                + ("" if ok else " (the emulator lands a thread's copies only when a wait retires their group: "
                   "a wait that leaves tile t's group pending computes on the stage's old contents)"))


def _ch7b_property(ctx: Context) -> list[Item]:
    fn = _py_fn(ctx, "wait_count", "(t, num_tiles, num_stages)")
    if isinstance(fn, Item):
        return [fn]
    race, slow = [], []
    for stages, tiles in _CH7B_CASES:
        for t in range(tiles):
            got, err = _py_call(fn, t, tiles, stages)
            if err:
                return [Item("ring", False, err, "it gets the k tile t (0 .. num_tiles - 1), the number of k tiles "
                             "and NUM_STAGES, and returns the N of cp.async.wait_group N as an integer")]
            if not _is_int(got) or got < 0:
                return [Item("ring", False, f"wait_count({t}, {tiles}, {stages}) returned {got!r}: wait_group takes "
                             "a whole number, 0 or more", "return an integer")]
            want = _ch7b_want(t, tiles, stages)
            where = f"NUM_STAGES = {stages}, {tiles} k tiles, tile {t}{' (the last)' if t == tiles - 1 else ''}"
            if got > want:
                race.append((where, f"wait_group {got} lets the {got} newest group{'s' if got != 1 else ''} stay "
                             f"pending, but only {want} group{'s' if want != 1 else ''} were committed after tile "
                             f"{t}'s own, so tile {t}'s may be pending too: the mma reads stage {t % stages} before "
                             "its copies land", tiles > stages))
            elif got < want:
                waited = ", ".join(str(t + 1 + i) for i in range(want - got))
                free = f"tiles {t + 1} .. {t + want}" if want > 1 else f"tile {t + 1}"
                slow.append((where, f"wait_group {got} also waits for tile{'s' if want - got > 1 else ''} {waited} "
                             f"({free} may stay in flight): their copies no longer run under tile {t}'s mma"))
    n = sum(tiles for _, tiles in _CH7B_CASES)
    cases = f"{n} waits: NUM_STAGES 2 to 6, 1 to 3 x NUM_STAGES + 1 k tiles"
    if race:
        where, why, _ = next((r for r in race if r[2]), race[0])
        hint = ("a group is committed only when a tile is loaded, so near the end fewer groups are newer than tile "
                "t's: count them for the last NUM_STAGES - 1 tiles")
        if all(_py_call(fn, t, tiles, s)[0] == s - 2 for s, tiles in _CH7B_CASES[:8] for t in range(tiles)):
            why += (" (wait_group NUM_STAGES - 2 is the chapter's count, right in step 07 because it commits a group "
                    "in every iteration, an empty one past the last tile, so NUM_STAGES - 2 groups are always newer "
                    "than tile t's; this loop commits no empty group)")
        return [Item("no race", False, f"{len(race)} of {n} waits too shallow; e.g. {where}: {why}", hint),
                _ch7b_emulated(ctx)]
    items = [Item("no race", True, f"every tile's copies land before its mma reads them ({cases})")]
    if slow:
        where, why = slow[0]
        return items + [Item("overlap", False, f"{len(slow)} of {n} waits deeper than they need; first, {where}: "
                             f"{why}", "wait for tile t's group and for no newer one: leave pending every group "
                             "committed after tile t's"), _ch7b_emulated(ctx)]
    return items + [Item("overlap", True, "no wait stalls on a tile newer than the one it is for"), _ch7b_emulated(ctx)]


# --- ch7d: stream-K's pieces when a block's range spans several tiles -------------------------------------
@functools.lru_cache(maxsize=None)
def _solution_function(name: str, function: str):
    """A Python exercise's function as the course's solution file defines it (the check's reference: one copy)."""
    namespace: dict = {}
    exec(compile(get(name).solution_file.read_text(), str(get(name).solution_file), "exec"), namespace)  # noqa: S102
    return namespace[function]


_CH7D_CASES = [(b, t, k) for k in (1, 3, 4, 8) for t in range(1, 10) for b in range(1, 13)]


def _ch7d_where(blocks: int, tiles: int, k_tiles: int) -> str:
    def n(count, word):
        return f"{count} {word}{'s' if count != 1 else ''}"
    return f"{n(blocks, 'block')}, {n(tiles, 'tile')} of {n(k_tiles, 'k tile')}"


def _ch7d_pieces(fn, blocks: int, tiles: int, k_tiles: int):
    """Every block's pieces as a list of (tile, k_begin, k_end), or a sentence saying what is wrong."""
    where = _ch7d_where(blocks, tiles, k_tiles)
    out = []
    for b in range(blocks):
        got, err = _py_call(fn, b, blocks, tiles, k_tiles)
        if err:
            return None, err
        try:
            ps = [tuple(int(x) for x in p) for p in got]
        except (TypeError, ValueError):
            return None, f"{where}: pieces({b}, ...) returned {got!r}, not a list of (tile, k_begin, k_end)"
        if any(len(p) != 3 for p in ps):
            return None, f"{where}: pieces({b}, ...) returned {got!r}: each piece is (tile, k_begin, k_end)"
        for tile, k0, k1 in ps:
            if not (0 <= tile < tiles and 0 <= k0 < k1 <= k_tiles):
                return None, (f"{where}: block {b}'s piece {(tile, k0, k1)} is not k tiles k_begin .. k_end - 1 of "
                              f"a tile (0 <= tile < {tiles}, 0 <= k_begin < k_end <= {k_tiles})")
        out.append(ps)
    return out, ""


def _ch7d_coverage(pieces: list, blocks: int, tiles: int, k_tiles: int) -> str:
    where = _ch7d_where(blocks, tiles, k_tiles)
    owner = {}
    for b, ps in enumerate(pieces):
        for tile, k0, k1 in ps:
            for kt in range(k0, k1):
                if (tile, kt) in owner:
                    return f"{where}: k tile {kt} of tile {tile} is done by block {owner[tile, kt]} and block {b}"
                owner[tile, kt] = b
    total = tiles * k_tiles
    for i in range(total):
        if (i // k_tiles, i % k_tiles) not in owner:
            return f"{where}: k tile {i % k_tiles} of tile {i // k_tiles} is done by no block"
    for b in range(blocks):
        begin, end = total * b // blocks, total * (b + 1) // blocks
        mine = sorted(t * k_tiles + kt for (t, kt), o in owner.items() if o == b)
        if mine != [*range(begin, end)]:
            return (f"{where}: block {b} does k tiles {mine[:1] + ['...'] + mine[-1:] if mine else 'none'} of the "
                    f"numbering tile * k_tiles + kt, not its range {begin} .. {end - 1}")
    return ""


def _ch7d_finish_time(pieces: list, k_tiles: int) -> int:
    """When the last block is done, in k-tile times: each piece takes its k tiles; the piece that ends a tile
    (k_end == k_tiles, k_begin > 0) then waits until every other block's part of that tile is handed over.
    Waits only ever point at blocks of lower index (they hold the tile's earlier k tiles), so one pass in block
    order settles every time: nothing here can hang."""
    handed: dict[int, int] = {}  # tile -> when its last hand-over is done
    finish = 0
    for ps in pieces:
        now = 0
        for tile, k0, k1 in ps:
            now += k1 - k0
            if k1 < k_tiles:
                handed[tile] = max(handed.get(tile, 0), now)
            elif k0 > 0:
                now = max(now, handed.get(tile, 0))
        finish = max(finish, now)
    return finish


def _ch7d_property(ctx: Context) -> list[Item]:
    fn = _py_fn(ctx, "pieces", "(block, blocks, tiles, k_tiles)")
    if isinstance(fn, Item):
        return [fn]
    slow = []
    for blocks, tiles, k_tiles in _CH7D_CASES:
        got, why = _ch7d_pieces(fn, blocks, tiles, k_tiles)
        why = why or _ch7d_coverage(got, blocks, tiles, k_tiles)
        if why:
            hint = ("block b's range is k tiles tiles * k_tiles * b // blocks .. tiles * k_tiles * (b + 1) // blocks "
                    "- 1, numbered tile * k_tiles + kt; cut it at the tiles' edges into pieces")
            ranges = [tiles * k_tiles * (b + 1) // blocks - tiles * k_tiles * b // blocks for b in range(blocks)]
            if max(ranges) > k_tiles and all(len(p) <= 2 for p in (got or [])):
                why += (" (two pieces a block at most, as step 12's unit() cuts them: its ranges are at most one tile "
                        "long, since MAX_SPLIT shares a last-wave tile among several blocks; here a range is up to "
                        f"{max(ranges)} k tiles, {k_tiles} a tile)")
                hint = "the tiles between a range's two ends are whole pieces of their own"
            return [Item("coverage", False, why, hint)]
        reference = _solution_function("ch7d/stream_k_pieces", "pieces")
        mine, best = _ch7d_finish_time(got, k_tiles), _ch7d_finish_time(
            [reference(b, blocks, tiles, k_tiles) for b in range(blocks)], k_tiles)
        if mine > best:
            slow.append((blocks, tiles, k_tiles, mine, best))
    items = [Item("coverage", True, f"every k tile once, each block its own range, on {len(_CH7D_CASES)} cases "
                  "(1 to 12 blocks, 1 to 9 tiles of 1, 3, 4 or 8 k tiles)")]
    if not slow:
        return items + [Item("no waiting chain", True, "every block is done by the time its longest range allows")]
    blocks, tiles, k_tiles, mine, best = max(slow, key=lambda s: s[3] - s[4])
    return items + [Item("no waiting chain", False, f"slower on {len(slow)} cases; worst, "
                         f"{_ch7d_where(blocks, tiles, k_tiles)}: the last block is done after {mine} k-tile times, "
                         "where "
                         f"{best} suffice", "a block that ends a tile waits for the blocks before it to hand over "
                         "their part; if they each finish their own first tile before handing over, the waits form "
                         "a chain down to block 0. Order the pieces so that no block waits before it has handed over")]


# --- ch9: a tile counter that nothing resets and only its writers change -----------------------------------
_U32 = 2**32
_CH9_CASES = [(launch, parts) for parts in (1, 2, 3, 4) for launch in (0, 1, 2, 7)] + \
    [(_U32 // parts - 1 + d, parts) for parts in (1, 2, 3, 4) for d in (0, 1, 2)]


def _ch9_property(ctx: Context) -> list[Item]:
    """Phase 2 of launch `launch` polls a counter that `parts` groups of phase 1 each add 1 to (release) after
    storing their part of the tile of T; nothing resets it, so it starts the launch at launch * parts (mod 2^32).
    A model of the poll: bounded, so a condition that is never true is reported, not waited for."""
    fn = _py_fn(ctx, "ready", "(value, launch, parts)")
    if isinstance(fn, Item):
        return [fn]
    for launch, parts in _CH9_CASES:
        start = launch * parts % _U32
        for stored in range(parts + 1):
            value = (start + stored) % _U32
            got, err = _py_call(fn, value, launch, parts)
            if err:
                return [Item("tile counter", False, err, "ready gets the counter's 32-bit value, the launch's number "
                             "and the groups that store a tile, and returns True or False")]
            where = f"launch {launch}, {parts} group{'s' if parts > 1 else ''} per tile"
            if stored < parts and got:
                why = (f"{where}: the counter reads {value} after {stored} of {parts} groups released their part, "
                       "and ready says yes: phase 2 copies a tile of T "
                       + ("not stored yet" if stored == 0 else "half stored")
                       + (f" ({value} is what the launches before left: nothing resets the counter)"
                          if stored == 0 and launch else ""))
                hint = ("the counter only grows, one per group per launch: which value does it reach when this "
                        "launch's groups have all released?")
                if all(bool(_py_call(fn, v, L, p)[0]) == (v != 0) for v, L, p in
                       ((0, 0, 1), (1, 0, 1), (1, 0, 2), (2, 1, 2), (9, 4, 2), (0, 5, 3))):
                    why += (": `value != 0` is the chapter's test, right in step 08, where one atomic add releases "
                            "the whole tile and the readers take the count back to 0; here several groups add and "
                            "nobody subtracts")
                return [Item("tile counter", False, why, hint)]
            if stored == parts and not got:
                why = (f"{where}: every group released (the counter reads {value}), yet ready says no: the poll "
                       "would spin for ever, a deadlock (the check stops it after the last release)")
                hint = ("the counter is a 32-bit unsigned integer: it wraps to 0 after 2^32 - 1. Compare the distance "
                        "from this launch's starting value, taken modulo 2^32, not the values themselves"
                        if launch * parts + parts >= _U32 else
                        "after this launch's releases the counter holds (launch + 1) * parts: every group of every "
                        "launch so far added 1")
                return [Item("tile counter", False, why, hint)]
    return [Item("tile counter", True, f"ready only once every group released, on {len(_CH9_CASES)} (launch, groups) "
                 "cases, through the counter's wrap at 2^32")]


_LISTINGS_B = {  # the chapters' own computations, as the functions these exercises ask for
    "ch5/deep_tile_swizzle": '''
def sa_offset(k, m, block_k):
    # chapter 5's Swizzle<1,4,5> on step 07's sA: column m of row k at m ^ ((k & 4) << 2)
    return k * 128 + (m ^ ((k & 4) << 2))
''',
    "ch7b/ring_wait": '''
def wait_count(t, num_tiles, num_stages):
    # step 07: cp_async_wait_group<NUM_STAGES - 2>() in every iteration
    return num_stages - 2
''',
    "ch7d/stream_k_pieces": '''
def pieces(block, blocks, tiles, k_tiles):
    # step 12's unit(): the beginning of the range's last tile, then the end of its first
    begin, end = tiles * k_tiles * block // blocks, tiles * k_tiles * (block + 1) // blocks
    if begin == end:
        return []
    first, last = begin // k_tiles, (end - 1) // k_tiles
    out = [(last, max(begin - last * k_tiles, 0), end - last * k_tiles)]
    if first != last:
        out.append((first, begin - first * k_tiles, k_tiles))
    return out
''',
    "ch9/monotone_flag": '''
def ready(value, launch, parts):
    # step 08's producer: wait until the counter is nonzero
    return value != 0
''',
}
_PY_TASKS = {  # what a Python exercise's notebook cell says the check does (ch1's text is the default)
    "ch5/deep_tile_swizzle": "The check places step 07's sA tile through it at BLOCK_K = 8, 16 and 32 and counts "
                             "the wavefronts of the transposed stores and of the compute loop's float4 reads with the "
                             "chapter's model; then it splices it into step 07 at BLOCK_K = 16 and counts them again in "
                             "the emulator.",
    "ch7b/ring_wait": "The check runs the ring's waits for 2 to 6 stages and 1 to 3 x NUM_STAGES + 1 k tiles, and says "
                      "where a tile is read too early or a wait stalls on a newer tile; then it runs step 07 with your "
                      "count in the emulator, at 3 and 4 stages, against float64.",
    "ch7d/stream_k_pieces": "The check deals out 1 to 9 tiles to 1 to 12 blocks, checks that every k tile is done "
                            "once, by the block whose range holds it, and times the waits between blocks.",
    "ch9/monotone_flag": "The check plays the releases of each tile launch after launch, through the counter's wrap at "
                         "2^32, with a bounded poll: a condition that never comes true is a FAIL, not a hang.",
}
_PY_TASKS = {name: f"{text} `exercises.show(\"{name}\")` prints the whole task (the function's docstring "
              "says what it gets and returns)." for name, text in _PY_TASKS.items()}


_SOLUTION_DIFF = "show.diff(STEP, PREVIOUS) in the chapter lists the lines that differ"
_EXERCISES = [
    Exercise("ch1/smallest_n", 1, "",
             "the smallest N at which an N^3 GEMM can be compute-bound, per GPU and precision (Python)", _ch1_property, minutes=15,
             after="chapter 2. Harder: the same for a kernel that reads A and B once per 128 x 128 tile of C "
                   "instead of once in all (chapter 4 builds it): its intensity no longer grows with N.",
             hints=("Write the intensity of an N x N x N GEMM as a formula in N: 2 N^3 FLOP over the bytes of A, B "
                    "and C, N^2 elements each (hardware.gemm_intensity computes it for one N).",
                    "The intensity is 2 N / (3 x bytes per element). Set it >= the balance point of that precision "
                    "(fp32: gpu.fp32_tflops, 4 bytes; fp16: gpu.fp16_tensor_tflops, 2 bytes), solve for N, round "
                    "up with math.ceil."),
             variation=True, python=True),
    Exercise("ch2/coalesced_1d", 2, "sgemm/02_coalesced",
             "a coalesced mapping for a one-dimensional block: row and column from a flat threadIdx.x (checks "
             "sectors per request)", _ch2_property, _ch2_diagnose, minutes=15,
             after="chapter 3. Harder: make BLOCK_X = 8, BLOCK_Y = 32 (a tall tile) and predict the sectors per "
                   "request of B before you run the counters.",
             hints=("A warp is 32 consecutive values of threadIdx.x. For each of them, which (row, col) of C does "
                    "your mapping give? List them for BLOCK_X = 32, BLOCK_Y = 8: are they side by side in a row?",
                    "The tile has BLOCK_Y rows of BLOCK_X columns. Number its elements row by row and let threadIdx.x "
                    "be that number: the column is threadIdx.x % BLOCK_X, the row threadIdx.x / BLOCK_X."),
             variation=True, aliases=("ch2/coalesced_index",),
             variant={"params": _variant_params(BLOCK_X=(32, (8, 16, 32, 64)), BLOCK_Y=(8, (4, 8, 16, 32))),
                      "geometry": _geometry_1d, "summary": "chapter 2's exercise: a coalesced 1D-block mapping"}),
    Exercise("ch3/rect_tile", 3, "sgemm/03_smem_tiling",
             "stage rectangular tiles (BLOCK_K != BLOCK) in shared memory and place the barriers (checks results "
             "at BLOCK_K = 8 and 64, barriers per tile, coalescing)", _ch3_rect_property, _ch3_rect_diagnose,
             minutes=25, after="chapter 4. Harder: which BLOCK_K makes the kernel fastest on your GPU, and why "
                               "does it not change the global loads per output element?",
             hints=("Each K tile has three parts: the threads copy sA and sB, every thread reads a row of sA and a "
                    "column of sB, then the loop moves on and overwrites them. Which part must wait for which, and "
                    "which threads copy which elements when BLOCK_K = 8? when BLOCK_K = 64?",
                    "Loop: for (int kk = tx; kk < BLOCK_K; kk += BLOCK) sA[ty][kk] = load_or_zero(A, row, k0 + kk, "
                    "M, K); the same for sB with ty; then __syncthreads() outside any if, the compute loop over "
                    "BLOCK_K, and __syncthreads() again."),
             variation=True, aliases=("ch3/tile_barriers",),
             variant={"params": _variant_params(BLOCK=(32, (8, 16, 32)), BLOCK_K=(8, (4, 8, 16, 32, 64))),
                      "summary": "chapter 3's exercise: rectangular tiles, BLOCK_K != BLOCK"}),
    Exercise("ch4/register_blocking", 4, "sgemm/05_2d_blocktiling",
             "a 4 x 16 register block (not the chapter's 8 x 8) whose sB sliver is read as float4s (checks results "
             "at 4 x 16, registers/spills, shared loads per k step)",
             _ch4_property, minutes=20,
             after="chapter 5. Harder: 16 x 4, where the long sliver is a column of sA: "
                   "what must change in sA's layout before it can be read as float4s (step 06 does it)?",
             hints=("Per k step a thread needs 4 values of sA's column k and 16 of sB's row k. Which of the two "
                    "runs is contiguous in shared memory, and how many 16-byte loads would cover it?",
                    "a[m] = sA[thread_row + m][k] for m < 4 (strided: scalars); for j < THREAD_N / 4, "
                    "*reinterpret_cast<const float4*>(&sB[k][thread_col + 4 * j]) gives b[4j .. 4j + 3]; then the "
                    "outer product, every loop under #pragma unroll."),
             variation=True,
             variant={"params": _variant_params(BLOCK_M=(128, (64, 128)), BLOCK_N=(128, (64, 128)),
                                                BLOCK_K=(8, (8, 16)), THREAD_M=(4, (4,)), THREAD_N=(16, (16,))),
                      "summary": "chapter 4's exercise: a 4 x 16 register block, sB read as float4s"}),
    Exercise("ch6/register_prefetch", 6, "sgemm/08_register_prefetch",
             "prefetch two tiles ahead: two sets of staging registers, two shared slots, one barrier per K tile "
             "(checks the loop's order in SASS, barriers and global loads per tile, registers)",
             _ch6_property, _ch6_diagnose, minutes=30,
             after="chapter 7 (first compare your loop with step 09's double buffering, above). Harder: "
                   "three tiles ahead with three sets of registers; count the registers (k.resources()) and say when "
                   "it stops paying.",
             hints=("A load issued during tile t's FMAs has one tile's FMAs to land in 08. Where could tile t + 1 "
                    "wait so that its loads get two? And when may tile t + 1 be stored into a slot that nobody reads "
                    "during tile t: which barrier does that make unnecessary?",
                    "r0 and r1 alternate, and so do slots 0 and 1; a register set picked by t % 2 at run time leaves "
                    "the registers for local memory, so take two tiles per trip round the loop (t += 2) and write "
                    "the two halves out, each: load tile + 2, compute this slot, store tile + 1 into the other, one "
                    "barrier."),
             variation=True,
             variant={"params": _variant_params(BLOCK_M=(128, (64, 128)), BLOCK_N=(128, (64, 128)),
                                                BLOCK_K=(8, (8,)), WARP_M=(64, (32, 64)), WARP_N=(32, (32, 64)),
                                                THREAD_M=(8, (4, 8)), THREAD_N=(8, (4, 8))),
                      "rules": registry.rules_warps(2),
                      "summary": "chapter 6's exercise: register prefetch two tiles ahead"}),
    Exercise("ch7/ldmatrix_address", 7, "hgemm/01_mma_tiling",
             "the row each lane hands to ldmatrix.x4 for the transposed B operand (sB stored K-major, no .trans; "
             "checks all 32 lane addresses)", _ch7_property, _ch7_lanes,
             minutes=15, after="the swizzle exercise below. Harder: the same piece read with "
                               "two ldmatrix.x2 instead of one x4 (lanes 16-31 then give no address).",
             hints=("In sB (B transposed) a row is one column of C (an n) and runs along k. mma's B fragment for "
                    "n 0-7 needs k 0-7 and k 8-15 in consecutive registers: which two quarters of the piece come "
                    "first, and how does that differ from A's order (top, bottom, then the next k)?",
                    "Lanes 0-7 and 8-15 both walk n 0-7 (lane_id % 8), at k 0 and k 8; lanes 16-31 do the same for "
                    "n 8-15: the n offset comes from lane_id / 16, the k offset from bit 3 of lane_id."),
             variation=True,
             variant={"summary": "chapter 7's exercise: ldmatrix addresses of the transposed B operand"}),
    Exercise("ch7/swizzle", 7, "hgemm/03_swizzled",
             "an XOR swizzle for 96-byte rows (BLOCK_K = 48, not a power of two) and 256-byte rows, one function "
             "for both, that makes the ldmatrix reads conflict-free (checks wavefronts per request)",
             _ch5_property, _ch5_diagnose, minutes=30,
             after="chapter 7b. Harder: BLOCK_K = 40 (80-byte rows, 5 chunks): why does no XOR "
                   "swizzle work, and what would (padding, chapter 5)?", aliases=("ch5/swizzle",),
             hints=("Without a swizzle, where does chunk c of row r start, counted in 16-byte bank groups (mod 8)? "
                    "Tabulate it for the 8 rows of an ldmatrix matrix at 6 chunks a row and at 16: which rows "
                    "collide, and which XOR masks keep a chunk inside a row of 6?",
                    "With 6 chunks a row, rows r and r + 4 collide and only bit 0 of the chunk index may flip "
                    "(0<->1, 2<->3, 4<->5): the largest power of two dividing the chunks per row (CHUNKS & -CHUNKS) "
                    "bounds the XOR; the rows that share a mask are 8 / XOR apart. At 16 chunks this is the chapter's "
                    "swizzle."),
             variation=True,
             variant={"params": _variant_params(BLOCK_M=(128, (64, 128)), BLOCK_N=(128, (64, 128)),
                                                BLOCK_K=(48, (48,)), WARP_M=(64, (32, 64)), WARP_N=(64, (32, 64))),
                      "rules": registry.mma_tiling_rules(16, 16, 16),
                      "summary": "chapter 7's exercise: a swizzle for 96-byte rows (BLOCK_K = 48)"}),
    Exercise("ch7c/ring_phase", 7, "hgemm/08_wgmma",
             "Hopper: advance the consumer's (stage, phase) in step 08's ring of mbarriers without dividing by "
             "NUM_STAGES (checks several trips round rings of 3 and 5 stages)", _ring_property, _ring_diagnose,
             minutes=20, after="the next section (chapter 7d's persistent kernel, whose ring position runs on across "
                               "tiles). Harder: do the same for the producer, whose first trip waits on empty[s] with "
                               "parity 1.",
             hints=("Follow one stage, s = 0, through the k tiles: which tiles land in it, and which phase of full[0] "
                    "(0, 1, 2, ...) completes for each? mbarrier_wait takes that phase's parity.",
                    "After each tile: s = s + 1; when s reaches NUM_STAGES it wraps to 0 and a new trip begins, so the "
                    "parity flips: if (++s == NUM_STAGES) { s = 0; phase ^= 1; }"),
             variation=True,
             variant={"params": _variant_params(BLOCK_N=(128, (128, 256)), NUM_STAGES=(3, (2, 3, 4, 5, 6)),
                                                GROUP_M=(16, (1, 2, 4, 8, 16, 32))),
                      "summary": "chapter 7c's exercise: the consumer's (stage, phase) carried across k tiles"}),
    Exercise("ch8/fused_phase2", 8, "fused/02_row_panel",
             "the fused kernel's second phase, E = T C, from a panel of T stored M-major and read in float2s (checks "
             "results, C's traffic, T on chip, the panel's shared loads)",
             _ch8_property, _ch8_diagnose, minutes=45,
             after="chapter 9. Harder: THREAD_M = 4, "
                   "with the panel read as float4s: which alignment must thread_row and PANEL_M then have?",
             hints=("After phase 1 the block's panel of T (its PANEL_M rows, all L columns) sits in sT, stored the "
                    "way phase 1 wrote it. Each E[row][col] is a row of T times a column of C: which part of C does "
                    "the whole block need for one slice of E's columns, and how often must it come from global "
                    "memory?",
                    "Loop over E's columns (n0, BLOCK_N at a time) and, inside, over L (l0, BLOCK_K at a time): stage "
                    "C's slice with stage_Y into sY once for the block, a barrier, each thread's FMAs with a[m] from "
                    "the M-major panel (sT[(l0 + k) * PANEL_M + thread_row + m], two at a time through a const "
                    "float2*) and b[n] from sY, a barrier; store E at the end of each n0."),
             variation=True),
    # chapters 5, 7b, 7d and 9 (issue 53): Python models of the idea, each a variation of what the chapter shows
    Exercise("ch5/deep_tile_swizzle", 5, "",
             "a swizzle for step 07's transposed sA store at BLOCK_K = 16 and 32, where the chapter's Swizzle<1,4,5> "
             "(made for 8) leaves conflicts (Python; counts wavefronts per request with the chapter's model, then in "
             "step 07 in the emulator)",
             _ch5_deep_property, minutes=25,
             after="the next section of chapter 5. Harder: at BLOCK_K = 64 a warp's store touches 16 rows of sA, "
                   "two columns each; is there still an XOR that removes the conflicts and keeps the float4s whole?",
             hints=("List the lanes of one warp's store request at BLOCK_K = 16: lanes 4r .. 4r + 3 hold row r of A's "
                    "tile and store into rows c + j of sA for c = 0, 4, 8, 12. Which rows of sA does one request "
                    "touch, at which columns, and on which banks?",
                    "Four rows, k, k + 4, k + 8, k + 12, eight columns each: XOR (k / 4) into the two column bits "
                    "above those eight (bits 3 and 4), i.e. m ^ ((k / 4) * (128 / block_k)); at BLOCK_K = 8 this is "
                    "the chapter's m ^ ((k & 4) << 2)."),
             variation=True, python=True),
    Exercise("ch7b/ring_wait", 7, "",
             "the cp.async.wait_group count of step 07's ring when no empty group is committed past the last tile "
             "(Python; checks every wait for a race or a stall, 2 to 6 stages, then runs it in step 07 in the emulator)",
             _ch7b_property, minutes=15,
             after="the next section of chapter 7b. Harder: with no empty groups, which other line of step 07's "
                   "loop could go, and what would it cost?",
             hints=("Number the commit groups: one per tile, in tile order. At tile t's wait, which groups have been "
                    "committed, and how many of them are newer than tile t's own? Count it for t = 0 and for the "
                    "last tile.",
                    "Groups newer than tile t's: tiles t + 1 .. min(t + NUM_STAGES - 2, num_tiles - 1), so "
                    "min(NUM_STAGES - 2, num_tiles - 1 - t)."),
             variation=True, python=True),
    Exercise("ch7d/stream_k_pieces", 7, "",
             "stream-K's pieces of a block's range when it spans several tiles, in an order that never makes a "
             "block wait before it hands over (Python; checks coverage and the waits on 432 cases)",
             _ch7d_property, minutes=25,
             after="chapter 8. Harder: step 12 shares only the last wave; write the pieces for a hybrid that deals "
                   "the full waves whole and shares the last wave among all blocks.",
             hints=("Draw a range that starts inside tile f and ends inside tile l > f + 1: it holds the end of f, "
                    "tiles f + 1 .. l - 1 whole and the beginning of l. Which of those pieces wait for another block, "
                    "and for which?",
                    "Only the end of f waits (for lower blocks' parts of f). Do the beginning of l first (hand it "
                    "over), then tiles l - 1 .. f + 1 whole, then the end of f."),
             variation=True, python=True),
    Exercise("ch9/monotone_flag", 9, "",
             "the wait condition of a tile counter that several groups release and nothing resets, launch after "
             "launch (Python; a bounded model of the poll: a deadlock is a FAIL, not a hang)", _ch9_property,
             minutes=15,
             after="the chapter's measurements. Harder: which fence must each group issue before its add, and which "
                   "one the producer after its acquire, so that TMA reads the stores (step 08's comments say).",
             hints=("Write down the counter's value at the start of launch 0, 1, 2 with 2 groups per tile, and after "
                    "each release. Which value says 'every group of this launch has stored its part'?",
                    "It starts launch L at L * parts and ends it at (L + 1) * parts, modulo 2^32: compare the distance "
                    "(value - L * parts) % 2**32 with parts."),
             variation=True, python=True),
]


# ------------------------------------------------------------------------------------------------
# Templates, gaps, splicing
# ------------------------------------------------------------------------------------------------
def every() -> list[Exercise]:
    """Every exercise, in chapter order (print one for its name and summary)."""
    return sorted(_EXERCISES, key=lambda e: (e.chapter, e.name.split("/")[0]))


def names() -> "list[str]":
    """Every exercise's name (earlier names, `Exercise.aliases`, are found by get() but not listed)."""
    return [e.name for e in every()]


def get(name: str) -> Exercise:
    """The exercise called `name` ("ch2/coalesced_index"); a ConfigError naming the exercises otherwise."""
    for e in _EXERCISES:
        if e.name == name or name in e.aliases:
            return e
    raise ConfigError(f"no exercise {name!r}; the exercises are: {', '.join(names())}")


def gap_of(text: str) -> tuple[str, str, str, str]:
    """(before, gap, after, indent) of a source holding one EXERCISE ... END gap (markers stay in before/after)."""
    start = _START.search(text)
    end = _END.search(text, start.end()) if start else None
    if not start or not end:
        raise ConfigError("no gap: the file must keep its `// ---- EXERCISE: ... ----` and `// ---- END ----` lines")
    return text[: start.end() + 1], text[start.end() + 1: end.start()], text[end.start():], start.group(1)


def template(name: str) -> str:
    """The exercise's source as shipped: the gap holds a placeholder that compiles and fails the check."""
    return get(name).file.read_text()


def solution(name: str) -> str:
    """The course's own lines for the gap (kept apart, in kernels/exercises/solutions/)."""
    return gap_of(get(name).solution_file.read_text())[1]


def splice(name: str, code: str) -> str:
    """The template with its gap replaced by `code` (dedented, then indented like the gap's marker)."""
    before, _, after, indent = gap_of(template(name))
    lines = code.expandtabs(4).strip("\n").split("\n")
    # dedent by the least indentation of the statements (a #pragma at column 0 does not count)
    depth = min((len(l) - len(l.lstrip()) for l in lines if l.strip() and not l.lstrip().startswith("#")), default=0)
    body = "\n".join(("" if not l.strip() else l.lstrip() if l.lstrip().startswith("#pragma") else indent + l[depth:])
                     for l in lines)
    return before + body + "\n" + after


def show(name: str):
    """The template, highlighted, its gap marked: a notebook cell's output (plain text outside Jupyter)."""
    ex = get(name)
    text = ex.file.read_text().rstrip("\n")
    lines = highlighted_lines(text)
    plain = text.split("\n")
    inside, marked = False, []
    for src, hl in zip(plain, lines):
        if _START.match(src):
            inside = True
            marked.append(f'<span style="background:#fff3b0;display:inline-block;min-width:100%">{hl}</span>')
            continue
        if inside and _END.match(src):
            inside = False
        marked.append(f'<span style="background:#fff3b0;display:inline-block;min-width:100%">{hl}</span>'
                      if inside or _END.match(src) else hl)
    return Listing(f"kernels/exercises/{ex.file.name}: {ex.summary} (the gap is marked)", marked, text)


def start(name: str, directory: str | Path = "exercises", force: bool = False) -> Path:
    """Write the template to ./exercises/<name>.cu for the reader to edit; an existing copy is kept unless force."""
    ex = get(name)
    path = Path(directory) / f"{ex.name}{ex.file.suffix}"  # .py for a Python exercise
    if path.exists() and not force:
        return path
    if path.is_symlink() and not path.exists() and not force:
        raise ConfigError(f"{path} is a link to {os.readlink(path)}, which does not exist: remove the link, or pass "
                          "--force (force=True) to write the template in its place")
    try:
        for folder in (path.parent, *path.parent.parents):
            if folder.exists() and not folder.is_dir():
                raise ConfigError(f"{folder} is a file, so it cannot hold {path}: move that file away, or start the "
                                  "exercise in another folder (directory=...)")
        path.parent.mkdir(parents=True, exist_ok=True)
        if force and path.is_symlink():
            path.unlink()
        path.write_text(template(name))
    except OSError as e:
        raise ConfigError(f"cannot write {path} ({e.strerror or type(e).__name__}): start the exercise in a folder "
                          "you can write to (run from there, or pass directory=...)") from None
    return path


def started_path(name: str, directory: str | Path = "exercises") -> Path:
    return Path(directory) / f"{get(name).name}{get(name).file.suffix}"


# ------------------------------------------------------------------------------------------------
# Hints in stages: the check says what is wrong; each hint() gives the next stage; the last one, the solution
# ------------------------------------------------------------------------------------------------
_LAST: dict[str, list] = {}  # exercise name -> [its latest Verdict, hint stages given since]


def _remember(verdict: Verdict) -> None:
    _LAST[verdict.exercise] = [verdict, 0]


def hint_stages(name: str, verdict: Verdict | None = None) -> "list[str]":
    """Every hint for exercise `name`, first to last: the check's own diagnosis of `verdict` (what the measured
    property means and where to look), the exercise's hints, each closer to the answer, and where the solution is."""
    ex = get(name)
    first = [f"{i.label}: {i.hint}" for i in (verdict.items if verdict is not None else []) if i.hint]
    stages = [" ".join(first)] if first else []
    stages += ex.hints
    stages.append(f"the course's answer: print(exercises.solution({name!r})) shows the lines, and `python -m gemmlab "
                  f"exercise check {name} --solution` checks them through the same path. Read it, close it, then "
                  "write yours from memory and check it.")
    return stages


@dataclass
class Hint:
    """One stage of an exercise's hints; prints as text."""

    exercise: str
    stage: int
    stages: int
    text: str

    def __str__(self) -> str:
        more = (f" (hint({self.exercise!r}) again for the next)" if self.stage < self.stages else "")
        return "\n".join(textwrap.wrap(f"{self.exercise}, hint {self.stage} of {self.stages}{more}: {self.text}",
                                       width=100, subsequent_indent="    "))

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def hint(name: str, stage: int | None = None) -> Hint:
    """The next hint for exercise `name` (or hint number `stage`, from 1): the first stage explains the latest
    check's failure, later stages come closer to the answer, the last one points to the solution."""
    ex = get(name)
    verdict, given = _LAST.get(ex.name, [None, 0])
    stages = hint_stages(ex.name, verdict)
    k = (given if stage is None else stage - 1)
    k = max(0, min(k, len(stages) - 1))
    _LAST[ex.name] = [verdict, k + 1]
    return Hint(ex.name, k + 1, len(stages), stages[k])


def cli_hint(name: str, verdict: Verdict, directory: str | Path = "exercises") -> str:
    """`exercise check NAME --hint`: the next stage of hints, counted in ./exercises/.hints.json across runs."""

    store = Path(directory) / ".hints.json"
    try:
        given = json.loads(store.read_text())
    except (OSError, ValueError):
        given = {}
    stage = int(given.get(name, 0)) + 1
    h = hint(name, stage)
    given[name] = h.stage
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(given))
    return str(h)


def listing(name: str) -> str:
    """What the chapter itself shows for the exercise's idea, pasted whole as an answer: the step's kernel file
    (a Python exercise: the chapter's own computation, wrapped as the function asked for). A variation fails
    with it; tests/test_exercises.py checks that."""
    ex = get(name)
    if ex.python:
        return _LISTINGS[ex.name]
    return (KERNELS / f"{ex.step}.cu").read_text()


def listing_gap(name: str) -> str:
    """The step's own lines for the exercise's gap, as the chapter shows them (kernels/exercises/listings/, written
    by generate.py); for an exercise that is not a variation, they are the solution itself."""
    ex = get(name)
    if ex.python:
        return _LISTINGS[ex.name]
    path = EXERCISES_DIR / "listings" / f"{ex.stem}.cu"
    if not path.is_file():
        return solution(name)
    return "\n".join(l for l in path.read_text().split("\n")[2:])


_LISTINGS = {  # Python exercises: the chapter's listing as the function asked for
    "ch1/smallest_n": '''
def smallest_n(gpu, precision):
    # chapter 1's cell: the balance point, FLOP per byte
    tflops = gpu.fp32_tflops if precision == "fp32" else gpu.fp16_tensor_tflops
    return hardware.balance_point(tflops, gpu.dram_gbps)
''',
}

_LISTINGS.update(_LISTINGS_B)

# ------------------------------------------------------------------------------------------------
# check
# ------------------------------------------------------------------------------------------------
class SourceProblem(ConfigError):
    """The reader's answer cannot be checked as it stands (not text, empty, another exercise's file): `check`
    reports it as the verdict's one failed item, with what to do."""


_GLOBAL = re.compile(r"\b__global__\b")


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


def _decode(raw: bytes, where: str) -> str:
    """A file's or bytes' text: UTF-8, a byte-order mark dropped; a SourceProblem for anything else."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SourceProblem(f"{where} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): save it as "
                            "UTF-8 (a .cu file of plain text), or paste the gap's lines as code=") from None
    if "\0" in text:
        raise SourceProblem(f"{where} holds binary data (a NUL byte), not CUDA source: check the .cu file you "
                            "started (python -m gemmlab exercise start NAME --force writes the template again)")
    return text.replace("\r\n", "\n")


def _owner(text: str) -> "Exercise | None":
    """The exercise whose template has the same EXERCISE marker as `text` (None if none does)."""
    m = _START.search(text)
    for e in _EXERCISES:
        t = _START.search(e.file.read_text())
        if m and t and t.group(2).strip() == m.group(2).strip():
            return e
    return None


def _as_answer(ex: Exercise, text: str, what: str) -> tuple[str, str]:
    """Whole file, gap with its marker lines, or the gap's lines alone: the source to compile, and its label."""
    if not text.strip():
        raise SourceProblem(f"{what} is empty: write the gap's lines (exercises.show({ex.name!r}) shows "
                            f"where they go), or start over with `python -m gemmlab exercise start {ex.name} --force`")
    owner = _owner(text)
    if owner is not None and owner is not ex:
        raise SourceProblem(f"{what} is the file of exercise {owner.name}, not {ex.name}: check it with "
                            f"`python -m gemmlab exercise check {owner.name}`, or start {ex.name} with "
                            f"`python -m gemmlab exercise start {ex.name}`")
    code = _without_comments(text)
    if _GLOBAL.search(code):  # a whole file (a __global__ in a comment does not make one)
        return text, ("your file" if what == "your code" else what)
    if _START.search(text):  # the gap pasted with its marker lines: keep what lies between them
        start = _START.search(text)
        end = _END.search(text, start.end())
        text = text[start.end():end.start() if end else len(text)]
    elif _END.search(text):
        text = text[:_END.search(text).start()]
    label = "your code" if what == "your code" else f"{what} (the gap's lines)"
    return splice(ex.name, text), label


def _resolve_source(ex: Exercise, code: str | None, path: str | Path | None, solution_: bool) -> tuple[str, str]:
    given = [n for n, v in (("code=", code), ("path=", path), ("solution=True", solution_ or None)) if v is not None]
    if len(given) > 1:
        raise ConfigError(f"check() takes one answer, got {' and '.join(given)}: pass the gap's code (code=), a file "
                          "(path=) or solution=True, not several")
    if solution_:
        return splice(ex.name, solution(ex.name)), "the solution"
    if path is not None:
        try:
            raw = Path(path).read_bytes()
        except IsADirectoryError:
            raise SourceProblem(f"{path} is a folder, not a .cu file: give the file you edited") from None
        except OSError as e:
            raise SourceProblem(f"cannot read {path} ({e.strerror or type(e).__name__}): give the .cu file you "
                                f"edited (python -m gemmlab exercise start {ex.name} writes one)") from None
        return _as_answer(ex, _decode(raw, str(path)), str(path))
    if code is not None:
        if isinstance(code, (bytes, bytearray)):
            code = _decode(bytes(code), "code=")
        elif not isinstance(code, str):
            raise ConfigError(f"code= takes the gap's lines as a string, not {type(code).__name__}: "
                              "exercises.check(NAME, r\'\'\'...\'\'\')")
        return _as_answer(ex, code.lstrip("\ufeff"), "your code")
    return template(ex.name), "the template as shipped"


def _relabel(message: str, ex: Exercise, gap_line: int | None) -> str:
    """A compiler message pointed at the exercise's file instead of the step's name."""
    step_file = ex.step.split("/")[1] + ".cu"
    text = message.replace(step_file, f"{ex.stem}.cu")
    text = "\n".join(line for line in text.split("\n") if "#pragma once in main file" not in line)
    if gap_line:
        text += f" (line numbers count from the top of the template; the gap starts at line {gap_line})"
    return text


def _correctness(ex: Exercise, kern) -> tuple[Item, object]:
    if ex.fused:
        report = fcheck(kern, raise_on_fail=False)
        shapes = [f"{c.m}x{c.k}x{c.l}x{c.n}" for c in report.cases]
        what = "E = A B C against float64"
    else:
        report = verify(kern, raise_on_fail=False)
        shapes = [f"{c.m}x{c.n}x{c.k}" for c in report.cases if not c.rejected]
        what = "C = A B against float64"
    shapes = [*dict.fromkeys(shapes)]  # a shape tried with several inputs counts once
    if report.passed:
        return Item("correct", True, f"{what} on {len(shapes)} shapes ({', '.join(shapes)}), edge tiles "
                    "included"), report
    text = str(report).removeprefix("FAIL: ")
    hint = ""
    if not ex.diagnose and report.mismatches and all(g == 0 for _, _, g, _ in report.mismatches):
        hint = "the listed outputs are all 0: the code in the gap adds nothing (or stores nothing) there."
    return Item("correct", False, text, hint), report


def _timing(ex: Exercise, kern, size: int) -> float:
    """Median milliseconds of one launch at size^3 (GPU)."""
    import cupy  # optional: a GPU only
    rng = cupy.random.default_rng(0)
    dtype = np.float16 if ex.step.startswith("hgemm/") else np.float32
    a = rng.random((size, size), dtype=np.float32).astype(dtype)
    b = rng.random((size, size), dtype=np.float32).astype(dtype)
    out = cupy.empty((size, size), dtype=dtype)
    if ex.fused:
        c = rng.random((size, size), dtype=np.float32)
        launch = kern.launcher(a, b, c, out)
    else:
        def launch():
            kern.run(a, b, out)
    for _ in range(3):
        launch()
    times = []
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(15):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def _speed(ex: Exercise, kern) -> Item:
    size = 1024 if ex.fused else 2048
    ref = _reference_kernel_gpu(ex)
    mine_ms, ref_ms = _timing(ex, kern, size), _timing(ex, ref, size)
    detail = f"{mine_ms:.3f} ms at {size}^3, the step {ex.step}: {ref_ms:.3f} ms ({ref_ms / mine_ms:.2f}x its speed)"
    if mine_ms <= 1.15 * ref_ms:
        return Item("speed", True, detail)
    return Item("speed", False, detail, "correct and as the chapter asks, yet slower than the chapter's step by more "
                "than 15%: compare your gap with the step's code line by line (show.diff).")


def _reference_kernel_gpu(ex: Exercise):
    return build(ex, "gpu")


def check(name: str, code: str | None = None, path: str | Path | None = None, backend: str = "auto",
          solution: bool = False) -> Verdict:
    """Check the reader's answer to exercise `name`: `code` (the gap's lines, or a whole file), `path` (a file),
    neither (the template as shipped) or `solution=True` (the course's own). Correctness against float64 on
    several shapes, then the chapter's property, then on a GPU the speed against the chapter's step. Returns a
    Verdict (never raises for a wrong answer); an unknown name or an unavailable backend raise GemmlabError."""

    ex = get(name)
    if ex.python:
        return _check_python(ex, code, path, solution)
    where = pick_backend(None if backend in (None, "auto") else backend)
    try:
        text, what = _resolve_source(ex, code, path, solution)
    except SourceProblem as e:
        verdict = Verdict(ex.name, "your answer", where)
        verdict.items.append(Item("source", False, str(e)))
        return verdict
    verdict = Verdict(ex.name, what, where)
    gap_line = None
    if what == "your code" or what.endswith("(the gap's lines)"):
        gap_line = gap_of(text)[0].count("\n") + 1
    try:
        if ex.fused:
            kern = fusion.step(ex.step, backend=where, source=text)
        else:
            kern = build(ex, where, text)
    except GemmlabError as e:
        note = _listing_note(ex, text)
        verdict.items.append(Item("compiles", False, _relabel(str(e), ex, gap_line),
                                  "" if note else "fix the first error the compiler names; the rest often follow "
                                  "from it."))
        verdict.items += note
        return verdict
    ctx = Context(ex, text, where, kern)
    finished = True
    try:
        item, ctx.report = _correctness(ex, kern)
    except ConfigError as e:  # the emulator refuses what a GPU would refuse (shared memory over its limits)
        finished = False
        item = Item("correct", False, f"the kernel cannot run on a GPU: {_relabel(str(e), ex, gap_line)}")
    except GemmlabError as e:
        # a time-out would cost the diagnosis as long again: skip it then (a crash or a detected deadlock is quick,
        # and the diagnosis says why)
        finished = "did not finish in" not in str(e)
        item = Item("correct", False, f"the kernel did not finish: {_relabel(str(e), ex, gap_line)}",
                    "an index outside an array, a barrier some threads skip, or a loop that never ends")
    verdict.items.append(item)
    if not item.passed:
        if ex.diagnose and finished:
            verdict.items += _guard(ex.diagnose, ctx)
        return verdict
    verdict.items += _guard(ex.prop, ctx)
    verdict.items += frame(ctx)
    if where == "gpu" and verdict.passed:
        verdict.items += _guard(lambda c: [_speed(ex, kern)], ctx)
    elif where != "gpu":
        verdict.items.append(Item("speed", None, f"no GPU here; on one, the check times your kernel against {ex.step}"))
    return verdict


def _listing_note(ex: Exercise, text: str) -> list[Item]:
    """A variation's answer that is the chapter's own lines for the gap (so it does not compile here): say so."""
    if not ex.variation or ex.python or not _START.search(text):
        return []

    def norm(code: str) -> str:
        return re.sub(r"\s+", "", _without_comments(code))

    if norm(gap_of(text)[1]) != norm(listing_gap(ex.name)):
        return []
    return [Item("diagnosis", None, f"these are chapter {ex.chapter_id}'s own lines (step {ex.step}), which do not fit "
                 f"this variation: it asks for {ex.summary.split(' (checks')[0]}",
                 f"read the task above the gap (exercises.show({ex.name!r})): the helpers and the data around the gap "
                 "differ from the step's, so start from the template's gap, not from the step's lines",
                 note=True)]


def _guard(fn: Callable[[Context], list[Item]], ctx: Context) -> list[Item]:
    """A property check's items; an error inside one is reported as a failed item, not raised."""
    try:
        return fn(ctx)
    except BackendError as e:  # the tool is missing or unusable here (NVRTC, say): not checked, so not a pass
        return [Item("property", None, f"could not be measured here: {e}")]
    except GemmlabError as e:
        return [Item("property", False, f"could not be measured: {e}")]


# ------------------------------------------------------------------------------------------------
# Command line (python -m gemmlab exercise ...)
# ------------------------------------------------------------------------------------------------
def add_cli_parser(sub) -> None:
    """`exercise list | start NAME | check NAME`: the chapters' checked exercises (gemmlab.exercises)."""
    p = sub.add_parser("exercise", help="the checked exercises: list, start NAME, check NAME")
    ex_sub = p.add_subparsers(dest="action", required=True)
    ex_sub.add_parser("list", help="one line each: chN/<idea>, then what it asks")
    q = ex_sub.add_parser("start", help="copy the exercise's template to ./exercises/<name>.cu to edit")
    q.add_argument("name")
    q.add_argument("--force", action="store_true", help="overwrite a copy already started")
    q = ex_sub.add_parser("check", help="check an answer; exit 0 only if it passes")
    q.add_argument("name")
    q.add_argument("--file", help="the .cu to check (default: ./exercises/<name>.cu if started, else the template)")
    q.add_argument("--backend", choices=["cpu", "gpu"])
    q.add_argument("--solution", action="store_true", help="check the course's own solution through the same path")
    q.add_argument("--hint", action="store_true", help="after the verdict, the next hint (hints come in stages; "
                   "the last one points to the solution)")


def run_cli(args) -> int:
    """`python -m gemmlab exercise ...`: 0 when the listing or the check passed, 1 when a check failed or was
    partial (a property this machine cannot measure), 2 for a bad name, file, folder, backend or options."""

    if args.action == "list":
        for e in every():
            print(e)
        return 0
    try:
        args.name = get(args.name).name  # an old name (an alias) finds its exercise too
    except ConfigError:
        print(f"error: no exercise {args.name!r}; run `python -m gemmlab exercise list` "
              f"({', '.join(names())})", file=sys.stderr)
        return 2
    try:
        if args.action == "start":
            path = started_path(args.name)
            if path.exists() and not args.force:
                print(f"{path} is already there: edit it, then `python -m gemmlab exercise check {args.name}` "
                      "(--force starts over)")
                return 0
            path = start(args.name, force=args.force)
            print(f"wrote {path}: fill in the gap between the EXERCISE and END lines, then run "
                  f"`python -m gemmlab exercise check {args.name}`")
            return 0
        if args.solution and args.file is not None:
            print("error: --solution checks the course's own solution and --file your file: give one of them",
                  file=sys.stderr)
            return 2
        file = args.file
        if file is None and not args.solution and started_path(args.name).exists():
            file = started_path(args.name)
        if file is not None and not Path(file).is_file():
            print(f"error: no file {file}", file=sys.stderr)
            return 2
        verdict = check(args.name, path=file, backend=args.backend or "auto", solution=args.solution)
        print(verdict)
        if getattr(args, "hint", False):
            print(cli_hint(args.name, verdict))
        return 0 if verdict.passed else 1
    except GemmlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


# ------------------------------------------------------------------------------------------------
# A chapter's exercise cells (tests/exercise_cells.py writes them into the notebooks, with the verdict)
# ------------------------------------------------------------------------------------------------
def notebook_cells(name: str) -> "tuple[str, str, str]":
    """The three cells of exercise `name` in its chapter: the task (markdown), the check (the template's gap to
    edit, or the Python function) and the hint cell; each tagged `checked-exercise`."""
    ex = get(name)
    if ex.python:
        what = ("Replace the failing function in the cell below with yours and run the cell. "
                + _PY_TASKS.get(name, "The check tries it on every GPU of the course's table and on a made-up GPU "
                                "that is in no table, and says what is wrong."))
        gap = gap_of(template(name))[1]
    else:
        kind = ("a variation of step `{}`: what it asks is not in the chapter's listing, so the listing pasted in "
                "fails".format(ex.step) if ex.variation else "step `{}` with a gap where this idea goes".format(ex.step))
        what = (f"The exercise is {kind}. Replace the failing code between the quotes below with yours, then run the "
                "cell. The check runs your kernel against float64 on several shapes (on the GPU, or in the CPU "
                "emulator without one), then measures what this chapter is about and says what is wrong. "
                f"`exercises.show(\"{name}\")` lists the whole kernel with the gap and the task marked.")
        gap = gap_of(template(name))[1]
    md = (f"**Checked exercise ({name}, about {ex.minutes} min).** {ex.summary[0].upper()}{ex.summary[1:]}. {what} "
          f"Stuck? Run the cell after it: each run of `exercises.hint(\"{name}\")` gives the next hint, the last one "
          f"the course's solution. On the command line: `python -m gemmlab exercise start {name}`, then "
          f"`python -m gemmlab exercise check {name}` (add `--hint` for the next hint). After a pass: {ex.after}")
    body = textwrap.dedent(gap).strip("\n")
    # Only what the reader edits: `exercises` comes with the set-up cell (as `show` does), what to do is in `md`.
    code = f"exercises.check(\"{name}\", r\"\"\"\n{textwrap.indent(body, '    ')}\n\"\"\")"
    return md, code, f"exercises.hint(\"{name}\")  # run again for the next hint"
