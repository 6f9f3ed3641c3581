"""The lab's library (lab/, not the package): recorded experiments, variants of a step, what each changed, what we
expected, what happened. The package keeps what a chapter reads: an experiment's record (gemmlab.results.experiment,
group, pct, tflops) and a variant's source (gemmlab.runtime.variants).

An experiment's code lives in lab/<name>/ (its variants as patches against the step they change, each
patch's first line naming the commit of the kernel it was measured against; its scripts; its README
with the question and the predictions), its recorded data in results/experiments/<name>/ (the raw
logs and results.json, read through results.experiment). Variants are run on a GPU with lab/run.py;
the tables here only read the record, so they are the same with or without a GPU.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from gemmlab.measure import bench, fusion
from gemmlab.measure.results import group, pct, tflops  # noqa: F401 (experiments.X: an experiment's record, read)
from gemmlab.runtime import gpu, registry
from gemmlab.runtime.kernel import Kernel
from gemmlab.runtime.source import apply_patch
from gemmlab.runtime.variants import (LAB, MEASURED, Measured, git, kernel_at, lab_folder,  # noqa: F401 (experiments.X)
                                      measured_against, patched, relative, variant_source, without_moved_helpers)

# The lab's code: lab/<name>/ holds an experiment's patches and scripts (its data: results.EXPERIMENTS).

# (label, how to show it) for the side-by-side table of two Nsight Compute records
COUNTERS = (
    ("threads per block x blocks", lambda r: f"{r['threads']:.0f} x {r['blocks']:.0f}"),
    ("registers per thread", lambda r: f"{r['registers']:.0f}"),
    ("shared memory per block (KB)", lambda r: f"{(r['static_smem_bytes'] + r['dynamic_smem_bytes']) / 1024:.1f}"),
    ("instructions executed (millions)", lambda r: f"{r['instructions'] / 1e6:.1f}"),
    ("issue slots used (%)", lambda r: f"{r['issue_active_pct']:.1f}"),
    ("FMA pipe busy (%)", lambda r: f"{r['fma_pipe_pct']:.1f}"),
    ("eligible warps per scheduler per cycle", lambda r: f"{r['eligible_warps_per_cycle']:.2f}"),
    ("shared-store bank conflicts (millions)", lambda r: f"{r['shared_store_bank_conflicts'] / 1e6:.1f}"),
    ("kernel time under ncu (ms)", lambda r: f"{r['duration_ns'] / 1e6:.3f}"),
)
STALLS = ("no_instruction", "dispatch_stall", "short_scoreboard", "wait", "barrier", "mio_throttle")


def counters(columns: dict[str, dict]) -> str:
    """Nsight Compute records side by side: {column title: ncu record from an experiment}."""
    width = max(max(len(t) for t in columns), 12) + 2
    lines = [f"{'':40s}" + "".join(f"{t:>{width}s}" for t in columns)]
    for label, show in COUNTERS:
        lines.append(f"{label:40s}" + "".join(f"{show(r):>{width}s}" for r in columns.values()))
    lines.append("stalls per issued instruction:")
    for reason in STALLS:
        lines.append(f"  {reason:38s}" + "".join(
            f"{r['stalls_per_issue'].get(reason, 0.0):>{width}.2f}" for r in columns.values()))
    return "\n".join(lines)


def variants(exp: dict) -> str:
    """One entry per variant: what changed, the prediction, and the measured % of cuBLAS (each round)."""
    lines = []
    for v in exp["variants"]:
        measured = " / ".join(f"{r['pct']:.1f}" for r in v["runs"])
        measured = f"{measured} % of cuBLAS" if measured else "profiled only"
        issue = f"; issue slots used {v['ncu']['issue_active_pct']:.1f}%" if v.get("ncu") else ""
        lines.append(f"- {v['name']} ({', '.join(f'{k}={x}' for k, x in v['params'].items())}): {measured}{issue}")
        lines.append(f"    changed:  {v['idea']}")
        if v.get("prediction"):
            lines.append(f"    expected: {v['prediction']}")
    return "\n".join(lines)


def runs_table(exp_group: dict, size: int | None = None) -> str:
    """Each variant of one group: % of cuBLAS and TFLOP/s of every round ('/' between rounds)."""
    lines = []
    for spec, rs in exp_group["runs"].items():
        rs = [r for r in rs if size is None or r["size"] == size]
        if rs:
            tag = " (diagnostic)" if spec.split(":")[0] in exp_group.get("diagnostic", []) else ""
            lines.append(f"  {spec + tag:62s} " + " / ".join(f"{r['pct']:5.1f}% ({r['tflops']:.0f} TF)" for r in rs))
    return "\n".join(lines)


# Shared memory: 32 banks, each 32 bits wide per clock (CUDA C++ Programming Guide, "Shared Memory"
# in the compute-capability sections), so an SM moves at most 128 bytes through it per clock.
SMEM_BYTES_PER_CLOCK = 128


def mma_tile_budget(block_m: int, block_n: int, block_k: int, warp_m: int, warp_n: int,
                    mma_tflops: float, sms: int, clock_hz: float) -> dict:
    """Shared-memory cycles against tensor-core cycles for one block tile of an mma.sync GEMM that
    fills shared memory with cp.async and reads every fragment back with ldmatrix (fp16, 2 bytes)."""
    warps = (block_m // warp_m) * (block_n // warp_n)
    ldmatrix_bytes = warps * (warp_m * block_k + block_k * warp_n) * 2  # each warp reads its A and B slices
    copy_bytes = (block_m + block_n) * block_k * 2                        # the tile written once
    smem_cycles = (ldmatrix_bytes + copy_bytes) / SMEM_BYTES_PER_CLOCK
    flops = 2 * block_m * block_n * block_k
    mma_cycles = flops / (mma_tflops * 1e12 / sms / clock_hz)
    return {"warps": warps, "ldmatrix_bytes": ldmatrix_bytes, "copy_bytes": copy_bytes,
            "smem_cycles": smem_cycles, "flops": flops, "mma_cycles": mma_cycles,
            "smem_share": smem_cycles / mma_cycles}


def fusion_kernel_times(kt: dict, n: int) -> tuple[float, list[dict]]:
    """From the fusion-kernel-time record at size n: the measured call's fused/04 kernel duration (ns)
    and the cuBLAS kernels of its `a @ b @ c` (the last fused kernel in launch order, and the GEMM
    kernels after it)."""
    kernels = kt["ncu_kernels"][str(n)]
    last = max(i for i, k in enumerate(kernels) if k["kernel"].startswith("void fused_split_k"))
    return kernels[last]["duration_ns"], [k for k in kernels[last + 1:] if "gemm" in k["kernel"]]


def _kernel_named(text: str) -> str | None:
    """The kernel file a patch changes: the one its first line records, else its "--- " line's (no a/)."""
    rec = measured_against(text)
    if rec:
        return rec.kernel
    return next((ln[4:].split("\t")[0].strip().removeprefix("a/") for ln in text.splitlines()
                 if ln.startswith("--- ")), None)


