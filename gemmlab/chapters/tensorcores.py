"""Chapter 7's tools: the fragment demo kernels, the fp16-accumulate variant, the tiling pictures.

- `mma_demo` / `ldmatrix_demo` launch the single-warp kernels of kernels/demo/mma_fragments.cu on
  either backend and decode their registers into the maps of `gemmlab.layouts` (the tested twin),
  so a notebook can check that hardware, emulator and twin agree.
- `f16_accumulate` is step hgemm/01 with fp16 accumulators (kernels/demo/01_f16_accumulate.cu): a
  `Kernel` built from a `Step` kept here, so the ladder in `registry.STEPS` stays as it is.
- `accumulate_model` replays a kernel's summation order in NumPy (fp32, or fp16 after every mma),
  to take the accuracy study past the K the emulator can run quickly.
- `block_warp_mma_tiles` and the `draw_*` functions make the chapter's pictures.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import numpy as np

from . import layouts
from ..runtime import registry
from ..errors import ConfigError
from ..runtime.source import assemble
from ..runtime.kernel import Kernel
from ..runtime import cpu, gpu, kernel, nvrtc
from ..errors import GemmlabError
from . import explore
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import html
from ..runtime import optional
widgets = optional.lazy("ipywidgets")  # the live controls only: the command line runs without it
from .glue import ipy_display as display  # IPython's, imported when first called


DEMO_FILE = "demo/mma_fragments.cu"
MMA_K = {"m16n8k8": 8, "m16n8k16": 16}
MIN_ARCH = {"m16n8k8": 75, "m16n8k16": 80}

F16_ACCUMULATE = dataclasses.replace(
    registry.get("hgemm/01_mma_tiling"), name="demo/01_f16_accumulate", symbol="hgemm_f16_accumulate",
    accumulate="float16", previous="hgemm/01_mma_tiling",
    summary="step 01 with fp16 accumulators: mma.m16n8k8 f16.f16.f16.f16")


def f16_accumulate(backend: str | None = None, **params):
    """Step hgemm/01 with fp16 accumulators, compiled for the active (or given) backend."""
    return Kernel(F16_ACCUMULATE, params, backend)


# ---------------------------------------------------------------------------------------------
# The demo kernels: launch, decode


def demo_backend(min_arch: int = 75, backend: str | None = None) -> str:
    """The backend a demo runs on: the active one, or the CPU where the GPU lacks the instruction."""
    name = kernel.backend(backend)
    if name == "gpu":
        if gpu.device()["cc"] < min_arch:
            return "cpu"
    return name


def _launch(expr: str, inputs: list[np.ndarray], outputs: list[np.ndarray], backend: str) -> list[np.ndarray]:
    """One launch of a demo kernel (one warp) on `backend`; returns the output arrays on the host."""
    module = kernel.compiled_module(backend, assemble(DEMO_FILE), expr, f"demo/mma_fragments {expr}")
    if backend == "gpu":
        import cupy  # optional: a GPU only

        args = [cupy.asarray(x) for x in inputs + outputs]
        module.launch((1, 1, 1), (32, 1, 1), args)
        return [a.get() for a in args[len(inputs):]]

    args = list(inputs) + [o.copy() for o in outputs]
    cpu.launch(module, (1, 1, 1), (32, 1, 1), args)
    return args[len(inputs):]


def encoded(rows: int, cols: int) -> np.ndarray:
    """A rows x cols fp16 matrix whose element (r, c) is r * cols + c (exact up to 2048)."""
    return np.arange(rows * cols, dtype=np.float16).reshape(rows, cols)


def halves(regs: np.ndarray) -> np.ndarray:
    """u32 registers, lane-major, as their fp16 halves in order (low half = element 2i)."""
    return np.ascontiguousarray(regs, dtype=np.uint32).view(np.float16).astype(np.int64)


def mma_demo(shape: str = "m16n8k8", backend: str | None = None) -> dict:
    """Run mma_fragments<K> twice and decode what each lane holds.

    Launch 1: A(r, c) = r*K + c and B(k, n) = k*8 + n, so each A and B register half names its
    element. Launch 2: A = [m, 1, 0, ...] per row and B = [8; n; 0; ...], so D(m, n) = 8m + n names
    its element. Returns {"a", "b", "c": {(lane, i): (row, col)}, "backend": where it ran,
    "raw": the registers of both launches}; the maps have the format of `layouts.mma_fragment`.
    """
    m, n, k = layouts.mma_mnk(shape)
    where = demo_backend(MIN_ARCH[shape], backend)
    expr = f"mma_fragments<{k}>"
    outs = [np.zeros(32 * k // 4, np.uint32), np.zeros(32 * k // 8, np.uint32), np.zeros(32 * 4, np.float32)]
    a_regs, b_regs, _ = _launch(expr, [encoded(m, k), encoded(k, n)], outs, where)
    a_d = np.zeros((m, k), np.float16)
    a_d[:, 0], a_d[:, 1] = np.arange(m), 1
    b_d = np.zeros((k, n), np.float16)
    b_d[0, :], b_d[1, :] = n, np.arange(n)
    _, _, d_regs = _launch(expr, [a_d, b_d], outs, where)
    maps: dict = {}
    for operand, values, cols in (("a", halves(a_regs), k), ("b", halves(b_regs), n),
                                  ("c", d_regs.astype(np.int64), n)):
        per_lane = layouts.elements_per_lane(shape, operand)
        values = values.reshape(32, per_lane)
        maps[operand] = {(lane, i): divmod(int(values[lane, i]), cols)
                         for lane in range(32) for i in range(per_lane)}
    return {**maps, "backend": where, "raw": {"a": a_regs, "b": b_regs, "d": d_regs}}


def ldmatrix_demo(num: int = 4, trans: bool = False, backend: str | None = None) -> dict:
    """Run ldmatrix_fragments<num, trans> on matrices whose element (j, r, c) holds j*64 + r*8 + c.

    Returns {(lane, register j, half e): (matrix, row, col)} in the format of
    `layouts.ldmatrix_fragment` (coordinates as stored in shared memory).
    """
    layouts.check_ldmatrix_num(num)
    where = demo_backend(75, backend)
    expr = f"ldmatrix_fragments<{num}, {'true' if trans else 'false'}>"
    (regs,) = _launch(expr, [encoded(num * 8, 8)], [np.zeros(32 * num, np.uint32)], where)
    values = halves(regs).reshape(32, num, 2)
    out = {}
    for lane in range(32):
        for j in range(num):
            for e in range(2):
                v = int(values[lane, j, e])
                out[(lane, j, e)] = (v // 64, (v % 64) // 8, v % 8)
    return out


def lane_table(frag: Dict[Tuple[int, int], Tuple[int, int]], rows: int, cols: int) -> str:
    """The matrix as text: each element shows 'lane.i', the lane and element index holding it."""
    cell = {rc: f"{lane}.{i}" for (lane, i), rc in frag.items()}
    width = max(len(v) for v in cell.values()) + 1
    lines = ["     " + "".join(f"{c:>{width}d}" for c in range(cols))]
    for r in range(rows):
        lines.append(f"{r:3d}  " + "".join(f"{cell[(r, c)]:>{width}s}" for c in range(cols)))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Accuracy of the accumulator


def accumulate_model(a: np.ndarray, b: np.ndarray, accumulate: str = "float16", mma_k: int = 8) -> np.ndarray:
    """C = A @ B summed as an mma.sync GEMM of the course sums it, in NumPy, rounded to fp16.

    Along K, one mma at a time (k ascending, `mma_k` deep): the accumulator enters as a float, each
    product (exact in fp32 for fp16 inputs) is added in fp32, and with accumulate='float16' the sum
    is rounded to fp16 after every mma. This is the emulator's mma twin; the GPU's tensor cores
    round inside an mma differently, so they agree with it to rounding, not bit for bit.
    """
    if accumulate not in ("float16", "float32"):
        raise ConfigError(f"accumulate must be 'float16' or 'float32', not {accumulate!r}")
    a32, b32 = np.asarray(a, np.float16).astype(np.float32), np.asarray(b, np.float16).astype(np.float32)
    acc = np.zeros((a32.shape[0], b32.shape[1]), np.float32)
    for k0 in range(0, a32.shape[1], mma_k):
        for k in range(k0, min(k0 + mma_k, a32.shape[1])):
            acc += np.outer(a32[:, k], b32[k])
        if accumulate == "float16":
            acc = acc.astype(np.float16).astype(np.float32)
    return acc.astype(np.float16)


def relative_error(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """||got - A @ B|| / ||A @ B|| (Frobenius), A @ B in float64."""
    want = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


def accuracy_inputs(m: int, n: int, k: int, kind: str = "uniform", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """fp16 inputs for the accuracy study: 'uniform' in [-1, 1], or 'positive' in [0, 1]."""
    rng = np.random.default_rng(seed + k)
    lo = -1.0 if kind == "uniform" else 0.0
    return (rng.uniform(lo, 1, (m, k)).astype(np.float16), rng.uniform(lo, 1, (k, n)).astype(np.float16))


# ---------------------------------------------------------------------------------------------
# The hierarchical tiling: which warp computes which part of a block tile


def block_warp_mma_tiles(params: dict) -> dict:
    """The three levels of hgemm/01-03 for `params`: warp tile origins and mma tile origins.

    {"warps": [(warp_id, row, col) of each warp tile in the block tile], "mma": [(row, col) of each
    16 x 8 mma tile in a warp tile], "threads": threads per block}, as the kernels compute them
    (warp_row = (warp_id / WARPS_N) * WARP_M, warp_col = (warp_id % WARPS_N) * WARP_N).
    """
    p = registry.get("hgemm/01_mma_tiling").resolve(params)
    warps_n = p["BLOCK_N"] // p["WARP_N"]
    warps = (p["BLOCK_M"] // p["WARP_M"]) * warps_n
    return {"warps": [(w, (w // warps_n) * p["WARP_M"], (w % warps_n) * p["WARP_N"]) for w in range(warps)],
            "mma": [(m, n) for m in range(0, p["WARP_M"], 16) for n in range(0, p["WARP_N"], 8)],
            "threads": 32 * warps}


def draw_hierarchy(params: dict, size: int = 512, axes=None):
    """Three panels: C split into block tiles; one block tile into warp tiles; one warp tile into mma tiles."""
    p = registry.get("hgemm/01_mma_tiling").resolve(params)
    tiles = block_warp_mma_tiles(p)
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(11, 3.8))
    ax0, ax1, ax2 = axes
    bm, bn, wm, wn = p["BLOCK_M"], p["BLOCK_N"], p["WARP_M"], p["WARP_N"]
    for r in range(0, size, bm):
        for c in range(0, size, bn):
            ax0.add_patch(Rectangle((c, r), bn, bm, fill=(r, c) == (bm, bn), fc="tab:orange", ec="0.4", lw=0.6))
    ax0.set_title(f"C ({size} x {size}): block tiles {bm} x {bn}\none thread block each", fontsize=9)
    colours = plt.get_cmap("tab20")
    for w, r, c in tiles["warps"]:
        ax1.add_patch(Rectangle((c, r), wn, wm, fc=colours(w % 20), ec="k", lw=0.8, alpha=0.8))
        ax1.text(c + wn / 2, r + wm / 2, f"warp {w}", ha="center", va="center", fontsize=7)
    ax1.set_title(f"block tile {bm} x {bn}: warp tiles {wm} x {wn}\n{tiles['threads']} threads", fontsize=9)
    for i, (r, c) in enumerate(tiles["mma"]):
        ax2.add_patch(Rectangle((c, r), 8, 16, fc="tab:orange" if i == 0 else "white", ec="0.3", lw=0.6))
    ax2.set_title(f"warp tile {wm} x {wn}: {len(tiles['mma'])} mma tiles 16 x 8\n"
                  f"{len(tiles['mma']) * 4} fp32 accumulators per lane", fontsize=9)
    for ax, (h, w) in zip(axes, ((size, size), (bm, bn), (wm, wn))):
        ax.set_xlim(0, w)
        ax.set_ylim(h, 0)
        ax.set_aspect("equal")
        ax.set_xlabel("columns (N)", fontsize=8)
        ax.tick_params(labelsize=7)
    ax0.set_ylabel("rows (M)", fontsize=8)
    return axes


# ---------------------------------------------------------------------------------------------
# Fragment pictures, drawn from the twin in gemmlab.layouts


def draw_mma_fragment(ax, shape: str, operand: str):
    """One operand of mma.`shape`: each element labelled 'T<lane>' and the element index it is in that lane."""
    frag = layouts.mma_fragment(shape, operand)
    rows, cols = layouts.mma_operand_shape(shape, operand)
    colours = plt.get_cmap("Pastel1")
    name = {"a": "a", "b": "b", "c": "c"}[operand]
    for (lane, i), (r, c) in frag.items():
        ax.add_patch(Rectangle((c, r), 1, 1, fc=colours(lane % 4), ec="0.5", lw=0.4))
        ax.text(c + 0.5, r + 0.5, f"T{lane}\n{name}{i}", ha="center", va="center", fontsize=5.5)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(cols) + 0.5, range(cols), fontsize=6)
    ax.set_yticks(np.arange(rows) + 0.5, range(rows), fontsize=6)
    label = {"a": ("A", "M", "K"), "b": ("B", "K", "N"), "c": ("C / D", "M", "N")}[operand]
    ax.set_title(f"{shape} {label[0]} ({rows} x {cols}, rows {label[1]}, cols {label[2]})", fontsize=8)
    return ax


def draw_ldmatrix(ax, num: int, trans: bool = False):
    """ldmatrix.x`num` (.trans): the matrices as stored; each element labelled with the lane and
    register that receive it; the lane that gives each row's address on the left."""
    frag = layouts.ldmatrix_fragment(num, trans)
    provider = {v: lane for lane, v in layouts.ldmatrix_row_provider(num).items()}
    colours = plt.get_cmap("Pastel1")
    for (lane, j, e), (mat, r, c) in frag.items():
        x = mat * 9 + c
        ax.add_patch(Rectangle((x, r), 1, 1, fc=colours(lane % 4), ec="0.5", lw=0.4))
        ax.text(x + 0.5, r + 0.5, f"T{lane}\nr{j}", ha="center", va="center", fontsize=5.5)
    for (mat, r), lane in provider.items():
        ax.text(mat * 9 - 0.15, r + 0.5, f"T{lane}", ha="right", va="center", fontsize=5.5, color="tab:red")
    for mat in range(num):
        ax.text(mat * 9 + 4, -0.4, f"matrix {mat}", ha="center", fontsize=7)
    ax.set_xlim(-1.2, num * 9 - 1)
    ax.set_ylim(8, -1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"ldmatrix .x{num}{'.trans' if trans else ''}: element -> lane, register "
                 "(red: the lane giving that row's address)", fontsize=8)
    return ax


