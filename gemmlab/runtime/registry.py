"""The one list of steps: every kernel of the course is named here, once.

Tests, plots, tables, chapter headers and the command line are generated from `STEPS`. A step is a
kernel file `kernels/<name>.cu` holding one `__global__` template; its template parameters, their
defaults and allowed values, and its launch geometry live next to it here.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import re
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from . import optional
from ..errors import ConfigError, InputError, ShapeError
from . import bounds, clusters, gpu, operands, tma
from .arch import CPU_SMEM_LIMIT, HOPPER_SMEM, STATIC_SMEM, arch_limits
from .backends import backend
from .source import REPO

MAX_PARAM = 1 << 16  # no tile, thread count or stage count comes near it; C++'s int template arguments stay safe
MAX_ELEMENTS = 2**31 - 1  # the kernels index with 32-bit ints


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Param:
    """One template parameter: its default and the values a slider may offer."""

    default: int
    choices: tuple[int, ...]
    doc: str = ""


@dataclass(frozen=True)
class Launch:
    """Launch geometry of one call: grid and block as (x, y, z), dynamic shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


Geometry = Callable[[int, int, int, dict], Launch]


class ArchRequirement:
    """What a step's `min_arch` and `arch_specific` mean, for the GEMM steps and the fused steps alike."""

    min_arch: int
    arch_specific: bool

    @property
    def arch_label(self) -> str:
        """The architecture it needs: "sm_80", or "sm_90a" for an arch-specific step."""
        return f"sm_{self.min_arch}" + ("a" if self.arch_specific else "")

    @property
    def arch_tag(self) -> str:
        """The tag a listing shows: "sm_80+" (that arch or newer), "sm_90a" (that arch only), "" (any)."""
        if not self.min_arch:
            return ""
        return self.arch_label if self.arch_specific else f"sm_{self.min_arch}+"

    def runs_on(self, cc: int) -> bool:
        """Whether a GPU of compute capability `cc` (x 10) has its instructions: exactly min_arch for an
        arch-specific step (sm_90a's wgmma is not on later GPUs), at least min_arch otherwise."""
        return cc == self.min_arch if self.arch_specific else cc >= self.min_arch

    def target(self, arch: str) -> str:
        """The NVRTC target for `arch`: sm_90 becomes sm_90a for an arch-specific step."""
        return arch + "a" if self.arch_specific and arch == f"sm_{self.min_arch}" else arch


def product64(*operands) -> np.ndarray:
    """The product of `operands`, left to right, in float64: every step's reference."""
    out = operands[0].astype(np.float64)
    with np.errstate(invalid="ignore"):  # Inf * 0 in the "inf" case: NaN, as the kernel must give
        for x in operands[1:]:
            out = out @ x.astype(np.float64)
    return out


class StepSpec(ArchRequirement):
    """What every step declares, a GEMM step's (Step: C = A B) and a fused one's (fusion.FusedStep: E = A B C): its
    name ("<track>/<NN>_<idea>"), the __global__ template's `symbol` and its `params`, the operands it takes
    (`inputs`), its float64 reference and error bound (`reference`, `compare`), and the rules of its configurations
    (`resolve`). The one runtime works from these: gemmlab.step, verify, benchmark, sweep, explore.explorer and the
    command line take either kind."""

    # What differs between the kinds of step, as data (class attributes, not dataclass fields): the runtime, the
    # check and the command line read these and never ask which kind a step is.
    inputs = ("A", "B")  # the operands, in the kernel's argument order
    output = "C"  # what the kernel writes
    dim_names = ("M", "N", "K")  # the problem's sizes, in the order a case and the kernel's arguments give them
    default_arch = "sm_75"  # the arch analysed when none is given (a T4)
    timing = "cublas"  # bench's protocol and baselines: interleaved with cuBLAS (bench.PROTOCOLS)
    bench_sizes = (4096,)  # the command line's default sizes for bench
    slider_sizes = ()  # sizes a live explorer offers (none: it reports at one size)
    counters_refusal = ""  # why `counters` does not apply (empty: it does)

    @property
    def track(self) -> str:
        return self.name.split("/")[0]

    @property
    def short(self) -> str:
        return self.name.split("/")[1]

    def name_expression(self, params: dict) -> str:
        args = ", ".join(str(params[k]) for k in self.params)
        return f"{self.symbol}<{args}>" if args else self.symbol

    def reference(self, *operands) -> np.ndarray:
        """The product of this step's operands in float64 (product64)."""
        return product64(*operands)

    def compare(self, got: np.ndarray, *operands) -> tuple[np.ndarray, np.ndarray]:
        """(bad mask, error / bound) of `got` against the float64 reference, within this step's error bound."""
        raise NotImplementedError

    def compiler_notes(self, arch: str, release: str) -> list[str]:
        """What other NVRTC releases were measured to do with this step on `arch` (none recorded by default)."""
        return []

    # --- what a kernel of this step asks of it (kernel.Kernel, check.verify) ---
    def shape_text(self, dims: tuple) -> str:
        """A case's sizes as a report prints them."""
        return " ".join(f"{name}={d}" for name, d in zip(self.dim_names, dims))

    def check_countable(self) -> None:
        """A ConfigError where the emulator's counters do not apply to this step."""
        if self.counters_refusal:
            raise ConfigError(self.counters_refusal.format(name=self.name))

    def blocks(self, kern, dims: tuple, grid: int | None = None) -> int:
        """Blocks one launch of `kern` on a problem of `dims` starts."""
        return self.launch_for(kern, dims, grid).grid[0]

    def against_baseline(self, record: dict) -> float:
        """What a figure shows of a record against its baseline: % of cuBLAS (a fused step: the speed-up)."""
        return record["pct_of_baseline"]

    def fit_block(self, params: dict, size: int) -> tuple[int, int]:
        """(threads, dynamic shared bytes) of one block on a size^3 problem (size^4 for E = A B C)."""
        launch = self.launch_for(None, (size,) * len(self.dim_names), None, params)
        return launch.threads, launch.shared_bytes


@dataclass(frozen=True)
class Step(StepSpec):
    name: str  # "<track>/<NN>_<idea>", also the file kernels/<name>.cu
    symbol: str  # the __global__ template's name
    params: dict[str, Param]  # in template-argument order
    geometry: Geometry
    chapter: int | str  # the chapter that teaches it: 7, or "7c" for a lettered one
    summary: str  # the one idea this step adds
    previous: str | None = None
    dtype: str = "float32"  # inputs and output (fp16 steps accumulate in fp32 unless told otherwise)
    accumulate: str = "float32"
    min_arch: int = 0  # compute capability x 10 that the step's instructions need (75, 80)
    rules: Callable[[dict], list[str]] = field(default=lambda p: [])  # why a configuration cannot run
    # Compiled for sm_{min_arch}a (wgmma, setmaxnreg): runs on that architecture only, not on later ones.
    arch_specific: bool = False
    shape_rule: Callable[[int, int, int], str] = field(default=lambda m, n, k: "")  # why a shape cannot run
    shape_multiple: int = 1  # N and K must be multiples of this (what shape_rule enforces): for verify's shapes
    fixed_tile: dict = field(default_factory=dict)  # tile sizes that are constants, not parameters (step 08's)
    # Arguments after (M, N, K, A, B, C), from (backend, a, b, c, params): step 08's tensor maps.
    extra_args: Callable | None = None
    # Spills measured at the default parameters with NVRTC releases other than the pinned one, as
    # {(arch, release): (store bytes, load bytes)}: a T4 claim that holds with one compiler only says so.
    other_nvrtc_spills: dict = field(default_factory=dict)
    path: str = ""  # the kernel file (from the repository root) when it is not kernels/<name>.cu: a lab kernel
    # Shapes verify checks beyond check.default_cases, from (params, backend): (kind, M, N, K) tuples; hgemm/12's
    # shapes whose tiles outnumber the live GPU's SMs, so that its last wave is shared out.
    more_cases: Callable[[dict, str], list] = field(default=lambda p, backend: [])

    def compiler_notes(self, arch: str, release: str) -> list[str]:
        """What NVRTC releases other than `release` were measured to spill on `arch` (default parameters),
        one note per amount: "spills 68/84 B (stores/loads) with NVRTC 12.8 and 13.0"."""
        by_amount: dict[tuple, list[str]] = {}
        for (a, rel), amount in self.other_nvrtc_spills.items():
            if a == arch.removesuffix("a") and rel != release:
                by_amount.setdefault(tuple(amount), []).append(rel)
        return [f"spills {st}/{ld} B (stores/loads) with NVRTC {' and '.join(rels)}"
                for (st, ld), rels in by_amount.items()]

    @property
    def file(self) -> str:
        return self.path or f"kernels/{self.name}.cu"

    def compare(self, got: np.ndarray, *operands) -> tuple[np.ndarray, np.ndarray]:
        """C = A B against float64, the bound of `accumulate`'s rounding over K (bounds.compare)."""
        return bounds.compare(got, *operands, self.accumulate)

    def resolve(self, overrides: dict, target: str | None = None) -> dict:
        """Defaults overridden by `overrides`; unknown names and impossible values raise ConfigError. `target`: whose
        limits judge them, for a fused step (FusedStep.resolve); a GEMM step's rules are the same everywhere."""
        params = resolve_params(self.name, self.params, overrides)
        problems = self.rules(params)
        if problems:
            raise ConfigError(f"{self.name} cannot run with {params}: " + "; ".join(problems) + ".")
        return params

    def launch(self, m: int, n: int, k: int, params: dict) -> Launch:
        return self.geometry(m, n, k, params)

    # --- C = A B: its problem, launch, arguments and cases (StepSpec's interface) ---
    def problem(self, shapes: list) -> tuple:
        """(M, N, K) of A's and B's shapes; an InputError when they do not multiply."""
        (m, k), (k2, n) = shapes
        if k != k2:
            raise InputError(f"shapes do not match: A is {m}x{k} and B is {k2}x{n}; A's columns must equal B's rows")
        return (m, n, k)

    def product_text(self, dims: tuple) -> str:
        m, n, k = dims
        return f"A ({m}x{k}) times B ({k}x{n})"

    def output_shape(self, dims: tuple) -> tuple[int, int]:
        return (dims[0], dims[1])

    def check_dims(self, dims: tuple, params: dict, target: str | None = None) -> None:
        check_shape(self, *dims)

    def work(self, dims: tuple) -> int:
        """Multiply-adds of one call (what the emulator's time limit scales with)."""
        m, n, k = dims
        return m * n * k

    def launch_for(self, kern, dims: tuple, grid: int | None = None, params: dict | None = None) -> Launch:
        if grid is not None:
            raise ConfigError(f"grid={grid!r} applies to a persistent fused step only; {self.name}'s geometry sets "
                              f"its own grid: leave grid out")
        return self.geometry(*dims, kern.params if params is None else params)

    def arguments(self, kern, arrays: tuple, grid: int | None = None) -> tuple[Launch, list]:
        """The launch and the kernel's arguments: M, N, K, A, B, C and the step's extra ones (tensor maps)."""
        a, b, c = arrays
        dims = (a.shape[0], b.shape[1], a.shape[1])
        extra = self.extra_args(kern.backend, a, b, c, kern.params) if self.extra_args else []
        return self.launch_for(kern, dims, grid), [*map(np.int32, dims), a, b, c, *extra]

    def cases(self, params: dict, backend: str) -> list[tuple[str, tuple]]:
        """verify's cases (kind, (M, N, K)): operands.gemm_cases around the tile, then the step's own more_cases."""
        return (operands.gemm_cases({**self.fixed_tile, **params}, self.shape_multiple)
                + [(kind, tuple(dims)) for kind, *dims in self.more_cases(params, backend)])

    def make_inputs(self, kind: str, dims: tuple, seed: int = 0) -> tuple:
        return operands.gemm_inputs(kind, *dims, self.dtype, seed)

    def shape_text(self, dims: tuple) -> str:
        return "x".join(map(str, dims))