def find_commit(patch: str | Path, before: str = "HEAD") -> Measured:
    """The latest commit at or before `before` that changed the patch's kernel and whose text of it the patch
    applies to (git history needed; a LookupError if there is none)."""
    text = Path(patch).read_text()
    kernel = _kernel_named(text)
    if not kernel:
        raise LookupError(f"{patch}: no '--- kernels/...' line names the kernel it changes")
    for commit in git("log", "--format=%H", before, "--", kernel).split():
        try:
            apply_patch(kernel_at(commit, kernel), text)
        except (ValueError, LookupError):
            continue
        return Measured(commit, kernel)
    raise LookupError(f"{patch} applies to no committed version of {kernel} up to {before}")


def stamp(patch: str | Path) -> Measured:
    """Write the "# measured against COMMIT (KERNEL)" line into a new patch (replacing one it has): the latest
    commit of its kernel that it applies to (find_commit). Refuses while the kernel has changes not committed:
    the text the variant was measured against would be in no commit."""
    patch = Path(patch)
    text = patch.read_text()
    kernel = _kernel_named(text)
    if kernel and git("status", "--porcelain", "--", kernel).strip():
        raise LookupError(f"{kernel} has changes not committed: commit the kernel the variant was measured "
                          f"against, then stamp {patch.name}")
    rec = find_commit(patch)
    if measured_against(text):
        text = text.split("\n", 1)[1]
    patch.write_text(f"# measured against {rec.commit} ({rec.kernel})\n" + text)
    return rec