# ---------------------------------------------------------------------------------------------
# What the compiler and the profiler say about a step


INTEGER_OPS = ("IMAD", "IADD3", "LOP3", "SHF", "LEA", "ISETP", "IMNMX", "SEL", "MOV")


def sass_summary(inst, arch: str = "sm_75") -> dict:
    """Static SASS counts of a compiled instance: 16-byte and narrower global loads, shared stores,
    LDSM (ldmatrix), HMMA, integer instructions; and registers."""
    ops = nvrtc.opcodes(inst.sass(arch))
    ldg = [op for op in ops if op.startswith("LDG")]
    sts = [op for op in ops if op.startswith("STS")]
    return {"LDG.128": sum(".128" in op for op in ldg), "LDG narrower": sum(".128" not in op for op in ldg),
            "STS.128": sum(".128" in op for op in sts), "STS narrower": sum(".128" not in op for op in sts),
            "LDSM": sum(op.startswith("LDSM") for op in ops), "HMMA": sum(op.startswith("HMMA") for op in ops),
            "integer": sum(op.split(".")[0] in INTEGER_OPS for op in ops),
            "registers": inst.resources(arch).registers}


# ---------------------------------------------------------------------------------------------
# Sliders over the tiles of steps 01-03


TILED_STEPS = ("hgemm/01_mma_tiling", "hgemm/02_vectorized_copy", "hgemm/03_swizzled")