def resolve_params(name: str, specs: dict[str, Param], overrides: dict) -> dict:
    """The one check of template parameters, for the GEMM and the fused steps alike: `specs`' defaults
    overridden by `overrides`, each a whole number from 1 to MAX_PARAM; a ConfigError names what is
    wrong (an unknown name, 0, -4, 8.9, True, 'abc', None) and which values are allowed. The step's
    own rules run after it, on values they can divide by."""
    unknown = set(overrides) - set(specs)
    if unknown:
        raise ConfigError(f"{name} has no template parameter {sorted(unknown)}; its parameters are {list(specs)}.")
    params = {}
    for k, p in specs.items():
        v = overrides.get(k, p.default)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_PARAM:
            raise ConfigError(f"{name}: {k}={v!r} is not allowed; a template parameter is a whole number from 1 "
                              f"to {MAX_PARAM} (the sliders offer {', '.join(map(str, p.choices))}).")
        params[k] = int(v)
    return params


def _threads_rule(threads: Callable[[dict], int]) -> Callable[[dict], list[str]]:
    def rule(p: dict) -> list[str]:
        t = threads(p)
        return [f"a block of {t} threads exceeds the hardware limit of 1024"] if t > 1024 else []
    return rule


def _all(*rules):
    return lambda p: [msg for r in rules for msg in r(p)]


def _divides(a: str, b: str, why: str = ""):
    return lambda p: [] if p[b] % p[a] == 0 else [f"{a}={p[a]} must divide {b}={p[b]}{why}"]


def mma_tiling_rules(mma_m: int, mma_n: int, mma_k: int, buffers: int = 1, smem_limit: int = STATIC_SMEM,
                      smem_what: str = "static shared memory, over the 48 KB limit"):
    """mma_* are the granules one ldmatrix x4 feeds (16x16 of A, 16(k)x16(n) of B through .trans);
    `buffers` copies of the A and B tiles (NUM_STAGES copies where that is a parameter) must fit
    `smem_limit` bytes."""
    def rule(p: dict) -> list[str]:
        out = []
        for tile, warp in (("BLOCK_M", "WARP_M"), ("BLOCK_N", "WARP_N")):
            if p[tile] % p[warp]:
                out.append(f"{warp}={p[warp]} must divide {tile}={p[tile]} (whole warp tiles per block tile)")
        if p["WARP_M"] % mma_m or p["WARP_N"] % mma_n:
            out.append(f"the warp tile {p['WARP_M']}x{p['WARP_N']} must be a multiple of "
                       f"{mma_m}x{mma_n} (one ldmatrix.x4 loads 16 rows of A and 16 columns of B)")
        if p["WARP_M"] * p["WARP_N"] > 64 * 64:
            out.append(f"a {p['WARP_M']}x{p['WARP_N']} warp tile holds {p['WARP_M'] * p['WARP_N'] // 32} fp32 "
                       "accumulators per thread, more than the 255 registers a thread has (limit 64x64)")
        if p["BLOCK_K"] % mma_k:
            out.append(f"BLOCK_K={p['BLOCK_K']} must be a multiple of {mma_k} (one ldmatrix.x4 covers k=16)")
        warps = (p["BLOCK_M"] // max(p["WARP_M"], 1)) * (p["BLOCK_N"] // max(p["WARP_N"], 1))
        if warps * 32 > 1024:
            out.append(f"{warps} warps = {warps * 32} threads exceed the limit of 1024 per block")
        copies = p.get("NUM_STAGES", buffers)
        smem = copies * 2 * (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"]
        if smem > smem_limit:
            out.append(f"{copies} buffer(s) of the A and B tiles need {smem} bytes of {smem_what}")
        if copies < 1 or ("NUM_STAGES" in p and copies < 2):
            out.append("NUM_STAGES must be at least 2 (one tile computed while the next is in flight)")
        return out
    return rule


def _naive_geometry(row_from_x: bool) -> Geometry:
    def geometry(m, n, k, p):
        bx, by = p["BLOCK_X"], p["BLOCK_Y"]
        grid = (cdiv(m, bx), cdiv(n, by), 1) if row_from_x else (cdiv(n, bx), cdiv(m, by), 1)
        return Launch(grid, (bx, by, 1))
    return geometry


_BLOCK_XY = {"BLOCK_X": Param(32, (1, 2, 4, 8, 16, 32, 64, 128, 256), "threads along x"),
             "BLOCK_Y": Param(32, (1, 2, 4, 8, 16, 32, 64, 128, 256), "threads along y")}
_xy_threads = _threads_rule(lambda p: p["BLOCK_X"] * p["BLOCK_Y"])


def _is_power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _swizzle_rule(p):
    """hgemm/03 on: the A and B tiles' rows are XOR-swizzled in 16-byte chunks, which needs power-of-two widths."""
    return [f"{x}={p[x]} must be a power of two of at least 16 (the XOR swizzle of the shared tile's rows)"
            for x in ("BLOCK_K", "BLOCK_N") if p[x] < 16 or not _is_power_of_two(p[x])]


def _xor_advance_rule(p):
    """hgemm/05 on: swizzled addresses are advanced by XOR with constants, which needs a power-of-two WARP_N."""
    return [] if _is_power_of_two(p["WARP_N"]) else [
        f"WARP_N={p['WARP_N']} must be a power of two (swizzled addresses are advanced by XOR)"]


def _mma_geometry(m, n, k, p):
    warps = (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"])
    return Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, p["BLOCK_M"]), 1), (32 * warps, 1, 1))


def _mma_buffers_bytes(p):
    """Dynamic shared memory of the multi-buffered hgemm steps: NUM_STAGES (default 2) A and B tiles."""
    return p.get("NUM_STAGES", 2) * 2 * (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"]


def _mma_dynamic_geometry(m, n, k, p):
    g = _mma_geometry(m, n, k, p)
    return Launch(g.grid, g.block, _mma_buffers_bytes(p))


def _mma_copy_rule(p):
    """Steps 05+ give each thread whole columns of 16-byte chunks (one row step apart)."""
    t = 32 * (p["BLOCK_M"] // max(p["WARP_M"], 1)) * (p["BLOCK_N"] // max(p["WARP_N"], 1))
    if t % max(p["BLOCK_K"] // 8, 1) == 0 and t % max(p["BLOCK_N"] // 8, 1) == 0:
        return []
    return [f"BLOCK_K/8 and BLOCK_N/8 must divide the {t} threads (each thread copies one column of 16-byte chunks)"]


def _tile_geometry(threads: Callable[[dict], int]) -> Geometry:
    """Block tiles of BLOCK_M x BLOCK_N over C, a 1-D block of `threads(params)` threads."""
    return lambda m, n, k, p: Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, p["BLOCK_M"]), 1), (threads(p), 1, 1))