def variant_kernel(folder: str | Path, step, spec: str, backend: str | None = None) -> Kernel:
    """The kernel for a run.py SPEC: VARIANT or VARIANT:NAME=VALUE,... (a leading '!' marks a
    diagnostic and is ignored here). Parameters not named keep the step's defaults; the pseudo-
    parameter EXTRA_THREADS=N launches N more threads than the step does (producer warps)."""
    name, _, rest = spec.lstrip("!").partition(":")
    params = registry.parse_params([kv for kv in rest.split(",") if kv])
    extra = params.pop("EXTRA_THREADS", 0)
    k = Kernel(step, params, backend, source_text=variant_source(folder, step, name))
    if extra:
        base = k.launch_config
        k.launch_config = lambda m, n, kk: dataclasses.replace(
            base(m, n, kk), block=(base(m, n, kk).block[0] + extra, 1, 1))
    return k


def time_against_cublas(kernels: dict, sizes, rounds: int, dtype) -> dict:
    """Each kernel (name -> Kernel) and cuBLAS launched in turn (bench.against_cublas) on the same random
    inputs in [-1, 1], per size and round: prints one line per run, then a SUMMARY line per kernel and
    size; returns {(name, size): [% of the faster cuBLAS call, per round]}. GPU only."""
    import cupy


    width = max([40] + [len(name) for name in kernels])
    results: dict = {}
    for n in sizes:
        rng = cupy.random.default_rng(n)
        a, b = ((rng.random((n, n), dtype=cupy.float32) * 2 - 1).astype(dtype) for _ in range(2))
        c = cupy.empty((n, n), dtype=dtype)
        for r in range(rounds):
            for name, k in kernels.items():
                t, best = bench.against_cublas(lambda: k.run(a, b, c), a, b)
                results.setdefault((name, n), []).append(100 * best / t)
                print(f"round {r} n={n} {name:{width}s} {2 * n**3 / t / 1e12:7.2f} TF  {100 * best / t:6.1f}% of cuBLAS "
                      f"({2 * n**3 / best / 1e12:.1f})", flush=True)
    print("SUMMARY")
    for (name, n), v in results.items():
        print(f"{name:{width}s} {n:6d} " + " ".join(f"{x:6.1f}" for x in v))
    return results


def step_of(exp: dict, name: str):
    """The step a variant of a multi-step experiment replaces, from the record's 'steps' (prefix -> step)."""
    steps = exp["steps"]
    prefix = next((p for p in steps if name.startswith(p)), None)
    if prefix is None:
        raise KeyError(f"{name!r} matches none of the experiment's step prefixes {sorted(steps)}")
    return registry.lookup(steps[prefix])


def tf32x3_rows(exp: dict, log: str, n: int, config: str) -> dict[str, dict]:
    """From the fusion-tf32x3 record: variant -> its row (us, tflops, speedup, max_rel_error,
    registers) at size n for one tile configuration, from one log."""
    return {r["variant"]: r for r in exp["logs"][log]["rows"] if r["n"] == n and r["config"] == config}


