"""Chapter 8: E = A * B * C (fp32) in one kernel launch: the fused steps, their check, their benchmark.

A GEMM step (registry.py) takes two inputs; a fused step takes three, and step 03 also needs a
scratch matrix and a grid barrier. So the fused steps get their own small list here (FUSED_STEPS)
and a `FusedKernel` that reuses kernel.py's compilation for both backends (CuPy RawModule on a GPU,
the emulator on the CPU). Shapes: A is M x K, B is K x L, C is L x N, E = A B C is M x N.

    k = fusion.step("fused/03_two_phase", BLOCK_M=64, BLOCK_N=32)
    E = k(A, B, C)                  # checked inputs, NumPy or CuPy arrays
    fusion.check(k)                 # float64 reference, structured inputs first, NaN propagation
    fusion.benchmark()              # on a GPU: against torch / cupy a @ b @ c and a CUDA graph
    python -m gemmlab fusion-lane   # on a GPU: check + baselines + benchmark + sweep, recorded

Records go to results/<gpu>.fusion.json; without a GPU, benchmark() and sweep() return them.
"""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import datetime
import itertools
import re
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from . import kernel as _kernel
from ..errors import ConfigError, GemmlabError, InputError, ShapeError, VerificationError
from .registry import (StepSpec, Launch, Param, product64, cdiv, check_32bit_indices, find_step, resolve_params,
                       tf32x3_tile_rules)
from ..measure import results
from ..measure.bench import environment, time_back_to_back
from ..measure.check import special_values
from .source import assemble
from .arch import CPU_SMEM_LIMIT, SM_LIMITS, STATIC_SMEM, arch_limits, blocks_per_sm

UNIT_ROUNDOFF = 2.0 ** -24
BASELINE = "torch a@b@c"                      # the seed's baseline, named in the chapter
BASELINES = ("torch a@b@c", "cupy a@b@c")     # speed-ups are against the faster of the two, same run


# ------------------------------------------------------------------------------------------------
# The steps
# ------------------------------------------------------------------------------------------------
Dims = tuple[int, int, int, int]  # (M, K, L, N)


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

    inputs = ("A", "B", "C")  # E = A B C (StepSpec)

    @property
    def file(self) -> str:
        return f"kernels/{self.name}.cu"

    def compare(self, got: np.ndarray, *operands) -> tuple[np.ndarray, np.ndarray]:
        """E = A B C against float64, within the bound of both products' rounding (fusion.compare)."""
        return compare(got, *operands)

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


def _rules(*checks):
    return lambda p: [msg for c in checks for msg in c(p)]


def _divides(a, b):
    return lambda p: [] if p[b] % p[a] == 0 else [f"{a}={p[a]} must divide {b}={p[b]} (whole thread tiles)"]


def _max_threads(threads):
    def rule(p):
        t = threads(p)
        if t > 1024:
            return [f"a block of {t} threads exceeds the hardware limit of 1024"]
        return [] if t >= 1 else ["a block needs at least one thread"]
    return rule


def _multiple_of_4(*names):
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
    target = target or _target.get() or _kernel.backend()
    if target == "gpu":
        from . import gpu
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


def _smem_rule(need: int, what: str) -> list[str]:
    """The Hopper fused steps' shared-memory check: `need` bytes (made of `what`) against what a block may have."""
    if need <= smem_limit():
        return []
    return [f"{need} bytes of shared memory ({what}), over the {smem_limit()} a block may have here; use fewer "
            "stages, a smaller BLOCK_N or SPLIT_K"]


def _wgmma_rules(p):
    out = _warpgroup_tile_rules(p, 8, "a warpgroup of 128 threads each, at most 1024")
    if p["NUM_STAGES"] < 2:
        out.append("NUM_STAGES must be at least 2")
    return out or _smem_rule(_wgmma_smem(p), "SPLIT_K x (the split tile + NUM_STAGES stages)")


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
    return out or _smem_rule(smem(p), "NUM_STAGES stages, the groups' split tiles and partial sums")


def _tma_shape(p, d):
    m, k, l, n = d
    if k % 4 or l % 4 or n % 4:
        return [f"K={k}, L={l} and N={n} must be multiples of 4: TMA reads rows whose stride is a multiple of "
                "16 bytes (4 floats). Pad the matrices with zeros, or use fused/06_wgmma_tf32x3, which takes any shape"]
    return []