def _threads_1d(p): return p["BLOCK_M"] // p["THREAD_M"] * p["BLOCK_N"]
def _threads_2d(p): return (p["BLOCK_M"] // p["THREAD_M"]) * (p["BLOCK_N"] // p["THREAD_N"])
def _threads_warps(p): return (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32


def _smem_rule(buffers: int):
    def rule(p):
        need = buffers * 4 * (p["BLOCK_M"] * p["BLOCK_K"] + p["BLOCK_K"] * p["BLOCK_N"])
        return [] if need <= STATIC_SMEM else [f"{buffers} buffer(s) of the A and B tiles need {need} bytes, "
                                              "over the 48 KB of static shared memory"]
    return rule


def _multiple_of_4(*names):
    return lambda p: [f"{x}={p[x]} must be a multiple of 4 (float4 accesses)" for x in names if p[x] % 4]


def _warp_holds_32_thread_tiles(p):
    ok = p["WARP_M"] % p["THREAD_M"] == 0 and p["WARP_N"] % p["THREAD_N"] == 0
    if ok and (p["WARP_M"] // p["THREAD_M"]) * (p["WARP_N"] // p["THREAD_N"]) == 32:
        return []
    return [f"a {p['WARP_M']}x{p['WARP_N']} warp tile must hold exactly 32 thread tiles of "
            f"{p['THREAD_M']}x{p['THREAD_N']}"]


def _staging_rule(p):
    t = _threads_warps(p)
    if t % max(p["BLOCK_K"] // 4, 1) == 0 and t % max(p["BLOCK_N"] // 4, 1) == 0:
        return []
    return [f"BLOCK_K/4 and BLOCK_N/4 must divide the {t} threads (each thread stages whole float4 columns)"]


def _accumulator_rule(p):
    acc = p["THREAD_M"] * p["THREAD_N"]
    return [] if acc <= 128 else [f"{acc} accumulators per thread would spill out of the 255 registers (limit 128)"]


_REG_TILING = {"BLOCK_M": Param(128, (16, 32, 64, 128, 256)), "BLOCK_N": Param(128, (16, 32, 64, 128, 256)),
               "BLOCK_K": Param(8, (4, 8, 16, 32)), "THREAD_M": Param(8, (1, 2, 4, 8, 16)),
               "THREAD_N": Param(8, (1, 2, 4, 8, 16))}
_WARP_TILING = {"BLOCK_M": Param(128, (32, 64, 128, 256)), "BLOCK_N": Param(128, (32, 64, 128, 256)),
                "BLOCK_K": Param(8, (4, 8, 16, 32)), "WARP_M": Param(64, (16, 32, 64, 128)),
                "WARP_N": Param(32, (16, 32, 64, 128)), "THREAD_M": Param(8, (4, 8, 16)),
                "THREAD_N": Param(8, (4, 8, 16))}
_rules_2d = _all(_divides("THREAD_M", "BLOCK_M"), _divides("THREAD_N", "BLOCK_N"), _threads_rule(_threads_2d),
                 _smem_rule(1), _accumulator_rule)
rules_warps = lambda buffers: _all(  # noqa: E731
    _divides("WARP_M", "BLOCK_M"), _divides("WARP_N", "BLOCK_N"), _multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"),
    _warp_holds_32_thread_tiles, _staging_rule, _threads_rule(_threads_warps), _smem_rule(buffers), _accumulator_rule)



def _pipeline_bytes(p):
    """NUM_STAGES copies of sA (BLOCK_M rows of BLOCK_K + 4 floats, padded) and sB (BLOCK_K x BLOCK_N)."""
    return p["NUM_STAGES"] * 4 * (p["BLOCK_M"] * (p["BLOCK_K"] + 4) + p["BLOCK_K"] * p["BLOCK_N"])


def _stages_rule(p):
    need = _pipeline_bytes(p)
    out = [] if need <= HOPPER_SMEM else [f"{p['NUM_STAGES']} stages need {need} bytes of shared memory, over the "
                                         "227 KB a block may have on sm_90 (163 KB on sm_80)"]
    return out + ([] if p["NUM_STAGES"] >= 2 else ["NUM_STAGES must be at least 2"])



_MMA_TILING = {"BLOCK_M": Param(128, (32, 64, 128, 256)), "BLOCK_N": Param(128, (32, 64, 128, 256)),
               "BLOCK_K": Param(32, (16, 32, 64)), "WARP_M": Param(64, (16, 32, 64, 128)),
               "WARP_N": Param(64, (16, 32, 64, 128))}

def tf32x3_tile_rules(p):
    """The warp tiling of the 3xTF32 kernels (sgemm/12 and fused/05): whole warp tiles, the 16 x 8 x 8
    TF32 mma's multiples, and a register budget for the accumulators, their chunk and the fragments."""
    out = []
    if p["BLOCK_M"] % p["WARP_M"] or p["BLOCK_N"] % p["WARP_N"]:
        out.append(f"WARP_M x WARP_N = {p['WARP_M']} x {p['WARP_N']} must divide BLOCK_M x BLOCK_N = "
                   f"{p['BLOCK_M']} x {p['BLOCK_N']} (whole warp tiles)")
    if p["WARP_M"] % 16 or p["WARP_N"] % 8 or p["BLOCK_K"] % 8:
        out.append("WARP_M must be a multiple of 16, WARP_N and BLOCK_K multiples of 8 (the 16 x 8 x 8 TF32 mma)")
    acc = (p["WARP_M"] // 16) * (p["WARP_N"] // 8) * 4
    # accumulators, the K tile's chunk of them, both TF32 parts of each fragment
    held = 2 * acc + 2 * (p["WARP_M"] // 16 * 4 + p["WARP_N"] // 8 * 2)
    if held > 192:
        out.append(f"a {p['WARP_M']} x {p['WARP_N']} warp tile holds {2 * acc} accumulators (sum and chunk) and "
                   f"{held - 2 * acc} fragment registers per lane: {held} > 192, it would spill out of the 255 "
                   f"registers (64 x 64 does)")
    return out


def _tf32x3_bytes(p):
    """sgemm/12's dynamic shared memory: NUM_STAGES stages of sA (padded rows) and sB (padded rows)."""
    return p["NUM_STAGES"] * 4 * (p["BLOCK_M"] * (p["BLOCK_K"] + 4) + p["BLOCK_K"] * (p["BLOCK_N"] + 8))


def _tf32x3_step_rules(p):
    out = tf32x3_tile_rules(p)
    if p["NUM_STAGES"] < 2:
        out.append("NUM_STAGES must be at least 2")
    if _threads_warps(p) > 1024:
        out.append(f"a block of {_threads_warps(p)} threads exceeds the hardware limit of 1024")
    if _tf32x3_bytes(p) > HOPPER_SMEM:
        out.append(f"{p['NUM_STAGES']} stages need {_tf32x3_bytes(p)} bytes of shared memory, over the 227 KB a "
                   "block may have on sm_90 (163 KB on sm_80)")
    return out


def _wgmma_bytes(p):
    """NUM_STAGES stages of A (128 x 64) and B (64 x BLOCK_N) halves, 1024 for alignment, the mbarriers."""
    return p["NUM_STAGES"] * (128 + p["BLOCK_N"]) * 64 * 2 + 1024 + 16 * p["NUM_STAGES"]


def _wgmma_rules(p):
    out = [] if p["BLOCK_N"] in (128, 256) else [f"BLOCK_N={p['BLOCK_N']} must be 128 or 256 (the wgmma's N)"]
    if p["GROUP_M"] < 1:
        out.append(f"GROUP_M={p['GROUP_M']} must be at least 1")
    if _wgmma_bytes(p) > HOPPER_SMEM:
        out.append(f"{p['NUM_STAGES']} stages need {_wgmma_bytes(p)} bytes of shared memory, over the 227 KB "
                   "a block may have on sm_90")
    return out + ([] if p["NUM_STAGES"] >= 2 else ["NUM_STAGES must be at least 2"])


def _persistent_grid(m, n, p) -> int:
    """One block per SM (of the live GPU; an H100's 132 without one), at most one per tile."""
    sms = gpu.device()["sms"] if gpu.available() else 132
    return max(1, min(sms, cdiv(m, 128) * cdiv(n, p["BLOCK_N"])))


def _cluster_grid(m, n, p, shared=None) -> int:
    """The clusters lab kernels: whole clusters of CLUSTER_M blocks, one block per SM, at most one per cluster tile;
    `shared(p)`: the block's shared memory (default _wgmma_bytes), which decides how many clusters fit."""
    sms = gpu.device()["sms"] if gpu.available() else 132
    c = p["CLUSTER_M"]
    resident = sms // c
    if gpu.available():  # fewer when a GPC's SMs do not divide into whole clusters (gemmlab/runtime/clusters.py)

        resident = min(resident, clusters.max_active(c, 384, (shared or _wgmma_bytes)(p)) or resident)
    return c * max(1, min(resident, cdiv(m, 128 * c) * cdiv(n, p["BLOCK_N"])))


def _cluster_rules(p):
    return _wgmma_rules(p) + _cluster_only_rules(p)


def _cluster_only_rules(p):
    """What clusters along M add to a Hopper step's rules (the lab's cluster kernels)."""
    out = []
    if p["CLUSTER_M"] not in (1, 2, 4):
        out.append(f"CLUSTER_M={p['CLUSTER_M']} must be 1, 2 or 4 (blocks per cluster along M)")
    elif (p["BLOCK_N"] // 64) % p["CLUSTER_M"]:
        out.append(f"CLUSTER_M={p['CLUSTER_M']} must divide the {p['BLOCK_N'] // 64} 64-column boxes of the "
                   f"B tile (BLOCK_N={p['BLOCK_N']}): each block multicasts the same share")
    if p["GROUP_M"] % p["CLUSTER_M"]:
        out.append(f"GROUP_M={p['GROUP_M']} must be a multiple of CLUSTER_M={p['CLUSTER_M']} (a band holds whole "
                   "clusters)")
    return out


def _tma_shape_rule(m, n, k):
    if k % 8 or n % 8:
        return (f"K={k} and N={n} must be multiples of 8: TMA reads rows whose stride is a multiple of 16 bytes "
                "(8 halves). Pad the matrices, or use hgemm/07_cp_async, which takes any shape")
    return ""


def _wgmma_tensor_maps(backend, a, b, c, p):
    return [tma.tensor_map(backend, a, 3, 128, 64), tma.tensor_map(backend, b, 4, 64, 64)]


def _hopper_bytes(stages: int, barriers: int):
    """The Hopper track's shared memory: `stages` stages of A (128 x 64) and B (64 x BLOCK_N) halves, 1024 for
    alignment, `barriers` mbarriers (8 bytes each, 16 apiece as hgemm/08 counts them)."""
    return lambda p: stages * (128 + p["BLOCK_N"]) * 64 * 2 + 1024 + 8 * barriers


def _one_stage_rules(p):
    """hopper/01 and 02's rules: hgemm/08's, less the stages (one stage: 48 KB at most)."""
    return [r for r in _wgmma_rules({**p, "NUM_STAGES": 2}) if "stages" not in r and "NUM_STAGES" not in r]


def _copy16_shape_rule(m, n, k):
    if k % 8 or n % 8:
        return (f"K={k} and N={n} must be multiples of 8: the threads copy rows 16 bytes (8 halves) at a time, "
                "which needs 16-byte row strides. Pad the matrices, or use hgemm/07_cp_async, which takes any shape")
    return ""


def _hopper_launch(threads: int, shared):
    """hgemm/08's grid (one block per 128 x BLOCK_N tile of C), `threads` per block, `shared(p)` bytes."""
    return lambda m, n, k, p: Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, 128), 1), (threads, 1, 1), shared(p))


def _tma_store_bytes(p):
    """Step 10: 09's shared memory and STORE_BUFS staging boxes of C (64 x 64 halves) per consumer warpgroup."""
    return _wgmma_bytes(p) + 2 * p["STORE_BUFS"] * 64 * 64 * 2


def _tma_store_rules(p):
    out = [m for m in _wgmma_rules(p) if "227 KB" not in m]
    if _tma_store_bytes(p) > HOPPER_SMEM:
        out.append(f"{p['NUM_STAGES']} stages and {p['STORE_BUFS']} staging buffers per warpgroup need "
                   f"{_tma_store_bytes(p)} bytes of shared memory, over the 227 KB a block may have on sm_90 "
                   "(NUM_STAGES=4 takes STORE_BUFS up to 2, NUM_STAGES=3 up to 4)")
    return out


def _tma_store_tensor_maps(backend, a, b, c, p):
    return _wgmma_tensor_maps(backend, a, b, c, p) + [tma.tensor_map(backend, c, 5, 64, 64)]


_MMA_TUNED = {**_MMA_TILING, "BLOCK_M": Param(256, (32, 64, 128, 256))}
# T4 (sm_75) has 64 KB of shared memory per block; a step meant to run there must fit it.
_T4_DYNAMIC = dict(smem_limit=64 * 1024, smem_what="shared memory, over the 64 KB a T4 block may have")

# The Hopper steps' parameters (hgemm/08 on; the lab's cluster kernels add theirs).
_WGMMA_PARAMS = {"BLOCK_N": Param(256, (128, 256), "columns per block tile (one wgmma m64nBLOCK_Nk16)"),
                 "NUM_STAGES": Param(4, (2, 3, 4, 5, 6)),
                 "GROUP_M": Param(16, (1, 2, 4, 8, 16, 32), "block rows per band of the tile order (1: row-major)")}
_STORE_BUFS = Param(2, (1, 2, 4), "64 x 64 staging boxes of C per consumer warpgroup (a ring)")
_CLUSTER_M = Param(2, (1, 2, 4), "blocks per cluster along M, sharing each B tile by TMA multicast")
_CLUSTER_GROUP_M = Param(16, (1, 2, 4, 8, 16, 32), "block rows per band of the tile order (a multiple of CLUSTER_M)")


def _persistent_launch(shared):
    """One block of 384 threads per SM (a persistent grid), `shared(p)` bytes of dynamic shared memory."""
    return lambda m, n, k, p: Launch((_persistent_grid(m, n, p), 1, 1), (384, 1, 1), shared(p))


def _tma_store_step(name: str, symbol: str, previous: str, summary: str, more_params: dict | None = None,
                    extra_args: Callable = _tma_store_tensor_maps, **more) -> Step:
    """A Hopper step whose epilogue stores C through shared memory and TMA (hgemm/10 on): a persistent grid, the
    wgmma parameters and STORE_BUFS (and `more_params`), the C tensor map beside A's and B's (and what
    `extra_args` adds after them)."""
    return Step(name, symbol, {**_WGMMA_PARAMS, "STORE_BUFS": _STORE_BUFS, **(more_params or {})},
                _persistent_launch(_tma_store_bytes),
                chapter=7, dtype="float16", min_arch=90, arch_specific=True, previous=previous, summary=summary,
                rules=_tma_store_rules, shape_rule=_tma_shape_rule, shape_multiple=8,
                fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}, extra_args=extra_args, **more)


_MAX_SPLIT = Param(4, (1, 2, 4, 8), "blocks that may share one tile of the last wave (1: whole tiles, as 11)")
_MIN_GAIN = Param(16, (1, 8, 16, 32), "k tiles of idle time per block that sharing must save (it costs about 8)")
_stream_k_workspaces: dict = {}


def stream_k_workspace(backend: str, m: int, n: int, p: dict):
    """hgemm/12's `partials` (a slot of 128 x BLOCK_N floats per block of the grid) and `flags` (two words per
    block, zero: each launch leaves them so). On the GPU made once per device and size, and kept: allocating
    per launch would show in the timings; launches that share it must not run at the same time."""
    grid = _persistent_grid(m, n, p)
    shapes = ((grid * 128 * p["BLOCK_N"],), (2 * grid,))
    if backend != "gpu":  # the emulator copies arrays per launch: fresh ones cost nothing
        return np.zeros(shapes[0], np.float32), np.zeros(shapes[1], np.uint32)
    cupy = optional.module("cupy")

    key = (cupy.cuda.Device().id, shapes)
    if key not in _stream_k_workspaces:
        if len(_stream_k_workspaces) > 8:
            _stream_k_workspaces.clear()
        _stream_k_workspaces[key] = (cupy.zeros(shapes[0], np.float32), cupy.zeros(shapes[1], np.uint32))
    return _stream_k_workspaces[key]


def _stream_k_cases(p: dict, backend: str) -> list:
    """On a GPU: a shape off the tile grid with about 1.2 tiles per SM and enough k tiles that sharing saves
    MIN_GAIN (random, then with an Inf), so that the last wave is shared out, each tile among up to MAX_SPLIT
    blocks. None on the CPU backend, whose grid is an H100's 132 blocks: tests/test_stream_k.py runs it there
    as a GPU with a few SMs."""
    if backend != "gpu":
        return []
    sms = gpu.device()["sms"]
    tiles_n = 12
    tiles_m = cdiv(sms + sms // 5, tiles_n)
    tiles_m += (tiles_m * tiles_n) % sms == 0
    k_tiles = cdiv(p["MIN_GAIN"] * sms, sms - tiles_m * tiles_n % sms) + 1
    m, n, k = 128 * (tiles_m - 1) + 3, p["BLOCK_N"] * (tiles_n - 1) + 8, 64 * (k_tiles - 1) + 8
    return [("random", m, n, k), ("inf", m, n, k)]


def _stream_k_args(backend, a, b, c, p):
    return _tma_store_tensor_maps(backend, a, b, c, p) + list(stream_k_workspace(backend, a.shape[0], b.shape[1], p))


STEPS: list[Step] = [
    Step("sgemm/01_naive", "sgemm_naive", _BLOCK_XY, _naive_geometry(row_from_x=True), chapter=2,
         summary="one thread per element of C; threadIdx.x walks down a column", rules=_xy_threads),
    Step("sgemm/02_coalesced", "sgemm_coalesced", _BLOCK_XY, _naive_geometry(row_from_x=False), chapter=2,
         previous="sgemm/01_naive", summary="threadIdx.x walks along a row: a warp's loads coalesce",
         rules=_xy_threads),
    Step("sgemm/03_smem_tiling", "sgemm_smem_tiling",
         {"BLOCK": Param(32, (4, 8, 16, 32), "square tile edge = threads per block edge")},
         lambda m, n, k, p: Launch((cdiv(n, p["BLOCK"]), cdiv(m, p["BLOCK"]), 1), (p["BLOCK"], p["BLOCK"], 1)),
         chapter=3, previous="sgemm/02_coalesced",
         summary="stage BLOCK x BLOCK tiles of A and B in shared memory, slide them along K",
         rules=_threads_rule(lambda p: p["BLOCK"] ** 2)),
    Step("sgemm/04_1d_blocktiling", "sgemm_1d_blocktiling",
         {"BLOCK_M": Param(64, (8, 16, 32, 64, 128)), "BLOCK_N": Param(64, (8, 16, 32, 64, 128)),
          "BLOCK_K": Param(8, (4, 8, 16, 32)), "THREAD_M": Param(8, (1, 2, 4, 8, 16))},
         _tile_geometry(_threads_1d), chapter=4, previous="sgemm/03_smem_tiling",
         summary="each thread computes THREAD_M results of a column from one loaded B value",
         rules=_all(_divides("THREAD_M", "BLOCK_M"), _threads_rule(_threads_1d), _smem_rule(1))),
    Step("sgemm/05_2d_blocktiling", "sgemm_2d_blocktiling", _REG_TILING, _tile_geometry(_threads_2d), chapter=4,
         previous="sgemm/04_1d_blocktiling", summary="each thread computes a THREAD_M x THREAD_N tile from registers",
         rules=_rules_2d),
    Step("sgemm/06_vectorized", "sgemm_vectorized",
         {**_REG_TILING, "THREAD_M": Param(8, (4, 8, 16)), "THREAD_N": Param(8, (4, 8, 16))},
         _tile_geometry(_threads_2d), chapter=4, previous="sgemm/05_2d_blocktiling",
         summary="float4 global loads and stores, A stored transposed (M-major) for 128-bit shared loads",
         rules=_all(_rules_2d, _multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"))),
    Step("sgemm/07_warptiling", "sgemm_warptiling", _WARP_TILING, _tile_geometry(_threads_warps), chapter=4,
         previous="sgemm/06_vectorized", summary="block tile -> warp tile -> thread tile: conflict-free shared reads",
         rules=rules_warps(1)),
    Step("sgemm/08_register_prefetch", "sgemm_register_prefetch", {**_WARP_TILING, "BLOCK_K": Param(16, (4, 8, 16, 32))},
         _tile_geometry(_threads_warps), chapter=6, previous="sgemm/07_warptiling",
         summary="issue the next tile's global loads into registers before computing this one",
         rules=rules_warps(1)),
    Step("sgemm/09_double_buffer", "sgemm_double_buffer", {**_WARP_TILING, "BLOCK_K": Param(16, (4, 8, 16, 32))},
         _tile_geometry(_threads_warps), chapter=6, previous="sgemm/08_register_prefetch",
         summary="two shared-memory buffers: one barrier per K tile instead of two",
         rules=rules_warps(2),
         # NVRTC 12.8.93 (Colab's CUDA 12.8) and 13.0.88: 128 registers (the __launch_bounds__ cap), 72 B
         # stack; the pinned 13.5: 128 registers, no spills
         other_nvrtc_spills={("sm_75", "12.8"): (68, 84), ("sm_75", "13.0"): (68, 84)}),
    Step("sgemm/10_cp_async", "sgemm_cp_async",
         {**_WARP_TILING, "BLOCK_K": Param(16, (4, 8, 16, 32)), "NUM_STAGES": Param(3, (2, 3, 4, 5))},
         lambda m, n, k, p: Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, p["BLOCK_M"]), 1), (_threads_warps(p), 1, 1),
                                   _pipeline_bytes(p)),
         chapter=6, previous="sgemm/09_double_buffer", min_arch=80,
         summary="a NUM_STAGES-deep cp.async pipeline fills shared memory without staging registers",
         rules=_all(_divides("WARP_M", "BLOCK_M"), _divides("WARP_N", "BLOCK_N"), _multiple_of_4("THREAD_N", "BLOCK_K"),
                    _warp_holds_32_thread_tiles, _staging_rule, _threads_rule(_threads_warps), _accumulator_rule,
                    _stages_rule)),
    Step("sgemm/11_fragment_prefetch", "sgemm_fragment_prefetch",
         {**_WARP_TILING, "BLOCK_N": Param(256, (32, 64, 128, 256)), "BLOCK_K": Param(16, (4, 8, 16, 32)),
          "WARP_N": Param(64, (16, 32, 64, 128)), "THREAD_N": Param(16, (4, 8, 16))},
         _tile_geometry(_threads_warps), chapter=6, previous="sgemm/09_double_buffer",
         summary="the next k step's slivers are loaded from shared memory while this step's FMAs run",
         rules=rules_warps(2)),
    Step("sgemm/12_tf32x3", "sgemm_tf32x3",
         {"BLOCK_M": Param(128, (32, 64, 128, 256)), "BLOCK_N": Param(128, (32, 64, 128, 256)),
          "BLOCK_K": Param(32, (8, 16, 32)), "WARP_M": Param(64, (16, 32, 64)),
          "WARP_N": Param(32, (8, 16, 32, 64)), "NUM_STAGES": Param(4, (2, 3, 4, 5))},
         lambda m, n, k, p: Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, p["BLOCK_M"]), 1), (_threads_warps(p), 1, 1),
                                   _tf32x3_bytes(p)),
         chapter=7, previous="sgemm/11_fragment_prefetch", min_arch=80,
         summary="sm_80+: the multiply-adds on the tensor cores at fp32 accuracy (3xTF32), a cp.async pipeline",
         rules=_tf32x3_step_rules),
    Step("hgemm/01_mma_tiling", "hgemm_mma_tiling", _MMA_TILING,
         _mma_geometry, chapter=7, dtype="float16", min_arch=75,
         summary="block tile in shared memory, warp tile, mma.sync m16n8k8 tile, loaded with ldmatrix",
         rules=mma_tiling_rules(16, 16, 16)),
    Step("hgemm/02_vectorized_copy", "hgemm_vectorized_copy", _MMA_TILING, _mma_geometry, chapter=7,
         dtype="float16", min_arch=75, previous="hgemm/01_mma_tiling",
         summary="16-byte global-to-shared copies in fully unrolled loops",
         rules=mma_tiling_rules(16, 16, 16)),
    Step("hgemm/03_swizzled", "hgemm_swizzled", _MMA_TILING, _mma_geometry, chapter=7,
         dtype="float16", min_arch=75, previous="hgemm/02_vectorized_copy",
         summary="XOR-swizzled shared tiles: ldmatrix reads one wavefront per 8x8 matrix",
         rules=_all(mma_tiling_rules(16, 16, 16), _swizzle_rule)),
    Step("hgemm/04_register_prefetch", "hgemm_register_prefetch", _MMA_TILING, _mma_geometry, chapter=7,
         dtype="float16", min_arch=75, previous="hgemm/03_swizzled",
         summary="the next block tile's global loads are issued into registers before this tile's mmas",
         rules=_all(mma_tiling_rules(16, 16, 16), _swizzle_rule)),
    Step("hgemm/05_tuned_tiles", "hgemm_tuned_tiles", _MMA_TUNED, _mma_geometry, chapter=7,
         dtype="float16", min_arch=75, previous="hgemm/04_register_prefetch",
         summary="a 256x128 block tile; swizzled addresses advanced by XOR with constants",
         rules=_all(mma_tiling_rules(16, 16, 16), _mma_copy_rule, _swizzle_rule, _xor_advance_rule)),
    Step("hgemm/06_double_buffer", "hgemm_double_buffer", _MMA_TUNED, _mma_dynamic_geometry, chapter=7,
         dtype="float16", min_arch=75, previous="hgemm/05_tuned_tiles",
         summary="two shared buffers: one barrier per K tile instead of two",
         rules=_all(mma_tiling_rules(16, 16, 16, buffers=2, **_T4_DYNAMIC), _mma_copy_rule, _swizzle_rule,
                    _xor_advance_rule)),
    Step("hgemm/07_cp_async", "hgemm_cp_async", {**_MMA_TUNED, "NUM_STAGES": Param(3, (2, 3, 4, 5))},
         _mma_dynamic_geometry, chapter=7, dtype="float16", min_arch=80, previous="hgemm/06_double_buffer",
         summary="sm_80+: a NUM_STAGES-deep cp.async pipeline feeding mma.m16n8k16",
         rules=_all(mma_tiling_rules(16, 16, 16, smem_limit=HOPPER_SMEM,
                                      smem_what="shared memory, over the 227 KB a block may have on sm_90 "
                                                "(163 KB on sm_80)"), _mma_copy_rule, _swizzle_rule,
                    _xor_advance_rule)),
    # Chapter 7c builds hgemm/08 in steps: the hopper track (hopper/01 .. 03), then hgemm/08.
    Step("hopper/01_wgmma", "hopper_wgmma", {k: _WGMMA_PARAMS[k] for k in ("BLOCK_N", "GROUP_M")},
         _hopper_launch(256, _hopper_bytes(1, 0)),
         chapter="7c", dtype="float16", min_arch=90, arch_specific=True, previous="hgemm/07_cp_async",
         summary="sm_90a: two warpgroups multiply with wgmma from tiles the threads copy, 128-byte swizzled",
         rules=_one_stage_rules, shape_rule=_copy16_shape_rule, shape_multiple=8,
         fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}),
    Step("hopper/02_tma", "hopper_tma", {k: _WGMMA_PARAMS[k] for k in ("BLOCK_N", "GROUP_M")},
         _hopper_launch(256, _hopper_bytes(1, 2)),
         chapter="7c", dtype="float16", min_arch=90, arch_specific=True, previous="hopper/01_wgmma",
         summary="sm_90a: one thread loads the tiles by TMA; the block waits on one mbarrier's phase",
         rules=_one_stage_rules, shape_rule=_tma_shape_rule, shape_multiple=8,
         fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}, extra_args=_wgmma_tensor_maps),
    Step("hopper/03_tma_ring", "hopper_tma_ring", _WGMMA_PARAMS, _hopper_launch(256, _wgmma_bytes),
         chapter="7c", dtype="float16", min_arch=90, arch_specific=True, previous="hopper/02_tma",
         summary="sm_90a: a ring of NUM_STAGES stages with full and empty mbarriers; thread 0 loads ahead",
         rules=_wgmma_rules, shape_rule=_tma_shape_rule, shape_multiple=8,
         fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}, extra_args=_wgmma_tensor_maps),
    Step("hgemm/08_wgmma", "hgemm_wgmma",
         _WGMMA_PARAMS,
         lambda m, n, k, p: Launch((cdiv(n, p["BLOCK_N"]), cdiv(m, 128), 1), (384, 1, 1), _wgmma_bytes(p)),
         chapter="7c", dtype="float16", min_arch=90, arch_specific=True, previous="hopper/03_tma_ring",
         summary="sm_90a: TMA fills a ring of stages, two warpgroups multiply with wgmma (warp-specialized)",
         rules=_wgmma_rules, shape_rule=_tma_shape_rule, shape_multiple=8, fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64},
         extra_args=_wgmma_tensor_maps),
    Step("hgemm/09_persistent", "hgemm_persistent",
         _WGMMA_PARAMS,
         _persistent_launch(_wgmma_bytes),
         chapter=7, dtype="float16", min_arch=90, arch_specific=True, previous="hgemm/08_wgmma",
         summary="sm_90a: a persistent grid, one block per SM walking the tiles; loads run under the epilogue",
         rules=_wgmma_rules, shape_rule=_tma_shape_rule, shape_multiple=8, fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64},
         extra_args=_wgmma_tensor_maps),
    _tma_store_step("hgemm/10_tma_store", "hgemm_tma_store", previous="hgemm/09_persistent",
                    summary="sm_90a: C goes out through shared memory and TMA stores; the next tile's wgmmas start "
                            "meanwhile"),
    _tma_store_step("hgemm/11_mma_in_flight", "hgemm_mma_in_flight", previous="hgemm/10_tma_store",
                    summary="sm_90a: one k tile's wgmmas stay queued behind the running ones (wgmma_wait<1>)"),
    _tma_store_step("hgemm/12_stream_k", "hgemm_stream_k", previous="hgemm/11_mma_in_flight",
                    summary="sm_90a: the last wave's tiles are shared out by k tiles (stream-K) when that saves MIN_GAIN",
                    more_params={"MAX_SPLIT": _MAX_SPLIT, "MIN_GAIN": _MIN_GAIN}, extra_args=_stream_k_args, more_cases=_stream_k_cases),
]

