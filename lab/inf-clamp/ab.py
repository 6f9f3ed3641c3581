"""What keeping Inf costs the 3xTF32 steps (sgemm/12, fused/05 to 08): each step as it is (the three-instruction
split; the epilogue recomputes in fp32 the outputs an Inf made NaN: common.cuh's any_nan / repair_nans) against
the same step with big clamped in the split instead (commit ebbeb35's tf32_big, written out; no repair) and
without either (as before ebbeb35: an Inf becomes NaN), timed launch by launch in turn with cuBLAS on the same
inputs, on an H100 or H200. All three are checked first: the step and the clamped one against float64 with
the Inf case, the bare one without it.

    python lab/inf-clamp/ab.py [ROUNDS] > ab.json      (one JSON line per size and round; a table on stderr)
"""
import json
import pathlib
import sys

import numpy as np

import gemmlab
from gemmlab import bench, check, fusion
from gemmlab.chapters.fusion_report import params_text
from gemmlab.runtime.source import kernel_path

SPLIT = "    big = tf32_round(x);\n    small = __float_as_uint(x - __uint_as_float(big));\n"
CLAMPED = ("    const float b = fminf(fmaxf(__uint_as_float(tf32_round(x)), -0x1.ffcp+127f), 0x1.ffcp+127f);  // tf32_big\n"
           "    big = __float_as_uint(b);\n    small = __float_as_uint(x - b);\n")
TEST = "any_nan<"  # the epilogue's test; "false && " before it takes the repair out (dead code)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
REPEAT = 30


def variant(path: pathlib.Path, clamp: bool) -> str:
    """The step without its epilogue repair, and with the clamp in its split if `clamp`."""
    text = path.read_text()
    if text.count(SPLIT) != 1 or text.count(TEST) != 1:
        raise SystemExit(f"{path}: expected one three-instruction split and one any_nan test (what this experiment changes)")
    return text.replace(TEST, "false && " + TEST).replace(SPLIT, CLAMPED if clamp else SPLIT)


def rotated(calls: dict, r: int) -> dict:
    """The calls with the kernels (not the baselines) in turn first after the baselines: round r starts with the
    r-th kernel. The first kernel timed after cuBLAS ran measurably slower at 512 (by up to a quarter on the
    H100 and H200) than in any other place, so a fixed order would charge that to one variant."""
    base = [k for k in calls if k.startswith(("cupy", "torch"))]
    kernels = [k for k in calls if k not in base]
    order = kernels[r % len(kernels):] + kernels[:r % len(kernels)]
    return {k: calls[k] for k in base + order}


def report(line: dict) -> None:
    print(json.dumps(line), flush=True)
    base = min(v for k, v in line["us"].items() if k.startswith(("cupy", "torch")))
    print(f"{line['what']:22s} {line['size']:5d} round {line['round']}: " + "  ".join(
        f"{k} {v:8.1f} us ({base / v * 100 if not k.startswith(('cupy', 'torch')) else 100:5.1f}%)"
        for k, v in line["us"].items()), file=sys.stderr, flush=True)


def time_rounds(what: str, size: int, calls: dict, rounds: int, repeat: int, warmup: int) -> None:
    """`rounds` rounds of the interleaved loop over `calls`, the kernels' order rotated round by round; one report each."""
    for r in range(rounds):
        t = bench.time_interleaved(rotated(calls, r), repeat, warmup)
        report({"what": what, "size": size, "round": r, "us": {k: t[k]["median_s"] * 1e6 for k in calls}})


def gemm(rounds: int) -> None:
    import cupy
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    name = "sgemm/12_tf32x3"
    step = gemmlab.step(name, backend="gpu")
    clamped = gemmlab.step(name, backend="gpu", source=variant(kernel_path(step.step.file), True))
    bare = gemmlab.step(name, backend="gpu", source=variant(kernel_path(step.step.file), False))
    print(gemmlab.verify(step), file=sys.stderr)
    print("clamp:", gemmlab.verify(clamped), file=sys.stderr)
    cases = check.default_cases({**bare.step.fixed_tile, **bare.params}, bare.step.shape_multiple)
    print("no repair:", gemmlab.verify(bare, cases=[c for c in cases if c.kind != "inf"]), file=sys.stderr)
    for n in (4096, 8192):
        a, b = (cupy.asarray(np.random.default_rng(n + i).standard_normal((n, n), dtype=np.float32)) for i in (0, 1))
        c1, c2, c3 = (cupy.empty((n, n), np.float32) for _ in range(3))
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        calls = {"cupy.matmul": lambda: cupy.matmul(a, b), "torch.matmul": lambda: torch.matmul(ta, tb),
                 "step (repair)": lambda: step.run(a, b, c1), "clamp": lambda: clamped.run(a, b, c2),
                 "no repair": lambda: bare.run(a, b, c3)}
        time_rounds(name, n, calls, rounds, REPEAT, 3)


def fused(rounds: int) -> None:
    import cupy
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    for name in ("fused/05_tf32x3", "fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3", "fused/08_tile_flags"):
        st = fusion.get(name)
        if not fusion.gpu_arch_ok(st):
            continue
        for n in (512, 1024):
            tiles = st.tiles_for((n, n, n, n))
            step = fusion.step(name, backend="gpu", **tiles)
            clamped = fusion.step(name, backend="gpu", source=variant(kernel_path(st.file), True), **tiles)
            bare = fusion.step(name, backend="gpu", source=variant(kernel_path(st.file), False), **tiles)
            fusion.check(step)
            fusion.check(clamped)
            fusion.check(bare, cases=[c for c in fusion.default_cases(bare) if c.kind != "inf"])
            rng = np.random.default_rng(n)
            a, b, c = (cupy.asarray(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(3))
            e1, e2, e3 = (cupy.empty((n, n), np.float32) for _ in range(3))
            ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
            calls = {"cupy a@b@c": lambda: cupy.matmul(cupy.matmul(a, b), c), "torch a@b@c": lambda: ta @ tb @ tc,
                     "step (repair)": lambda: step.run(a, b, c, e1), "clamp": lambda: clamped.run(a, b, c, e2),
                     "no repair": lambda: bare.run(a, b, c, e3)}
            time_rounds(f"{name} {params_text(tiles)}", n, calls, rounds, REPEAT * 4, 10)


if __name__ == "__main__":
    print(json.dumps({"gpu": gemmlab.gpu.device()["name"], "rounds": ROUNDS}), flush=True)
    gemm(ROUNDS)
    fused(ROUNDS)