def tma_maps(backend, a, b, c, t, tile):
    """Step 07's tensor maps, after its ten arguments: A and T in boxes of a tile's rows (`tile`: its rows and
    columns) x 32, the left operand's tile; B and C in 32 x 32 boxes, a 128-byte-wide piece of the right one's."""
    from . import tma

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
              rules=_rules(_divides("THREAD_M", "PANEL_M"), _divides("THREAD_N", "BLOCK_N"),
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
              rules=_rules(_divides("THREAD_M", "BLOCK_M"), _divides("THREAD_N", "BLOCK_N"),
                           _multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"), _max_threads(_tile_threads),
                           _accumulators,
                           _static_smem(lambda p: 2 * 4 * p["BLOCK_K"] * (p["BLOCK_M"] + p["BLOCK_N"]),
                                        "two buffers of the operand tiles"))),
    FusedStep("fused/04_split_k", "fused_split_k",
              {"BLOCK_M": Param(32, (16, 32, 64, 128)), "BLOCK_N": Param(32, (16, 32, 64, 128)),
               "BLOCK_K": Param(16, (8, 16, 32, 64)), "THREAD_M": Param(4, (4, 8)),
               "THREAD_N": Param(4, (4, 8)), "SPLIT_K": Param(4, (1, 2, 4, 8))},
              threads=lambda p: p["SPLIT_K"] * _tile_threads(p), previous="fused/03_two_phase", persistent=True,
              summary="03 with SPLIT_K thread groups per tile, each summing part of K: more warps when N is small",
              rules=_rules(_divides("THREAD_M", "BLOCK_M"), _divides("THREAD_N", "BLOCK_N"),
                           _multiple_of_4("THREAD_M", "THREAD_N", "BLOCK_K"),
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
              rules=_wgmma_rules, smem=_wgmma_smem),
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



def get(name: str) -> FusedStep:
    """The fused step called `name` ("fused/03_two_phase"; "03_two_phase" or "two_phase" also work)."""
    return find_step(name, FUSED_STEPS, "fused step")


def steps() -> list[FusedStep]:
    return list(FUSED_STEPS)


# ------------------------------------------------------------------------------------------------
# Residency: how many blocks of a persistent kernel can be on the GPU at once
# ------------------------------------------------------------------------------------------------
def cpu_workers() -> int:
    """Blocks the emulator runs at once: one OS thread each (cpu.cpu_threads, which the child is told)."""
    from . import cpu
    return cpu.cpu_threads()


def resident_blocks(kern: "FusedKernel", dynamic_smem: int = 0) -> tuple[int, str]:
    """(blocks that can be resident at once, how that was found) for this kernel on its backend."""
    threads = kern.step.threads(kern.params)
    if kern.backend == "cpu":
        return cpu_workers(), "one block per emulator worker thread"
    from . import gpu
    dev = gpu.device()
    kern.module.allow_dynamic_shared(dynamic_smem)  # before the occupancy query counts it
    f = kern.module.function
    per_sm = None
    try:
        from cupy_backends.cuda.api import driver
        per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(getattr(f, "kernel", f).ptr, threads,
                                                                      dynamic_smem))
        how = "occupancy API"
    except Exception:  # an older CuPy: the same count from registers, threads and shared memory
        cc = dev["cc"] if dev["cc"] in SM_LIMITS else 90
        per_sm, _ = blocks_per_sm(f.num_regs, threads, f.shared_size_bytes + dynamic_smem, cc)
        how = "registers, threads and shared memory"
    return per_sm * dev["sms"], f"{per_sm} per SM x {dev['sms']} SMs ({how})"