# Kernels of the lab (lab/<experiment>/): loadable by name (get, gemmlab.step, the command line) for the tests
# and the lab's scripts, but not steps of the course: steps() does not list them, no chapter shows them.
LAB_STEPS: list[Step] = [
    # Measured as step hgemm/10_clusters (2026-11-26); it lost to 09 on an H100 (lab/hgemm-past-cublas/README.md).
    Step("hgemm-past-cublas/clusters", "hgemm_clusters",
         {**_WGMMA_PARAMS, "GROUP_M": _CLUSTER_GROUP_M, "CLUSTER_M": _CLUSTER_M},
         lambda m, n, k, p: Launch((_cluster_grid(m, n, p), 1, 1), (384, 1, 1), _wgmma_bytes(p)),
         chapter=7, dtype="float16", min_arch=90, arch_specific=True, previous="hgemm/09_persistent",
         summary="sm_90a: clusters of blocks along M share each B tile, loaded once and multicast by TMA",
         rules=_cluster_rules, shape_rule=_tma_shape_rule, shape_multiple=8,
         fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}, extra_args=_wgmma_tensor_maps,
         path="lab/hgemm-past-cublas/clusters.cu"),
    # Attempt 5 (2026-11-28): step 11 with the clusters of attempt 1 (lab/hgemm-past-cublas/README.md).
    Step("hgemm-past-cublas/clusters11", "hgemm_clusters11",
         {**_WGMMA_PARAMS, "GROUP_M": _CLUSTER_GROUP_M, "STORE_BUFS": _STORE_BUFS, "CLUSTER_M": _CLUSTER_M},
         lambda m, n, k, p: Launch((_cluster_grid(m, n, p, _tma_store_bytes), 1, 1), (384, 1, 1), _tma_store_bytes(p)),
         chapter=7, dtype="float16", min_arch=90, arch_specific=True, previous="hgemm/11_mma_in_flight",
         summary="sm_90a: step 11 in clusters along M that share each B tile by TMA multicast",
         rules=lambda p: _tma_store_rules(p) + _cluster_only_rules(p),
         shape_rule=_tma_shape_rule, shape_multiple=8,
         fixed_tile={"BLOCK_M": 128, "BLOCK_K": 64}, extra_args=_tma_store_tensor_maps,
         path="lab/hgemm-past-cublas/clusters11.cu"),
]