def tiling_problem(step: str, **params) -> str | None:
    """Why these tiles cannot run (the registry's sentence), or None when they can."""
    try:
        registry.get(step).resolve(params)
    except GemmlabError as e:
        return str(e)
    return None


def tiling_report(step: str, size: int = 2048, time: bool = True, **params) -> str:
    """The text under the chapter 7 sliders: accumulators per lane, mma tiles per warp, then
    `explore.report` (resources, occupancy, the float64 check, and a timing on a GPU)."""
    problem = tiling_problem(step, **params)
    if problem:
        return f"cannot run: {problem}"
    t = block_warp_mma_tiles(params)
    head = (f"{len(t['warps'])} warps of {len(t['mma'])} mma tiles each: {4 * len(t['mma'])} fp32 accumulators "
            f"per lane; block tile intensity {_intensity(params):.1f} FLOP per byte loaded")
    return head + "\n" + explore.report(step, size=size, time=time, **params)


def _intensity(params: dict) -> float:
    p = registry.get("hgemm/01_mma_tiling").resolve(params)
    return p["BLOCK_M"] * p["BLOCK_N"] / (p["BLOCK_M"] + p["BLOCK_N"])


def tiling_explorer(step: str = TILED_STEPS[-1], size: int = 2048):
    """Dropdowns for the step and its block and warp tiles; redraws the tiling picture and the report
    (ipywidgets 7 and 8). An impossible combination gets the registry's sentence, no picture."""
    spec = registry.get(step).params
    which = widgets.Dropdown(options=list(TILED_STEPS), value=step, description="step")
    controls = {p: widgets.Dropdown(options=list(s.choices), value=s.default, description=p)
                for p, s in spec.items()}
    picture, text = widgets.Output(), widgets.HTML()

    def redraw(*_):
        params = {p: c.value for p, c in controls.items()}
        text.value = f"<pre>{html.escape(tiling_report(which.value, size=size, **params))}</pre>"
        with picture:
            picture.clear_output(wait=True)
            if tiling_problem(which.value, **params) is None:
                fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
                draw_hierarchy(params, axes=axes)
                display(fig)
                plt.close(fig)

    for c in [which, *controls.values()]:
        c.observe(redraw, names="value")
    redraw()
    rows = [widgets.HBox([which] + list(controls.values())[:2]), widgets.HBox(list(controls.values())[2:])]
    return widgets.VBox(rows + [text, picture])