# ------------------------------------------------------------------------------------------------
# A compiled fused step
# ------------------------------------------------------------------------------------------------
class FusedKernel:
    """One fused step with fixed template parameters, compiled for one backend.

    `FusedKernel(A, B, C)` returns E = A B C. Inputs are checked (dtype, 2-D, contiguity, matching
    shapes, shapes the step cannot run) before anything launches.
    """

    def __init__(self, step: FusedStep, params: dict, backend_name: str | None = None, source: str | None = None):
        self.step = step
        self.backend = _kernel.backend(backend_name)
        target = _kernel.gpu_target(step, get) if self.backend == "gpu" else None  # ArchError first
        self.params = step.resolve(params, self.backend)  # the rules of the backend asked for, not the live GPU's
        self.source = assemble(step.file, source)
        self.name_expression = step.name_expression(self.params)
        self.label = f"{step.name}<" + ", ".join(f"{k}={v}" for k, v in self.params.items()) + ">"
        self.module = _kernel.compiled_module(self.backend, self.source, self.name_expression, self.label, target)
        self._scratch: dict = {}
        self._checked: set = set()  # run()'s layout keys already checked

    def __repr__(self) -> str:
        return f"FusedKernel({self.label}, backend={self.backend!r})"

    @property
    def name(self) -> str:
        return self.step.name

    def check_inputs(self, a, b, c) -> Dims:
        """(M, K, L, N) of valid inputs; an InputError (or ShapeError) saying what to fix otherwise."""
        _kernel.check_matrices(self.name, np.dtype(np.float32), {"A": a, "B": b, "C": c})
        (m, k), (k2, l), (l2, n) = a.shape, b.shape, c.shape
        if k != k2 or l != l2:
            raise InputError(f"shapes do not chain: A is {m}x{k}, B is {k2}x{l}, C is {l2}x{n}; A's columns must "
                             f"equal B's rows and B's columns must equal C's rows")
        dims = (m, k, l, n)
        with limits_of(self.backend):
            problems = self.step.shape_rules(self.params, dims)
        if problems:
            raise ShapeError(f"{self.name} cannot run M={m}, K={k}, L={l}, N={n}: " + "; ".join(problems) + ".")
        check_32bit_indices(self.name, {"A": (m, k), "B": (k, l), "C": (l, n), "T = A B": (m, l), "E": (m, n)})
        return dims

    def check_output(self, a, b, c, e) -> None:
        """check_inputs, and E (what run() writes) of the backend's array type, float32, C-contiguous and
        M x N: an InputError saying what to fix otherwise."""
        m, _, _, n = self.check_inputs(a, b, c)
        _kernel.check_matrices(self.name, np.dtype(np.float32), {"E": e})
        _kernel.check_backend_arrays(self.name, self.backend, {"A": a, "B": b, "C": c, "E": e})
        _kernel.check_writable({"E": e})
        if tuple(e.shape) != (m, n):
            raise InputError(f"E is {e.shape[0]}x{e.shape[1]} but A B C is {m}x{n}; pass an output of shape ({m}, {n})")

    def __call__(self, a, b, c, timeout: float | None = None):
        """E = A B C. `timeout`: seconds the CPU backend waits for the launch (default: cpu.timeout_for)."""
        dims = self.check_inputs(a, b, c)
        m, k, l, n = dims
        is_cupy = any(type(x).__module__.startswith("cupy") for x in (a, b, c))
        xp = __import__("cupy") if self.backend == "gpu" else np
        a, b, c = (_kernel.to_array(xp, x) for x in (a, b, c))
        if self.step.tensor_maps and xp is not np:  # TMA reads from 16-byte boundaries: copy an offset view
            a, b, c = (x.copy() if x.data.ptr % 16 else x for x in (a, b, c))
        e = xp.zeros((m, n), dtype=np.float32)
        if m and n and k and l:
            self.run(a, b, c, e, timeout=timeout)
        return _kernel.to_array(__import__("cupy") if is_cupy else np, e)

    # --- launch ---
    def tiles(self, dims: Dims) -> int:
        """Output tiles of the larger phase: the most blocks that have work."""
        m, k, l, n = dims
        bm, bn = self.step.tile(self.params)
        return cdiv(m, bm) * cdiv(max(l, n), bn)

    def grid_for(self, dims: Dims, grid: int | None = None) -> int:
        """Blocks to launch. Persistent step: min(tiles, resident blocks), or `grid` if it fits."""
        m = dims[0]
        if not self.step.persistent:
            if grid is not None:
                raise ConfigError(f"grid={grid!r} applies to a persistent step only (fused/03_two_phase and later, "
                                  f"whose blocks stay resident); {self.name} sets its own grid, one block per "
                                  f"{self.step.tile(self.params)[0]}-row tile of A: leave grid out")
            return cdiv(m, self.step.tile(self.params)[0])
        resident, how = resident_blocks(self, self.step.smem(self.params, dims))
        if resident < 1:
            raise ConfigError(f"{self.label}: not even one block fits on an SM ({how}); choose smaller tiles")
        if grid is None:
            return max(1, min(self.tiles(dims), resident))
        if not isinstance(grid, (int, np.integer)) or grid < 1:
            raise ConfigError(f"grid must be a positive number of blocks, not {grid!r}")
        if grid > resident:
            raise ConfigError(f"{self.label}: a grid of {grid} blocks cannot all be resident at once (at most "
                              f"{resident}: {how}); a block waiting for one that never starts would wait forever. Launch at most {resident}.")
        return int(grid)

    def launch_config(self, dims: Dims, grid: int | None = None) -> Launch:
        return Launch((self.grid_for(dims, grid), 1, 1), (self.step.threads(self.params), 1, 1),
                      self.step.smem(self.params, dims))

    def workspace(self, xp, m: int, l: int):
        """Scratch T (M x L) and the sync words, zeroed once: the grid barrier's word (it resets itself), or
        a counter per 32 x 32 piece of T, enough for step 08's tiles and for the experiments' (results/experiments/
        fusion-tma: tiles of 32 rows x 64 columns); each launch leaves them at zero."""
        words = max(2, cdiv(m, WGMMA_TILE_K) * cdiv(l, WGMMA_TILE_K))
        if xp is np:  # the emulator copies arrays per launch: fresh ones cost nothing
            return np.empty((m, l), np.float32), np.zeros(words, np.uint32)
        key = (m, l)
        if key not in self._scratch:
            self._scratch = {key: (xp.empty((m, l), np.float32), xp.zeros(words, np.uint32))}
        return self._scratch[key]

    def launch_args(self, a, b, c, e, grid: int | None = None) -> tuple[Launch, list]:
        """The launch configuration and the kernel's arguments for arrays on the backend's device
        (the sizes, the four matrices, and for a persistent step its scratch T and barrier word)."""
        m, k = a.shape
        l, n = c.shape
        args = [np.int32(m), np.int32(k), np.int32(l), np.int32(n), a, b, c, e]
        if self.step.persistent:
            xp = np if isinstance(a, np.ndarray) else __import__("cupy")
            t, sync = self.workspace(xp, m, l)
            args += [t, sync]
            if self.step.tensor_maps:  # step 07: TMA reads A, B, C and T through maps
                args += self.step.tensor_maps(self.backend, a, b, c, t, self.step.tile(self.params))
        return self.launch_config((m, k, l, n), grid), args

    def run(self, a, b, c, e, grid: int | None = None, stream=None, timeout: float | None = None) -> None:
        """Launch on arrays already on the backend's device (no copies): for timing. The arrays are checked
        (check_output) once per distinct shape, dtype and layout, as Kernel.run does.
        `timeout`: seconds the CPU backend waits (default: cpu.timeout_for of the problem's work)."""
        key = _kernel.layout_key(a, b, c, e)
        if key not in self._checked:
            self.check_output(a, b, c, e)
            self._checked.add(key)
        cfg, args = self.launch_args(a, b, c, e, grid)
        if self.backend == "gpu":
            self.module.launch(cfg.grid, cfg.block, args, cfg.shared_bytes, stream=stream)
        else:
            from . import cpu
            (m, k), (l, n) = a.shape, c.shape
            cpu.launch(self.module, cfg.grid, cfg.block, args, shared_mem=cfg.shared_bytes,
                       timeout=cpu.timeout_for(m * l * (k + n)) if timeout is None else timeout, inputs=(4, 5, 6))

    def launcher(self, a, b, c, e, graph: bool = False):
        """A no-argument function that launches on these device arrays: for timing (GPU only).

        The first launch goes through run() and its checks; the returned function reuses that
        launch's grid, arguments and workspace, so the time measured is the kernel's, not the
        Python around it (the occupancy query and the launch checks cost microseconds, as much as
        the whole kernel at N = 256). It calls cuLaunchKernel with arguments packed once
        (gpu.GpuModule.packed_launcher): CuPy's own call re-converts them each time, which at 512
        costs a noticeable share of the event time (results/experiments/fusion-kernel-time).
        graph=True: it replays a CUDA graph of that launch instead (gpu.graph_launcher), which costs
        less host time per call than cuLaunchKernel.
        """
        self.run(a, b, c, e)
        cfg, args = self.launch_args(a, b, c, e)
        if graph:
            from . import gpu
            return gpu.graph_launcher(self.module.function, self.label, cfg.grid, cfg.block, args, cfg.shared_bytes)
        return self.module.packed_launcher(cfg.grid, cfg.block, args, cfg.shared_bytes)

    def resources(self, arch: str = "sm_90"):
        """Registers, shared memory and spills that ptxas reports for `arch` (compile-only, no GPU)."""
        from . import nvrtc
        return nvrtc.compile(self.source, self.name_expression, self.step.target(arch), label=self.label).resources