# ------------------------------------------------------------------------------------------------
# The fused steps, E = A B C (chapters 8 and 9): three operands, their own rules and launch
# ------------------------------------------------------------------------------------------------
Dims = tuple[int, int, int, int]  # (M, K, L, N)
FUSED_SIZES = (256, 512, 1024, 2048, 4096)  # N = M = K = L of the fused steps' benchmark (bench.FUSED_SIZES)


@dataclass(frozen=True)
class FusedStep(StepSpec):
    name: str                     # "fused/NN_idea", also kernels/fused/NN_idea.cu
    symbol: str                   # the __global__ template's name
    params: dict[str, Param]      # in template-argument order
    threads: Callable[[dict], int]
    summary: str
    rules: Callable[[dict], list[str]]                    # why a configuration cannot run
    shape_rules: Callable[[dict, Dims], list[str]] = lambda p, d: []  # why a shape cannot run
    smem: Callable[[dict, Dims], int] = lambda p, d: 0  # dynamic shared memory, bytes
    persistent: bool = False      # grid = resident blocks; needs scratch T and a barrier word pair
    previous: str | None = None
    min_arch: int = 0             # compute capability x 10 that the step's instructions need
    arch_specific: bool = False   # compiled for sm_{min_arch}a (wgmma): runs on that architecture only
    fixed: dict = field(default_factory=dict)  # tile sizes the kernel fixes (not template parameters)
    shape_multiple: int = 1       # K, L and N must be multiples of this (TMA's 16-byte row strides)
    tensor_maps: Callable | None = None  # (backend, A, B, C, T, tile) -> the TMA maps that follow the arguments
    # Tiles by problem size: ((from_n, {param: value}), ...) in increasing from_n; the last entry whose from_n
    # is at most the larger output side applies (FusedStep.tiles_for). Empty: the defaults at every size.
    sized_tiles: tuple = ()
    chapter: int = 8

    inputs = ("A", "B", "C")  # E = A B C (StepSpec's data)
    output = "E"
    dim_names = ("M", "K", "L", "N")
    default_arch = "sm_90"
    timing = "abc"  # timed back to back against a @ b @ c, eager and as a CUDA graph (bench.PROTOCOLS)
    bench_sizes = FUSED_SIZES
    slider_sizes = (17, 33, 64, 100, 130)
    counters_refusal = "counters runs GEMM steps in the emulator; {name} is a fused step (python -m gemmlab steps lists both)."

    @property
    def file(self) -> str:
        return f"kernels/{self.name}.cu"

    def compare(self, got: np.ndarray, *operands) -> tuple[np.ndarray, np.ndarray]:
        """E = A B C against float64, within the bound of both products' rounding (bounds.compare_abc)."""
        return bounds.compare_abc(got, *operands)

    @property
    def dtype(self) -> str:
        """The element type of A, B, C and E: float32 for every fused step."""
        return "float32"

    def resolve(self, overrides: dict, target: str | None = None) -> dict:
        """Defaults overridden by `overrides`; unknown names and impossible values raise ConfigError.
        `target` ('gpu', 'cpu' or an arch such as 'sm_75') is whose limits the rules apply (smem_limit)."""
        params = resolve_params(self.name, self.params, overrides)
        with limits_of(target):
            problems = self.rules(params)
        if problems:
            raise ConfigError(f"{self.name} cannot run with {params}: " + "; ".join(problems) + ".")
        return params

    def tiles_for(self, dims: Dims) -> dict:
        """The tile parameters this step takes by default for a problem of `dims` (M, K, L, N): those of
        `sized_tiles` for its larger output side, else none (the parameters' defaults)."""
        side = max(dims[0], dims[2], dims[3])
        return next((dict(p) for from_n, p in reversed(self.sized_tiles) if side >= from_n), {})

    def fit(self, dims: Dims) -> Dims:
        """(M, K, L, N) with K, L and N rounded up to shape_multiple: a shape this step takes."""
        up = lambda x: cdiv(x, self.shape_multiple) * self.shape_multiple  # noqa: E731
        m, k, l, n = dims
        return (m, up(k), up(l), up(n))

    def tile(self, params: dict) -> tuple[int, int]:
        """The (rows, columns) of output one block computes at a time."""
        p = {**self.fixed, **params}
        return (p.get("BLOCK_M", p.get("PANEL_M", 1)), p.get("BLOCK_N", 1))

    # --- E = A B C: its problem, launch, arguments and cases (StepSpec's interface) ---
    def problem(self, shapes: list) -> Dims:
        """(M, K, L, N) of A's, B's and C's shapes; an InputError when they do not chain."""
        (m, k), (k2, l), (l2, n) = shapes
        if k != k2 or l != l2:
            raise InputError(f"shapes do not chain: A is {m}x{k}, B is {k2}x{l}, C is {l2}x{n}; A's columns must "
                             f"equal B's rows and B's columns must equal C's rows")
        return (m, k, l, n)

    def product_text(self, dims: Dims) -> str:
        return "A B C"

    def output_shape(self, dims: Dims) -> tuple[int, int]:
        return (dims[0], dims[3])

    def check_dims(self, dims: Dims, params: dict, target: str | None = None) -> None:
        m, k, l, n = dims
        with limits_of(target):
            problems = self.shape_rules(params, dims)
        if problems:
            raise ShapeError(f"{self.name} cannot run M={m}, K={k}, L={l}, N={n}: " + "; ".join(problems) + ".")
        check_32bit_indices(self.name, {"A": (m, k), "B": (k, l), "C": (l, n), "T = A B": (m, l), "E": (m, n)})

    def work(self, dims: Dims) -> int:
        m, k, l, n = dims
        return m * l * (k + n)

    def tile_count(self, params: dict, dims: Dims) -> int:
        """Output tiles of the larger phase: the most blocks that have work."""
        m, k, l, n = dims
        bm, bn = self.tile(params)
        return cdiv(m, bm) * cdiv(max(l, n), bn)

    def blocks(self, kern, dims: Dims, grid: int | None = None) -> int:
        """Blocks to launch. Persistent step: min(tiles, blocks resident at once on kern's backend), or `grid` if it
        fits; otherwise one block per BLOCK_M-row tile of A."""
        if not self.persistent:
            if grid is not None:
                raise ConfigError(f"grid={grid!r} applies to a persistent step only (fused/03_two_phase and later, "
                                  f"whose blocks stay resident); {self.name} sets its own grid, one block per "
                                  f"{self.tile(kern.params)[0]}-row tile of A: leave grid out")
            return cdiv(dims[0], self.tile(kern.params)[0])
        resident, how = kern.resident_blocks(self.smem(kern.params, dims))
        if resident < 1:
            raise ConfigError(f"{kern.label}: not even one block fits on an SM ({how}); choose smaller tiles")
        if grid is None:
            return max(1, min(self.tile_count(kern.params, dims), resident))
        if not isinstance(grid, (int, np.integer)) or grid < 1:
            raise ConfigError(f"grid must be a positive number of blocks, not {grid!r}")
        if grid > resident:
            raise ConfigError(f"{kern.label}: a grid of {grid} blocks cannot all be resident at once (at most "
                              f"{resident}: {how}); a block waiting for one that never starts would wait forever. "
                              f"Launch at most {resident}.")
        return int(grid)

    def launch_for(self, kern, dims: Dims, grid: int | None = None, params: dict | None = None) -> Launch:
        p = kern.params if params is None else params
        blocks = kern.grid_for(dims, grid) if kern is not None else 1
        return Launch((blocks, 1, 1), (self.threads(p), 1, 1), self.smem(p, dims))

    def fit_block(self, params: dict, size: int) -> tuple[int, int]:
        return self.threads(params), self.smem(params, self.fit((size,) * 4))

    def arguments(self, kern, arrays: tuple, grid: int | None = None) -> tuple[Launch, list]:
        """The launch and the kernel's arguments: M, K, L, N, A, B, C, E, and for a persistent step its scratch T
        and sync words (kern.workspace), then the TMA maps of step 07 and later."""
        a, b, c, e = arrays
        (m, k), (l, n) = a.shape, c.shape
        args = [np.int32(m), np.int32(k), np.int32(l), np.int32(n), a, b, c, e]
        if self.persistent:
            xp = np if isinstance(a, np.ndarray) else optional.module("cupy")
            t, sync = kern.workspace(xp, m, l)
            args += [t, sync]
            if self.tensor_maps:  # step 07: TMA reads A, B, C and T through maps
                args += self.tensor_maps(kern.backend, a, b, c, t, self.tile(kern.params))
        return kern.launch_config((m, k, l, n), grid=grid), args

    def cases(self, params: dict, backend: str) -> list[tuple[str, Dims]]:
        """check's cases (kind, (M, K, L, N)): operands.abc_cases around the tile, rounded to shapes it takes."""
        return [(kind, self.fit(dims)) for kind, dims in operands.abc_cases(self.tile(params))]

    def make_inputs(self, kind: str, dims: Dims, seed: int = 0) -> tuple:
        return operands.abc_inputs(kind, *dims, seed=seed)

    def against_baseline(self, record: dict) -> float:
        """The speed-up over a @ b @ c: baseline_median_s / median_s."""
        return record["baseline_median_s"] / record["median_s"]