# ------------------------------------------------------------------------------------------------
# Rounds of interleaved timing, as the fusion experiment scripts log and record them
# ------------------------------------------------------------------------------------------------
ROUND_LINE = re.compile(r"^round (\d) n=(\d+) (.+?)\s+([\d.]+) us$")


def time_rounds(calls: dict, n: int, n_repeat: int, rounds: int = 3, n_warmup: int = 20, prefix: str = "") -> None:
    """Launch `calls` (name -> no-argument launch) in turn (bench.time_interleaved) for `rounds` rounds and
    print one line per call and round, "round R n=N [PREFIX]NAME  US us", which rounds_of() reads back. GPU only."""
    for rnd in range(rounds):
        for name, t in bench.time_interleaved(calls, n_repeat, n_warmup).items():
            print(f"round {rnd} n={n} {prefix}{name:24s} {t['median_s'] * 1e6:10.2f} us", flush=True)


def rounds_of(text: str) -> dict[tuple[int, str], list[float]]:
    """{(N, name): [us, one per round]} from a log written by time_rounds()."""
    out: dict[tuple[int, str], list[float]] = {}
    for line in text.splitlines():
        if m := ROUND_LINE.match(line):
            out.setdefault((int(m.group(2)), m.group(3)), []).append(float(m.group(4)))
    return out


def gpu_logs(folder: Path, pattern: str):
    """(GPU name, log path, text) for each log in `folder` whose name matches `pattern`, in name order; the
    GPU is the log's "gpu: NAME" line, which the experiment scripts print first."""
    for log in sorted(Path(folder).glob(pattern)):
        text = log.read_text()
        yield re.search(r"^gpu: (.+)$", text, re.M).group(1), log, text


def fusion_problem(n: int):
    """GPU only, for chapter 8's experiment scripts: (a, b, c, E in float64, {"torch a@b@c": call}), the
    inputs fusion's benchmark uses at N, and the baseline with TF32 off, ready for time_rounds()."""
    import torch


    torch.backends.cuda.matmul.allow_tf32 = False
    a, b, c = fusion.random_inputs(n)
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    return a, b, c, fusion.reference_gpu(a, b, c), {"torch a@b@c": lambda: ta @ tb @ tc}


def add_launchers(calls: dict, name: str, kern, a, b, c, want=None) -> float | None:
    """GPU only: calls[name] launches fused kernel `kern` directly and calls[name + " graph"] replays it from a
    CUDA graph (FusedKernel.launcher). With `want` (E in float64) both are checked at full size first
    (fusion.checked_launcher) and the error is returned; without, they write a scratch E and are timed only."""
    if want is not None:
        calls[name], err = fusion.checked_launcher(kern, a, b, c, want)
        calls[name + " graph"], _ = fusion.checked_launcher(kern, a, b, c, want, graph=True)
        return err
    import cupy

    out = cupy.empty((a.shape[0], c.shape[1]), dtype=cupy.float32)
    calls[name], calls[name + " graph"] = kern.launcher(a, b, c, out), kern.launcher(a, b, c, out, graph=True)
    return None


def recorded_best_kernel(step: str, n: int):
    """GPU only: `step` at its fastest configuration recorded at N for this GPU (its defaults if none is)."""
    top = fusion.best([r for r in fusion.load(gpu.device()["name"]) if "pct_of_baseline" in r], step, n)
    return fusion.step(step, **(top["params"] if top else {}))


def recorded_best(step: str, n: int, a, b, c, want):
    """GPU only: (params, launcher) of `step` at its fastest configuration recorded at N for this GPU (its
    defaults if none is), checked against `want` (E in float64) at full size first."""
    kern = recorded_best_kernel(step, n)
    return kern.params, fusion.checked_launcher(kern, a, b, c, want)[0]


def save_record(folder: Path, key: str, value) -> None:
    """Set results.json[key] in an experiment folder (the record the chapters read)."""
    path = Path(folder) / "results.json"
    rec = json.loads(path.read_text())
    rec[key] = value
    path.write_text(json.dumps(rec, indent=1) + "\n")