def compiled(name: str, arch: str = "sm_90", source: str | None = None, **params):
    """Compile-only (no backend, no GPU): fused step `name` compiled for `arch` (nvrtc.Artifact: PTX, cubin,
    ptxas' report), its parameters judged by that arch's limits, not the live GPU's (by the emulator's where the
    step's instructions do not exist on `arch`: the compile's ArchError then says why)."""
    from . import nvrtc
    st = get(name)
    cc = int(arch[3:].rstrip("a")) if re.fullmatch(r"sm_\d{2,3}a?", arch) else 0  # nvrtc.compile names a bad one
    p = st.resolve(params, arch if st.runs_on(cc) else "cpu")
    return nvrtc.compile(assemble(st.file, source), st.name_expression(p), st.target(arch), label=st.name)


def resources(name: str, arch: str = "sm_90", source: str | None = None, **params):
    """What ptxas reports for fused step `name` on `arch` (compile-only: compiled)."""
    return compiled(name, arch, source, **params).resources


class FusedInstance(_kernel.Instance):
    """A fused step with fixed template parameters, for compile-only analysis with no backend (gemmlab.instance of a
    fused name), as kernel.Instance is for a GEMM step (resources, ptx, sass; sm_90 unless an arch is given): its
    parameters are judged by each arch's limits when it compiles (compiled)."""
    ARCH = "sm_90"

    def __init__(self, step: FusedStep, params: dict, source: str | None = None):
        self.step = step
        self.params = step.resolve(params, "cpu")  # the emulator's limits, an H100's; compiled() re-judges per arch
        self.source_text = source
        self.label = f"{step.name}{self._param_text()}"

    def __repr__(self) -> str:
        return f"FusedInstance({self.label})"

    def compiled(self, arch: str | None = None):
        return compiled(self.name, self.ARCH if arch is None else arch, self.source_text, **self.params)

    def fit(self, arch: str | None = None, size: int = 1024) -> "nvrtc.Fit":  # noqa: F821 (nvrtc is imported in the body)
        """Whether one block fits `arch` (sm_90 by default): ptxas' report plus the step's threads and its dynamic
        shared memory for an N x N x N x N problem, against the arch's limits (nvrtc.fit), as kernel.Instance.fit."""
        from . import nvrtc

        dims = self.step.fit((size, size, size, size))
        return nvrtc.fit(self.resources(self.ARCH if arch is None else arch), self.step.threads(self.params),
                         self.step.smem(self.params, dims), compiler=nvrtc.version())


def step(name: str, backend: str | None = None, source: str | None = None, **params) -> FusedKernel:
    """Compile fused step `name` with template parameters `params` for the active (or given) backend."""
    return FusedKernel(get(name), params, backend, source)


# ------------------------------------------------------------------------------------------------
# Check against float64
# ------------------------------------------------------------------------------------------------
@dataclass
class Case:
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
class Report:
    name: str
    label: str
    cases: list[Case] = field(default_factory=list)
    failed: Case | None = None
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


def default_cases(kern: FusedKernel | None = None) -> list[Case]:
    """Structured inputs first (a failure there is a layout bug), then shapes off the tile grid."""
    bm, bn = kern.step.tile(kern.params) if kern else (16, 16)
    t = max(bm, bn, 4)
    cases = [Case("identity", t, t, t + 1, t + 3), Case("ones", bm + 1, 2 * t + 5, bn + 3, t - 1),
             Case("random", 1, 1, 1, 1), Case("random", 17, 17, 17, 17), Case("random", 2 * t + 3, t + 5, 3 * t + 7, t + 1),
             Case("random", 67, 33, 70, 129), Case("nan", t + 2, t + 1, t + 3, t + 2),
             Case("inf", t + 2, t + 1, t + 3, t + 2)]
    if kern:  # shapes the step takes (step 07: K, L, N multiples of 4)
        cases = [Case(c.kind, *kern.step.fit(c.dims)) for c in cases]
    return cases


def make_inputs(kind: str, m: int, k: int, l: int, n: int, seed: int = 0):
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


def reference(a, b, c) -> np.ndarray:
    """E = A B C in float64."""
    return product64(a, b, c)


def compare(got: np.ndarray, a, b, c) -> tuple[np.ndarray, np.ndarray]:
    """(bad mask, error/bound) of `got` against float64. The bound covers any summation order of
    both products: 2 (K + L) u (|A| |B|) |C| plus the output's rounding. Where the reference is
    Inf or NaN, the kernel must give the same (check.special_values); elsewhere NaN and Inf never pass."""
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    k, l = a.shape[1], b.shape[1]
    with np.errstate(invalid="ignore"):  # Inf * 0 and Inf - Inf in the "inf" case
        want = (a64 @ b64) @ c64
        bound = 2 * (k + l) * UNIT_ROUNDOFF * ((np.abs(a64) @ np.abs(b64)) @ np.abs(c64))
        bound += UNIT_ROUNDOFF * np.abs(want) + float(np.finfo(np.float32).smallest_subnormal)
        g = got.astype(np.float64)
        err = np.abs(g - want)
        ratio, bad = err / bound, ~(err <= bound)
    return special_values(bad, ratio, g, want)