def _rules(*checks):
    return lambda p: [msg for c in checks for msg in c(p)]


def _fused_divides(a, b):
    return lambda p: [] if p[b] % p[a] == 0 else [f"{a}={p[a]} must divide {b}={p[b]} (whole thread tiles)"]


def _max_threads(threads):
    def rule(p):
        t = threads(p)
        if t > 1024:
            return [f"a block of {t} threads exceeds the hardware limit of 1024"]
        return [] if t >= 1 else ["a block needs at least one thread"]
    return rule


def _fused_multiple_of_4(*names):
    return lambda p: [f"{x}={p[x]} must be a multiple of 4 (float4 accesses)" for x in names if p[x] % 4]


def _accumulators(p):
    acc = p["THREAD_M"] * p["THREAD_N"]
    return [] if acc <= 128 else [f"{acc} accumulators per thread would spill out of the 255 registers (limit 128)"]


def _static_smem(bytes_of, what):
    def rule(p):
        need = bytes_of(p)
        return [] if need <= STATIC_SMEM else [f"{what} need {need} bytes, over the 48 KB of static shared memory"]
    return rule


def _panel_threads(p):
    return (p["PANEL_M"] // max(p["THREAD_M"], 1)) * (p["BLOCK_N"] // max(p["THREAD_N"], 1))


def _tile_threads(p):
    return (p["BLOCK_M"] // max(p["THREAD_M"], 1)) * (p["BLOCK_N"] // max(p["THREAD_N"], 1))


def _naive_shape(p, d):
    m, k, l, n = d
    if 4 * l > STATIC_SMEM:
        return [f"a row of T = A B has L={l} floats = {4 * l} bytes of shared memory, over 48 KB "
                f"(step 01 allows L <= {STATIC_SMEM // 4}); use step 02 or 03"]
    return []


def _panel_width(p, l):
    return cdiv(l, p["BLOCK_K"]) * p["BLOCK_K"]


def _panel_bytes(p, d):
    return 4 * p["PANEL_M"] * _panel_width(p, d[2])


_target: contextvars.ContextVar[str | None] = contextvars.ContextVar("fusion_target", default=None)


@contextlib.contextmanager
def limits_of(target: str | None):
    """Within it, smem_limit() (so every rule) judges by `target`'s limits: a backend='cpu' step on a T4
    is judged by what the emulator models, not by the T4 (None: leave the choice as it is)."""
    token = _target.set(target or _target.get())
    try:
        yield
    finally:
        _target.reset(token)


def smem_limit(target: str | None = None) -> int:
    """Shared memory one block may have on `target`: 'gpu' the live GPU's opt-in limit, 'cpu' what the
    emulator models (an H100 block's 227 KB, whatever GPU is present), an arch such as 'sm_75' that
    arch's (a T4's 64 KB). Default: the target being judged (limits_of), else the active backend."""
    target = target or _target.get() or backend()
    if target == "gpu":
        return int(gpu.device()["shared_per_block_optin"])
    if target == "cpu":
        return CPU_SMEM_LIMIT
    return arch_limits(target).shared_optin


def _panel_shape(p, d):
    need = _panel_bytes(p, d) + 4 * p["BLOCK_K"] * (p["PANEL_M"] + p["BLOCK_N"])
    limit = smem_limit()
    if need > limit:
        return [f"a panel of PANEL_M={p['PANEL_M']} rows of T with L={d[2]} needs {need} bytes of shared memory, "
                f"over the {limit} a block may have here; use a smaller PANEL_M, or step 03 (T in global memory)"]
    return []


def _warp_threads(p):
    return p["SPLIT_K"] * (p["BLOCK_M"] // max(p["WARP_M"], 1)) * (p["BLOCK_N"] // max(p["WARP_N"], 1)) * 32


def _tf32x3_smem(p, d=None):
    """Step 05's dynamic shared memory: every group's stages, or the partial sums if larger."""
    stage = 4 * (p["BLOCK_M"] * (p["BLOCK_K"] + 4) + p["BLOCK_K"] * (p["BLOCK_N"] + 8))
    return max(p["SPLIT_K"] * p["NUM_STAGES"] * stage, 4 * (p["SPLIT_K"] - 1) * p["BLOCK_M"] * p["BLOCK_N"])


def _tf32x3_rules(p):
    out = tf32x3_tile_rules(p)
    if p["SPLIT_K"] < 1 or p["NUM_STAGES"] < 2:
        out.append("SPLIT_K must be at least 1 and NUM_STAGES at least 2")
    if not out:
        out += _max_threads(_warp_threads)(p)
        need = _tf32x3_smem(p)
        if need > smem_limit():
            out.append(f"{need} bytes of shared memory (SPLIT_K x NUM_STAGES stages of both tiles), over the "
                       f"{smem_limit()} a block may have here; use fewer stages, a smaller BLOCK_K or SPLIT_K")
    return out


WGMMA_TILE_M, WGMMA_TILE_K = 64, 32  # step 06: a warpgroup's rows; one 128-byte swizzled row of K


def _wgmma_smem(p, d=None):
    """Step 06's dynamic shared memory: alignment, each group's split B tile, then every group's
    stages or the partial sums if larger."""
    stage = 4 * (WGMMA_TILE_M * (WGMMA_TILE_K + 4) + WGMMA_TILE_K * (p["BLOCK_N"] + 8))
    split = 2 * 4 * p["BLOCK_N"] * WGMMA_TILE_K
    return 1024 + p["SPLIT_K"] * split + max(p["SPLIT_K"] * p["NUM_STAGES"] * stage,
                                              4 * (p["SPLIT_K"] - 1) * WGMMA_TILE_M * p["BLOCK_N"])


def _warpgroup_tile_rules(p, max_split_k: int, why: str) -> list[str]:
    """Steps 06 and 07: one wgmma's width, SPLIT_K warpgroups per block."""
    out = []
    if p["BLOCK_N"] not in (32, 64):
        out.append(f"BLOCK_N={p['BLOCK_N']} must be 32 or 64 (one wgmma of that width)")
    if not 1 <= p["SPLIT_K"] <= max_split_k:
        out.append(f"SPLIT_K={p['SPLIT_K']} must be 1 to {max_split_k} ({why})")
    return out


def _fused_smem_rule(need: int, what: str) -> list[str]:
    """The Hopper fused steps' shared-memory check: `need` bytes (made of `what`) against what a block may have."""
    if need <= smem_limit():
        return []
    return [f"{need} bytes of shared memory ({what}), over the {smem_limit()} a block may have here; use fewer "
            "stages, a smaller BLOCK_N or SPLIT_K"]


def _fused_wgmma_rules(p):
    out = _warpgroup_tile_rules(p, 8, "a warpgroup of 128 threads each, at most 1024")
    if p["NUM_STAGES"] < 2:
        out.append("NUM_STAGES must be at least 2")
    return out or _fused_smem_rule(_wgmma_smem(p), "SPLIT_K x (the split tile + NUM_STAGES stages)")


def tma_smem(p, d=None, splits_per_group=1):
    """Step 07's dynamic shared memory: alignment, the ring of stages, each group's split B tile (or
    `splits_per_group` of them: results/experiments/fusion-tma, `overlap`), the partial sums of groups
    1 .. SPLIT_K - 1, two mbarriers per stage."""
    stage = 4 * (WGMMA_TILE_M * WGMMA_TILE_K + WGMMA_TILE_K * p["BLOCK_N"])
    split = 2 * 4 * p["BLOCK_N"] * WGMMA_TILE_K
    return (1024 + p["NUM_STAGES"] * stage + p["SPLIT_K"] * splits_per_group * split
            + 4 * (p["SPLIT_K"] - 1) * WGMMA_TILE_M * p["BLOCK_N"] + 16 * p["NUM_STAGES"])


def tma_rules(p, smem=tma_smem):
    """Why a configuration of step 07 (or 08) cannot run; `smem(p)`: its shared memory (a lab variant's own)."""
    out = _warpgroup_tile_rules(p, 7, "a warpgroup of 128 threads each, plus the producer warp: at most 1024 threads")
    if p["NUM_STAGES"] < max(2, p["SPLIT_K"]):
        out.append(f"NUM_STAGES={p['NUM_STAGES']} must be at least 2 and at least SPLIT_K={p['SPLIT_K']}: a warpgroup "
                   "waits for a stage by the parity of its fill, which is ambiguous once the ring is two fills ahead")
    return out or _fused_smem_rule(smem(p), "NUM_STAGES stages, the groups' split tiles and partial sums")


def _tma_shape(p, d):
    m, k, l, n = d
    if k % 4 or l % 4 or n % 4:
        return [f"K={k}, L={l} and N={n} must be multiples of 4: TMA reads rows whose stride is a multiple of "
                "16 bytes (4 floats). Pad the matrices with zeros, or use fused/06_wgmma_tf32x3, which takes any shape"]
    return []


def tma_maps(backend, a, b, c, t, tile):
    """Step 07's tensor maps, after its ten arguments: A and T in boxes of a tile's rows (`tile`: its rows and
    columns) x 32, the left operand's tile; B and C in 32 x 32 boxes, a 128-byte-wide piece of the right one's."""
    rows = tile[0]
    return [tma.tensor_map(backend, a, 4, rows, WGMMA_TILE_K), tma.tensor_map(backend, b, 5, WGMMA_TILE_K, 32),
            tma.tensor_map(backend, t, 8, rows, WGMMA_TILE_K), tma.tensor_map(backend, c, 6, WGMMA_TILE_K, 32)]


FUSED_STEPS: list[FusedStep] = [
    FusedStep("fused/01_naive_row", "fused_naive_row",
              {"THREADS": Param(256, (32, 64, 128, 256, 512, 1024), "threads per block (one block per row)")},
              threads=lambda p: p["THREADS"],
              summary="one block per row of E; the row of A B waits in shared memory (the seed's kernel)",
              rules=lambda p: [] if p["THREADS"] % 32 == 0 and 32 <= p["THREADS"] <= 1024 else
              [f"THREADS={p['THREADS']} must be a whole number of warps between 32 and 1024"],
              # the row of T, rounded up to whole float4s: ptxas reads the tail of phase 2's loop over
              # sT as one vector load (compute-sanitizer saw 12-byte reads past 4 * L when L % 4 != 0)
              shape_rules=_naive_shape, smem=lambda p, d: 16 * cdiv(d[2], 4)),
    FusedStep("fused/02_row_panel", "fused_row_panel",
              {"PANEL_M": Param(8, (1, 2, 4, 8, 16, 32), "rows of T kept on chip per block"),
               "BLOCK_N": Param(128, (16, 32, 64, 128, 256)), "BLOCK_K": Param(16, (4, 8, 16, 32)),
               "THREAD_M": Param(2, (1, 2, 4, 8)), "THREAD_N": Param(4, (1, 2, 4, 8))},
              threads=_panel_threads, previous="fused/01_naive_row",
              summary="PANEL_M rows of A B in shared memory, register tiles for both products",
              rules=_rules(_fused_divides("THREAD_M", "PANEL_M"), _fused_divides("THREAD_N", "BLOCK_N"),
                           _max_threads(_panel_threads), _accumulators,
                           _static_smem(lambda p: 4 * p["BLOCK_K"] * (p["PANEL_M"] + p["BLOCK_N"]),
                                        "the A and B slices")),
              shape_rules=_panel_shape, smem=_panel_bytes),
    FusedStep("fused/03_two_phase", "fused_two_phase",
              {"BLOCK_M": Param(64, (16, 32, 64, 128)), "BLOCK_N": Param(32, (16, 32, 64, 128)),
               "BLOCK_K": Param(16, (8, 16, 32, 64)), "THREAD_M": Param(4, (4, 8)),
               "THREAD_N": Param(4, (4, 8))},
              threads=_tile_threads, previous="fused/02_row_panel", persistent=True,
              summary="persistent grid: T = A B into global scratch, a grid barrier, E = T C; one launch",
              rules=_rules(_fused_divides("THREAD_M", "BLOCK_M"), _fused_divides("THREAD_N", "BLOCK_N"),
                           _fused_multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"), _max_threads(_tile_threads),
                           _accumulators,
                           _static_smem(lambda p: 2 * 4 * p["BLOCK_K"] * (p["BLOCK_M"] + p["BLOCK_N"]),
                                        "two buffers of the operand tiles"))),
    FusedStep("fused/04_split_k", "fused_split_k",
              {"BLOCK_M": Param(32, (16, 32, 64, 128)), "BLOCK_N": Param(32, (16, 32, 64, 128)),
               "BLOCK_K": Param(16, (8, 16, 32, 64)), "THREAD_M": Param(4, (4, 8)),
               "THREAD_N": Param(4, (4, 8)), "SPLIT_K": Param(4, (1, 2, 4, 8))},
              threads=lambda p: p["SPLIT_K"] * _tile_threads(p), previous="fused/03_two_phase", persistent=True,
              summary="03 with SPLIT_K thread groups per tile, each summing part of K: more warps when N is small",
              rules=_rules(_fused_divides("THREAD_M", "BLOCK_M"), _fused_divides("THREAD_N", "BLOCK_N"),
                           _fused_multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"),
                           _max_threads(lambda p: p["SPLIT_K"] * _tile_threads(p)), _accumulators,
                           lambda p: [] if p["SPLIT_K"] >= 1 else ["SPLIT_K must be at least 1"],
                           _static_smem(lambda p: 4 * max(p["SPLIT_K"] * 2 * p["BLOCK_K"] * (p["BLOCK_M"] + p["BLOCK_N"]),
                                                          (p["SPLIT_K"] - 1) * p["BLOCK_M"] * p["BLOCK_N"]),
                                        "SPLIT_K groups' two buffers of the operand tiles"))),
    FusedStep("fused/05_tf32x3", "fused_tf32x3",
              {"BLOCK_M": Param(32, (16, 32, 64, 128)), "BLOCK_N": Param(32, (16, 32, 64, 128)),
               "BLOCK_K": Param(32, (8, 16, 32, 64)), "WARP_M": Param(16, (16, 32, 64)),
               "WARP_N": Param(16, (8, 16, 32, 64)), "SPLIT_K": Param(2, (1, 2, 4)),
               "NUM_STAGES": Param(2, (2, 3, 4))},
              threads=_warp_threads, previous="fused/04_split_k", persistent=True, min_arch=80,
              summary="04 on the tensor cores: each fp32 product as three TF32 mmas (3xTF32), cp.async stages",
              rules=_tf32x3_rules, smem=_tf32x3_smem),
    FusedStep("fused/06_wgmma_tf32x3", "fused_wgmma_tf32x3",
              {"BLOCK_N": Param(32, (32, 64), "columns of a tile (the wgmma's N); its rows are a warpgroup's 64"),
               "SPLIT_K": Param(4, (1, 2, 4, 8), "warpgroups per tile, each summing its share of K"),
               "NUM_STAGES": Param(3, (2, 3, 4), "K tiles of 32 in flight per warpgroup")},
              threads=lambda p: 128 * p["SPLIT_K"], previous="fused/05_tf32x3", persistent=True, min_arch=90,
              arch_specific=True, fixed={"BLOCK_M": WGMMA_TILE_M, "BLOCK_K": WGMMA_TILE_K},
              summary="05 with B split once per element into shared memory and multiplied by wgmma (sm_90a)",
              rules=_fused_wgmma_rules, smem=_wgmma_smem),
    FusedStep("fused/07_tma_tf32x3", "fused_tma_tf32x3",
              {"BLOCK_N": Param(32, (32, 64), "columns of a tile (the wgmma's N); its rows are a warpgroup's 64"),
               "SPLIT_K": Param(4, (1, 2, 3, 4, 5, 6, 7), "consumer warpgroups per tile, each summing its share of K"),
               "NUM_STAGES": Param(8, (2, 4, 6, 8, 10, 12), "K tiles of 32 in the ring the producer fills")},
              threads=lambda p: 128 * p["SPLIT_K"] + 32, previous="fused/06_wgmma_tf32x3", persistent=True,
              min_arch=90, arch_specific=True, fixed={"BLOCK_M": WGMMA_TILE_M, "BLOCK_K": WGMMA_TILE_K},
              summary="06 with the tiles brought in by TMA: a producer warp fills a ring the warpgroups share (sm_90a)",
              rules=tma_rules, smem=tma_smem, shape_rules=_tma_shape, shape_multiple=4, tensor_maps=tma_maps,
              # the fastest tiles of the H200 sweeps (results/nvidia-h200.fusion.json; a test keeps them so): 32
              # columns and three groups while 64 x 64 tiles would leave SMs idle (64 tiles at 512), then 64 x 64
              sized_tiles=((512, {"BLOCK_N": 32, "SPLIT_K": 3, "NUM_STAGES": 12}),
                           (1024, {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 8}))),
]
# Step 08 is step 07 (same tiles, ring, rules and maps) with what phase 2 waits for changed
FUSED_STEPS.append(replace(
    FUSED_STEPS[-1], name="fused/08_tile_flags", symbol="fused_tile_flags", previous="fused/07_tma_tf32x3",
    summary="07 with a counter per tile of T in place of the grid barrier: a tile of phase 2 waits only for its "
            "row panel of T (sm_90a)"))


def _find_step(name: str, steps: list, what: str):
    """The step of `steps` called `name`, its full name or its short one ("03_smem_tiling", "smem_tiling");
    a ConfigError naming the candidates when a short name fits several, or listing `what`s otherwise."""
    if not isinstance(name, str):
        raise ConfigError(f"a {what} name is a string such as {steps[0].name!r}, not {name!r}")
    matches = [s for s in steps if name in (s.name, s.short, s.short.split("_", 1)[-1])]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(f"{name!r} names {len(matches)} {what}s, {' and '.join(s.name for s in matches)}; "
                          f"give the full name.")
    raise ConfigError(f"no {what} called {name!r}; the {what}s are: {', '.join(s.name for s in steps)}")


def steps(track: str | None = None) -> list[Step]:
    """The GEMM steps (C = A B) in reading order, or those of one track ('sgemm', 'hgemm', 'hopper'); all_steps adds
    the fused ones."""
    return [s for s in STEPS if track is None or s.track == track]


def check_shape(step: Step, m: int, n: int, k: int) -> None:
    """Reject a problem shape the step does not support, before any launch."""
    if min(m, n, k) < 0:
        raise ShapeError(f"{step.name}: negative sizes M={m}, N={n}, K={k}")
    check_32bit_indices(step.name, {"A": (m, k), "B": (k, n), "C": (m, n)})
    problem = step.shape_rule(m, n, k)
    if problem:
        raise ShapeError(f"{step.name}: {problem}.")


def check_32bit_indices(name: str, matrices: dict[str, tuple[int, int]]) -> None:
    """A ShapeError if a matrix ({name: (rows, cols)}) has more elements than the kernels' 32-bit int
    indices reach (MAX_ELEMENTS), for the GEMM and the fused steps alike."""
    over = [f"{x} is {r} x {c} = {r * c} elements" for x, (r, c) in matrices.items() if r * c > MAX_ELEMENTS]
    if over:
        raise ShapeError(f"{name}: {', '.join(over)}, more than the 2^31 - 1 that the kernel's 32-bit indices "
                         f"reach; split the product into smaller blocks.")


def parse_params(pairs: list[str] | None) -> dict:
    """["BLOCK_K=8", "THREAD_M=16"] -> {"BLOCK_K": 8, "THREAD_M": 16} (the CLI's --param, run.py's specs)."""
    out = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise ConfigError(f"a template parameter is NAME=INTEGER, not {pair!r}")
        if name in out:
            raise ConfigError(f"--param {name} is given twice ({name}={out[name]} and {pair}); give each parameter once.")
        out[name] = int(value)
    return out


# --- every step, GEMM and fused (issue 54: one lookup) --------------------------------------------------------------
# The GEMM steps (STEPS), the lab's kernels (LAB_STEPS) and the fused A B C steps (FUSED_STEPS) are tables of this
# module; lookup is the one place that finds a step by name, for gemmlab.step / instance / verify / benchmark,
# bench.sweep, the chapters and the command line alike.
def all_steps(track: str | None = None) -> list:
    """Every step in reading order, the GEMM steps (STEPS) and then the fused ones (FUSED_STEPS), or those of one
    track ('sgemm', 'hgemm', 'hopper', 'fused'); steps() lists the GEMM steps only, as the chapters print them."""
    return [s for s in STEPS + FUSED_STEPS if track is None or s.track == track]


def all_step_names(track: str | None = None) -> list[str]:
    """The names of all_steps(track): every step gemmlab.step() takes (and the lab's kernels, LAB_STEPS, besides)."""
    return [s.name for s in all_steps(track)]


def lookup(name: str, track: str | None = None):
    """The step called `name`, by its full or short name: a GEMM step (STEPS), a lab kernel (LAB_STEPS) or a fused
    step (FUSED_STEPS); `track` ('sgemm', 'hgemm', 'hopper', 'fused', or a lab kernel's) looks in that track only.
    A ConfigError naming the candidates when it fits several or none."""
    every = STEPS + LAB_STEPS + FUSED_STEPS
    pool = [s for s in every if track is None or s.track == track]
    if not pool:
        raise ConfigError(f"no track called {track!r}; the tracks are {', '.join(dict.fromkeys(s.track for s in every))}")
    return _find_step(name, pool, f"{'fused ' if track == 'fused' else ''}step")


get = lookup  # the name the chapters and the lab use: the same lookup


def is_fused(step) -> bool:
    """Whether `step` is a fused A B C step: a step, a kernel or instance of one, or a name (lookup)."""
    if isinstance(step, str):
        step = lookup(step)
    return isinstance(getattr(step, "step", step), FusedStep)


def one_timing(steps: list, command: str) -> str:
    """The timing protocol (StepSpec.timing) all of `steps` (names, steps or kernels) share: a ConfigError when they
    mix GEMM and fused steps, since `command` times each kind against its own baselines."""
    timings = {(lookup(s) if isinstance(s, str) else getattr(s, "step", s)).timing for s in steps}
    if len(timings) > 1:
        raise ConfigError(f"{command} takes GEMM steps (against cuBLAS) or fused steps (against a @ b @ c), not both "
                          f"in one run; run it once for each kind.")
    return timings.pop() if timings else StepSpec.timing


def all_fused(steps: list, command: str) -> bool:
    """Whether all of `steps` are fused steps (one_timing: a ConfigError for the two kinds mixed)."""
    return one_timing(steps, command) == FusedStep.timing


_CHAPTER_LABELS: dict[str, str] | None = None


def chapter_labels() -> dict[str, str]:
    """Each step's chapter label ("2", "7b", "9"), read from the chapter that teaches it: the first chapter notebook
    (book/NN*_*.ipynb, in file order) with a cell that shows the step whole, `show.source(STEP)` or
    `show.diff(STEP, ...)`; failing that, the first that shows an excerpt of it (`show.source(STEP, start_at=...)`).
    Empty where book/ is absent (the course pip-installed): chapter_label then falls back to the step's `chapter`."""
    global _CHAPTER_LABELS
    if _CHAPTER_LABELS is not None:
        return _CHAPTER_LABELS

    shown = re.compile(r"""show\.(source|diff)\(\s*["']([^"']+)["']([^\n]*)""")
    whole: dict[str, str] = {}
    excerpt: dict[str, str] = {}
    for path in sorted((REPO / "book").glob("[0-9]*_*.ipynb")):
        label = path.name.split("_", 1)[0].lstrip("0") or "0"
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for cell in cells:
            if cell.get("cell_type") != "code":
                continue
            text = "".join(cell.get("source", ""))
            for kind, name, rest in shown.findall(text):
                is_excerpt = kind == "source" and ("start_at" in rest or "end_before" in rest)
                (excerpt if is_excerpt else whole).setdefault(name, label)
    _CHAPTER_LABELS = {**excerpt, **whole}
    return _CHAPTER_LABELS


def chapter_label(step) -> str:
    """The label of the chapter that teaches `step` (a step or its name), as chapter_labels reads it from book/;
    the step's registry `chapter` where no chapter shows it."""
    if isinstance(step, str):
        step = lookup(step)
    return chapter_labels().get(step.name, str(step.chapter))