def check(kern: FusedKernel | str, cases: list[Case] | None = None, raise_on_fail: bool = True, **params) -> Report:
    """Check a fused step on several shapes against float64; raise VerificationError listing mismatches."""
    if isinstance(kern, str):
        kern = step(kern, **params)
    report = Report(kern.name, kern.label)
    for case in cases or default_cases(kern):
        a, b, c = make_inputs(case.kind, *case.dims)
        got = np.asarray(_kernel.to_array(np, kern(a, b, c)))
        bad, ratio = kern.step.compare(got, a, b, c)
        case.worst = float(ratio.max()) if ratio.size else 0.0
        report.cases.append(case)
        if bad.any():
            want = reference(a, b, c)
            rows, cols = np.nonzero(bad)
            report.mismatches = [(int(r), int(col), float(got[r, col]), float(want[r, col]))
                                 for r, col in zip(rows[:8], cols[:8])]
            report.failed = case
            break
    if raise_on_fail and not report.passed:
        raise VerificationError(str(report))
    return report


# ------------------------------------------------------------------------------------------------
# Models: work, traffic, intensity (no GPU needed)
# ------------------------------------------------------------------------------------------------
def flops(n: int) -> int:
    """FLOPs of E = A B C for N x N matrices: two products of N^3 multiply-adds each."""
    return 4 * n ** 3


def traffic_bytes(n: int, fused: bool = True) -> int:
    """DRAM bytes at best: fused reads A, B, C and writes E; two GEMMs also write and re-read T."""
    return 4 * n * n * (4 if fused else 6)


def intensity(n: int, fused: bool = True) -> float:
    """FLOP per byte of the best-case traffic: N/4 fused, N/6 as two GEMMs."""
    return flops(n) / traffic_bytes(n, fused)


def document_intensity(n: int) -> float:
    """The seed's count: N^3 + N^2 + N - 2 operations over 4 N^2 floats x 4 bytes, about N/16."""
    return (n ** 3 + n ** 2 + n - 2) / (16 * n * n)


def ideal_time_s(n: int, tflops: float, gbps: float, fused: bool = True) -> float:
    """The roofline's lower bound on the time: the slower of the arithmetic and the traffic."""
    return max(flops(n) / (tflops * 1e12), traffic_bytes(n, fused) / (gbps * 1e9))


# ------------------------------------------------------------------------------------------------
# Records: results/<gpu>.fusion.json
# ------------------------------------------------------------------------------------------------
SUFFIX = ".fusion.json"
_KEY = ("step", "params", "kind", "m", "k", "l", "n")
# A record has the GEMM records' fields (results.py: step, params, dtype, m, n, k, median_s, tflops, baseline,
# baseline_median_s, pct_of_baseline, gpu, date) and the fused lane's own: l, kind, grid, threads, graph_median_s, ...


def records_path(gpu: str):
    return results.path_for(gpu, SUFFIX)


def load(gpu: str | None = None) -> list[dict]:
    """Recorded fusion records of one GPU (name or slug), or of every GPU; labelled source='recorded'."""
    return results.load(gpu, SUFFIX)


def _key_fields(r: dict) -> tuple:
    """A record's key: the benchmark times one configuration per step and size (FusedStep.tiles_for), so its
    new record replaces the old one whatever the tiles; a sweep keeps one record per configuration."""
    return tuple(f for f in _KEY if f != "params") if r["kind"] == "benchmark" else _KEY


def save(records: list[dict]):
    """Merge records into their GPU's file; a new record replaces one with the same key (_key_fields)."""
    if records:
        return results.save(records, SUFFIX, _key_fields, order=("kind", "step", "m", "params"))
    return None


def speedup(record: dict) -> float:
    """How many times faster than its baseline a record ran: baseline_median_s / median_s (pct_of_baseline / 100)."""
    return record["baseline_median_s"] / record["median_s"]


def lookup(records: list[dict], step: str, n: int, kind: str = "benchmark", params: dict | None = None) -> dict | None:
    """The record of `step` (a fused step or a baseline, "torch a@b@c") at size n (and `params`, if given), or None."""
    for r in records:
        if r["step"] == step and r["m"] == n and r["kind"] == kind and (params is None or r.get("params") == params):
            return r
    return None


def baseline(records: list[dict], n: int, kind: str = "benchmark") -> dict | None:
    """The faster of the BASELINES' records at size n (what the speed-ups are against), or None."""
    rows = [r for r in (lookup(records, b, n, kind) for b in BASELINES) if r]
    return min(rows, key=lambda r: r["median_s"]) if rows else None


# ------------------------------------------------------------------------------------------------
# Timing (GPU only)
# ------------------------------------------------------------------------------------------------
def repeats_for(n: int) -> int:
    """How many timed launches the fused lane takes at size n (more where a launch is short)."""
    return 300 if n <= 512 else 100 if n <= 1024 else 40 if n <= 2048 else 15


def time_call(fn, n_repeat: int, n_warmup: int = 10) -> dict:
    """Device time (bench's CUDA-event protocol) plus the wall time of a call and a synchronize."""
    import cupy

    t = time_back_to_back(fn, n_repeat, n_warmup)
    walls = []
    for _ in range(max(10, n_repeat // 3)):
        start = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        walls.append(time.perf_counter() - start)
    return {**t, "wall_median_s": float(statistics.median(walls)), "n_repeat": n_repeat}


def time_baselines(a, b, c, n_repeat: int) -> dict[str, dict]:
    """torch and cupy a @ b @ c (two cuBLAS launches, TF32 off), one torch GEMM, and both as CUDA graphs."""
    import cupy

    out = {}
    cupy.cuda.Device().synchronize()
    out["cupy a@b@c"] = time_call(lambda: cupy.matmul(cupy.matmul(a, b), c), n_repeat)
    s = cupy.cuda.Stream(non_blocking=True)
    try:  # the same two GEMMs captured once into a CUDA graph and replayed
        with s:
            for _ in range(3):
                cupy.matmul(cupy.matmul(a, b), c)
            s.synchronize()
            s.begin_capture()
            try:
                cupy.matmul(cupy.matmul(a, b), c)
            finally:
                graph = s.end_capture()
        out["cupy graph a@b@c"] = time_call(lambda: graph.launch(), n_repeat)
    except Exception as e:  # noqa: BLE001 (a CuPy that cannot capture this): say so, go on
        print(f"cupy graph capture skipped: {type(e).__name__}: {str(e)[:120]}")
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: the torch baselines are skipped (pip install torch)")
        return out
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    out["torch a@b@c"] = time_call(lambda: ta @ tb @ tc, n_repeat)
    out["torch a@b"] = time_call(lambda: ta @ tb, n_repeat)
    out["torch graph a@b@c"] = time_call(torch_graph_abc(ta, tb, tc), n_repeat)
    return out


def torch_graph_abc(ta, tb, tc):
    """`ta @ tb @ tc` captured once in a CUDA graph (after warm-up calls on a side stream): its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            ta @ tb @ tc
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _ = ta @ tb @ tc
    return g.replay


def _record(step: str, params: dict | None, kind: str, n: int, t: dict, base: dict, env: dict, **extra) -> dict:
    """A record in the GEMM records' schema (results.py), with the fused lane's fields besides (l, kind, ...)."""
    rec = {"step": step, "params": params or {}, "dtype": "float32", "kind": kind, "m": n, "k": n, "l": n, "n": n,
           **t, "tflops": flops(n) / t["median_s"] / 1e12, **extra}
    # against the fastest cuBLAS call for the same problem, eager (a CUDA graph is compared separately)
    against = [k for k in BASELINES if k in base] or list(base)
    if against:
        name = min(against, key=lambda k: base[k]["median_s"])
        rec.update(baseline=name, baseline_median_s=base[name]["median_s"],
                   baseline_tflops=flops(n) / base[name]["median_s"] / 1e12,
                   pct_of_baseline=100.0 * base[name]["median_s"] / t["median_s"],
                   baselines={k: v["median_s"] for k, v in base.items()})
    return {**rec, **env, "date": datetime.date.today().isoformat(), "source": "live"}


def random_inputs(n: int):
    """A, B, C: N x N float32 CuPy arrays, uniform in [-1, 1], seeded by N (the benchmark's and sweep's inputs)."""
    import cupy
    rng = cupy.random.default_rng(n)
    return tuple((rng.random((n, n), dtype=cupy.float32) * 2 - 1) for _ in range(3))


def reference_gpu(a, b, c):
    """E = A B C in float64 on the GPU (the full-size guard's reference)."""
    import cupy
    return cupy.matmul(cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64)), c.astype(cupy.float64))


def checked_launcher(kern: FusedKernel, a, b, c, want=None, tol: float = 1e-4, graph: bool = False):
    """(kern.launcher on a fresh E, max |E - E64| / max |E64|) after one launch at full size: a last guard,
    so that nothing is timed that does not match float64 there too (`want`: E64, computed if None;
    graph: the launcher replays a CUDA graph, FusedKernel.launcher)."""
    import cupy
    e = cupy.empty((a.shape[0], c.shape[1]), dtype=cupy.float32)
    launch = kern.launcher(a, b, c, e, graph=graph)
    want = reference_gpu(a, b, c) if want is None else want
    rel = float(cupy.abs(e - want).max() / cupy.abs(want).max())
    if not rel < tol:
        raise VerificationError(f"{kern.label} at {a.shape[0]}: max error {rel:.3g} of max |E|: not timed")
    return launch, rel


def _time_kernel(kern: FusedKernel, a, b, c, n_repeat: int) -> tuple[dict, dict]:
    """The step's call launched directly through cuLaunchKernel (the record's median_s, the protocol of every
    record), and replayed as a one-launch CUDA graph (graph_median_s), which costs less host time per call
    (gpu.graph_launcher)."""
    cfg = kern.launch_config((a.shape[0], a.shape[1], b.shape[1], c.shape[1]))
    want = reference_gpu(a, b, c)
    direct, rel = checked_launcher(kern, a, b, c, want)
    replay, _ = checked_launcher(kern, a, b, c, want, graph=True)
    graph_t = time_back_to_back(replay, n_repeat, 10)
    return time_call(direct, n_repeat), {"grid": cfg.grid[0], "threads": cfg.threads, "max_rel_error": rel,
                                     "graph_median_s": graph_t["median_s"]}


DEFAULT_SIZES = (256, 512, 1024, 2048, 4096)
DEFAULT_STEPS = ("fused/01_naive_row", "fused/02_row_panel", "fused/03_two_phase", "fused/04_split_k",
                 "fused/05_tf32x3", "fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3", "fused/08_tile_flags")
MAX_SIZE = {"fused/01_naive_row": 1024}  # its time grows as N^3 (tens of ms a call at 4096): timed up to here


def gpu_arch_ok(st: FusedStep) -> bool:
    """Whether the live GPU has the instructions step `st` needs (FusedStep.runs_on)."""
    from . import gpu
    return st.runs_on(gpu.device()["cc"])


def benchmark(names=DEFAULT_STEPS, sizes=DEFAULT_SIZES, params: dict | None = None, save_records: bool = True,
              verbose: bool = True, n_repeat: int | None = None, live: bool | None = None,
              gpu: str | None = None) -> list[dict]:
    """Baselines and fused steps at each size (N = M = K = L), all measured in the same run.

    Each step runs with its tiles for that size (FusedStep.tiles_for; `params` maps a step name to
    parameters that override them). On a GPU every kernel is checked first (check() raises before
    anything is timed); records are saved to results/<gpu>.fusion.json. Without a GPU, or with
    live=False: the recorded records for these sizes, of GPU `gpu` (a name or slug; every recorded
    GPU if None).
    """
    if live is False or _kernel.backend() != "gpu":
        recs = [r for r in load(gpu) if r["kind"] == "benchmark" and r["m"] in sizes]
        if verbose and not recs:
            print("No GPU here and no recorded fusion benchmark yet: the figures appear once the GPU lane has run "
                  "(python -m gemmlab fusion-lane).")
        return recs
    chosen = [(nm, get(nm)) for nm in names]
    chosen = [(nm, st) for nm, st in chosen if gpu_arch_ok(st)]
    compiled: dict = {}  # (name, its parameters) -> the checked kernel: one per set of tiles the sizes take

    def kernels_at(n: int) -> list[FusedKernel]:
        out = []
        for nm, st in chosen:
            if n > MAX_SIZE.get(st.name, n):
                continue
            p = st.resolve({**st.tiles_for((n,) * 4), **(params or {}).get(nm, {})})
            key = (st.name, tuple(p.items()))
            if key not in compiled:
                compiled[key] = step(st.name, **p)
                check(compiled[key])
            out.append(compiled[key])
        return out

    for n in sizes:  # every kernel compiled and checked before anything is timed
        kernels_at(n)
    env = environment()
    records = []
    for n in sizes:
        a, b, c = random_inputs(n)
        reps = n_repeat or repeats_for(n)
        base = time_baselines(a, b, c, reps)
        for name, t in base.items():
            records.append(_record(name, None, "benchmark", n, t, base, env))
        for k in kernels_at(n):
            try:
                t, extra = _time_kernel(k, a, b, c, reps)
            except (ShapeError, ConfigError) as e:
                if verbose:
                    print(f"{k.name:22s} {n:5d}  skipped: {str(e).splitlines()[0][:100]}")
                continue
            records.append(_record(k.name, k.params, "benchmark", n, t, base, env, **extra))
        if verbose:
            for r in records:
                if r["m"] == n:
                    sp = f"  {speedup(r):5.2f}x vs {r['baseline']}" if "pct_of_baseline" in r else ""
                    print(f"{r['step']:22s} {n:5d}  {r['median_s'] * 1e6:9.1f} us  wall {r['wall_median_s'] * 1e6:9.1f} us"
                          f"  {r['tflops']:6.2f} TFLOP/s{sp}")
    if save_records:
        save(records)
    return records


SWEEP_GRIDS = {
    "fused/03_two_phase": {"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128], "BLOCK_K": [16, 32],
                           "THREAD_M": [4, 8], "THREAD_N": [4, 8]},
    "fused/04_split_k": {"BLOCK_M": [32, 64], "BLOCK_N": [32, 64], "BLOCK_K": [8, 16, 32],
                         "THREAD_M": [4, 8], "THREAD_N": [4], "SPLIT_K": [2, 4, 8]},
    "fused/02_row_panel": {"PANEL_M": [2, 4, 8, 16], "BLOCK_N": [64, 128], "THREAD_M": [1, 2, 4],
                           "THREAD_N": [4]},
    "fused/05_tf32x3": {"BLOCK_M": [32, 64], "BLOCK_N": [32, 64], "BLOCK_K": [32], "WARP_M": [16, 32],
                        "WARP_N": [16, 32], "SPLIT_K": [1, 2, 4], "NUM_STAGES": [2, 3]},
    "fused/06_wgmma_tf32x3": {"BLOCK_N": [32, 64], "SPLIT_K": [1, 2, 4], "NUM_STAGES": [2, 3, 4]},
    "fused/07_tma_tf32x3": {"BLOCK_N": [32, 64], "SPLIT_K": [2, 3, 4, 6], "NUM_STAGES": [6, 8, 12]},
}
SWEEP_GRIDS["fused/08_tile_flags"] = SWEEP_GRIDS["fused/07_tma_tf32x3"]
# Large N wants large tiles: step 05's grid for 2048 and up (one group per tile, deeper pipelines),
# step 07's 64-column tiles.
SWEEP_GRIDS_LARGE = {
    "fused/05_tf32x3": {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [16, 32], "WARP_M": [32, 64],
                        "WARP_N": [32], "SPLIT_K": [1], "NUM_STAGES": [3, 4]},
    "fused/07_tma_tf32x3": {"BLOCK_N": [64], "SPLIT_K": [2, 3], "NUM_STAGES": [6, 8]},
}
SWEEP_GRIDS_LARGE["fused/08_tile_flags"] = SWEEP_GRIDS_LARGE["fused/07_tma_tf32x3"]


def sweep(name: str = "fused/03_two_phase", grid: dict | None = None, sizes=(512, 1024), save_records: bool = True,
          verbose: bool = True) -> list[dict]:
    """Every configuration of `grid` (a product of parameter values) at each size, against the baseline.

    Impossible configurations are skipped with the rule's sentence. Without a GPU: the recorded sweep.
    """
    st = get(name)
    if _kernel.backend() != "gpu":
        return [r for r in load() if r["kind"] == "sweep" and r["step"] == st.name and r["m"] in sizes]
    grid = grid or SWEEP_GRIDS[st.name]
    env = environment()
    records = []
    for n in sizes:
        a, b, c = random_inputs(n)
        reps = max(50, repeats_for(n) // 3)
        base = {k: v for k, v in time_baselines(a, b, c, reps).items() if k in BASELINES}
        for values in itertools.product(*grid.values()):
            p = dict(zip(grid, values))
            try:
                k = step(st.name, **p)
                check(k, cases=[Case("identity", *st.fit((33, 34, 35, 36))), Case("random", *st.fit((67, 33, 70, 129)))])
                t, extra = _time_kernel(k, a, b, c, reps)
            except GemmlabError as e:
                if verbose:
                    print(f"skip {p}: {str(e).splitlines()[0][:110]}")
                continue
            rec = _record(st.name, k.params, "sweep", n, t, base, env, **extra)
            records.append(rec)
            if verbose:
                print(f"{n:5d} {p}  {rec['median_s'] * 1e6:8.1f} us  grid {extra['grid']}"
                      + (f"  {speedup(rec):.2f}x" if "pct_of_baseline" in rec else ""))
    if save_records:
        save(records)
    return records


def best(records: list[dict], step: str, n: int) -> dict | None:
    """The fastest record of `step` at size n, benchmark or sweep."""
    rows = [r for r in records if r["step"] == step and r["m"] == n]
    return min(rows, key=lambda r: r["median_s"]) if rows else None


def lane(sizes=DEFAULT_SIZES, sweep_sizes=(512, 1024), sweep_names=("fused/08_tile_flags", "fused/07_tma_tf32x3", "fused/06_wgmma_tf32x3", "fused/05_tf32x3",
         "fused/04_split_k", "fused/03_two_phase", "fused/02_row_panel"), large_sizes=(2048, 4096)) -> list[dict]:
    """What the GPU lane runs: check every fused step, benchmark (baselines included), sweep the tiles."""
    if _kernel.backend() != "gpu":
        raise GemmlabError("the fusion lane needs a GPU (CuPy sees none here); without one, "
                           "check() runs the steps in the emulator and benchmark() returns the records")
    for st in FUSED_STEPS:
        if gpu_arch_ok(st):
            print(check(step(st.name)))
    recs = benchmark(sizes=sizes)
    for name in sweep_names:
        if not gpu_arch_ok(get(name)):
            print(f"{name} needs {get(name).arch_label}: not swept on this GPU")
            continue
        recs += sweep(name, sizes=sweep_sizes)
        if name in SWEEP_GRIDS_LARGE:
            recs += sweep(name, SWEEP_GRIDS_LARGE[name], sizes=large_sizes)
    # the best swept configurations of 03 and 04 at 512, benchmarked over every size
    for name in ("fused/03_two_phase", "fused/04_split_k"):
        top = best([r for r in recs if r["kind"] == "sweep"], name, 512)
        if top:
            recs += benchmark([name], sizes=sizes, params={name: top["params"]}, save_records=False, verbose=True)
            tuned = [dict(r, kind="tuned") for r in recs if r["kind"] == "benchmark" and r["step"] == name
                     and r["params"] == top["params"]]
            save(tuned)
    path = records_path(environment()["gpu"])
    print(f"records written to {path}")
    return recs


# ------------------------------------------------------------------------------------------------
# The chapter's slider: check a configuration at a small N, show its recorded timings
# ------------------------------------------------------------------------------------------------
def config_problem(name: str, backend: str | None = None, **params) -> str | None:
    """Why a configuration cannot run on `backend` (default: the active one), the rule's sentence, or None."""
    try:
        get(name).resolve(params, backend)
    except GemmlabError as e:
        return str(e)
    return None


def slider_report(name: str, n: int = 64, backend: str | None = "cpu", **params) -> str:
    """The text under the chapter's sliders: can it run, does it match float64 at N, what was recorded."""
    _kernel.check_size(n, "n")
    problem = config_problem(name, backend, **params)
    if problem:
        return f"cannot run: {problem}"
    try:
        k = step(name, backend=backend, **params)
        grid = k.launch_config((n, n, n, n)).grid[0]
        lines = [k.label, f"N={n}: {grid} block(s) of {k.step.threads(k.params)} threads ({k.backend} backend)",
                 str(check(k, cases=[Case("identity", *k.step.fit((n, n, n, n))),
                                     Case("random", *k.step.fit((n, n + 3, n + 1, n)))], raise_on_fail=False))]
    except GemmlabError as e:
        return f"cannot run: {str(e).splitlines()[0]}"
    recs = [r for r in load() if r["step"] == k.name and r.get("params") == k.params]
    if recs:
        for r in sorted(recs, key=lambda r: (r["m"], r["kind"])):
            sp = f", {speedup(r):.2f}x {r['baseline']}" if "pct_of_baseline" in r else ""
            lines.append(f"recorded {r['kind']} at {r['m']}: {r['median_s'] * 1e6:.1f} us{sp} ({r['gpu']}, {r['date']})")
    else:
        lines.append("no recorded GPU timing for this configuration yet")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m gemmlab.runtime.fusion check | bench | lane`, kept for the scripts that call it: a route into the one
    command line, `python -m gemmlab verify | bench | fusion-lane`, over every fused step where none is named."""
    ap = argparse.ArgumentParser(prog="python -m gemmlab.runtime.fusion", description=main.__doc__)
    ap.add_argument("command", choices=("check", "bench", "lane"))
    ap.add_argument("steps", nargs="*", metavar="STEP", help="check, bench: the fused steps (default: all)")
    ap.add_argument("--backend", choices=("gpu", "cpu"), help="check: where the steps run")
    ap.add_argument("--sizes", type=int, nargs="+", help="bench: N = M = K = L (default: 256 to 4096)")
    ap.add_argument("--sweeps", nargs="+", metavar="STEP", help="lane: the steps whose tiles are swept")
    args = ap.parse_intermixed_args(argv)
    from ..__main__ import main as cli

    if args.command == "lane":
        return cli(["fusion-lane", *(["--sweeps", *args.sweeps] if args.sweeps else [])])
    return cli(["verify" if args.command == "check" else "bench", *(args.steps or DEFAULT_STEPS),
                *(["--backend", args.backend] if args.backend else []),
                *[x for n in args.sizes or () for x in ("--size", str(n))]])


if __name__ == "__main__":
    raise SystemExit(main())
