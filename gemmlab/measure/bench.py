"""benchmark(): time steps against cuBLAS in the same run, on a GPU; recorded data without one.

Protocol: a step is timed only after verify() passed; inputs are uniform in [-1, 1]; the step and
the baselines are timed launch by launch, interleaved (cuBLAS, the step, cuBLAS, the step, ...;
CUDA events around each launch, warm-up first), so that both see the same clock: an H100 that heats
up or reaches its power limit in a long run slows everything that runs then, and a baseline measured
minutes earlier would flatter or wrong the step. Since results.ROTATED_SINCE the order rotates every turn,
so each call is timed as often in each place (records say "order": "rotated"): the kernel launched right after
cuBLAS paid for that place (lab/hgemm-past-cublas/README.md). With alone=True each call is also timed by itself,
its launches back to back (the "alone" fields). Each is summarised by the median and the 10th/90th percentiles.
The baseline is the faster of cupy.matmul and torch.matmul (both cuBLAS; TF32 off for fp32), measured next to
each step.
"""
from __future__ import annotations

import datetime
import itertools
import json
import statistics
import time
from typing import Callable, NamedTuple

import numpy as np

from ..runtime import optional
from ..runtime import gpu, registry
from ..runtime.arch import FLOP_PER_CLOCK_PER_SM
from . import hardware, results
from ..errors import ArchError, ConfigError, GemmlabError, ShapeError, VerificationError
from .check import Case, verify
from .hardware import abc_flops
from ..runtime.kernel import Instance, Kernel, backend, fused_step, gpu_arch_ok, instance, step as make_step
from ..runtime.registry import FUSED_SIZES


def _stats(times: np.ndarray) -> dict:
    return {"median_s": float(np.median(times)), "p10_s": float(np.percentile(times, 10)),
            "p90_s": float(np.percentile(times, 90))}


def time_back_to_back(fn, n_repeat: int, n_warmup: int) -> dict:
    """Device time of `fn` called n_repeat times back to back (CUDA events, after n_warmup calls): median, p10, p90."""
    cupy_benchmark = optional.module("cupyx.profiler").benchmark

    run = cupy_benchmark(fn, (), n_repeat=n_repeat, n_warmup=n_warmup)
    return _stats(run.gpu_times[0])


def baseline_calls(a, b) -> dict:
    """cuBLAS through CuPy and, where installed, PyTorch, on the same inputs: name -> call."""
    cupy = optional.module("cupy")

    out = {"cupy.matmul": lambda: cupy.matmul(a, b)}
    try:
        torch = optional.module("torch")

        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        out["torch.matmul"] = lambda: torch.matmul(ta, tb)
    except ImportError:
        pass
    return out


def time_alone(calls: dict, n_repeat: int, n_warmup: int) -> dict:
    """Each call timed by itself, its launches back to back (the protocol before 2026-11-24, kept as a second
    view): name -> median and percentiles in seconds."""
    return {name: time_back_to_back(fn, n_repeat, n_warmup) for name, fn in calls.items()}


def rotated(names: list, turn: int) -> list:
    """The order of one turn of the interleaved loop: `names` rotated by `turn`, so that over len(names)
    turns every call is timed once in every place."""
    shift = turn % len(names)
    return names[shift:] + names[:shift]


def time_interleaved(calls: dict, n_repeat: int, n_warmup: int, between=None, rotate: bool = True) -> dict:
    """Time several calls launch by launch in turn, the order rotating each turn (CUDA events around each
    launch, on the current stream, which PyTorch's default stream shares): name -> median and percentiles
    in seconds. `between`, if given, runs untimed before every timed launch (e.g. to flush the L2);
    rotate=False keeps the order of `calls` every turn (the protocol of 2026-11-24 to 11-27)."""
    cupy = optional.module("cupy")

    for _ in range(n_warmup):
        for fn in calls.values():
            fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for turn in range(n_repeat):
        for name in rotated(list(calls), turn if rotate else 0):
            fn = calls[name]
            if between is not None:
                between()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return {name: _stats(np.array(t)) for name, t in times.items()}


def against_cublas(fn, a, b, n_repeat: int = 50, n_warmup: int = 5) -> tuple[float, float]:
    """(median seconds of fn, median seconds of the faster cuBLAS call on a and b), launched in turn."""
    timed = time_interleaved({**baseline_calls(a, b), "__step__": fn}, n_repeat, n_warmup)
    t = timed.pop("__step__")["median_s"]
    return t, min(v["median_s"] for v in timed.values())


def environment() -> dict:
    """GPU name, compute capability, driver, CUDA runtime, CuPy and (if present) PyTorch versions."""
    cupy = optional.module("cupy")


    dev = gpu.device()
    env = {"gpu": dev["name"], "cc": dev["cc"], "driver": dev["driver"], "cuda": dev["runtime"],
           "cupy": cupy.__version__}
    try:
        torch = optional.module("torch")

        env["torch"] = torch.__version__
    except ImportError:
        pass
    return env


def _resolve(steps, params: dict | None, make, kind) -> list:
    """Steps given by name (made with `make`, parameters from `params[name]`) or already of type `kind`."""
    return [s if isinstance(s, kind) else make(s, **((params or {}).get(s, {}))) for s in steps]


def benchmark(steps, sizes=(1024, 2048, 4096), params: dict | None = None, n_repeat: int | None = None,
              n_warmup: int = 5, save: bool = True, verbose: bool = True, gpu: str | None = None,
              alone: bool = False) -> list[dict]:
    """Records of each step at each size (M = N = K; = L for a fused step), with its baselines measured in the same
    run: the steps' own (StepSpec.timing, one protocol per call: a ConfigError for GEMM and fused steps mixed).

    GEMM steps: against cuBLAS, interleaved (benchmark_cublas). Fused steps: against a @ b @ c eager and as a CUDA
    graph (benchmark_fused), n_repeat by size unless given, saved to results/<gpu>.fusion.json. On a GPU they are
    measured now (and saved when `save`); without one, the recorded records for these steps and sizes are returned.
    `params` maps a step name to template parameters; a step may also be given as a Kernel."""
    protocol = PROTOCOLS[registry.one_timing(steps, "benchmark")]
    return protocol.benchmark(steps, sizes=sizes, params=params, n_repeat=n_repeat, n_warmup=n_warmup, save=save,
                              verbose=verbose, gpu=gpu, alone=alone)


def benchmark_cublas(steps, sizes=(1024, 2048, 4096), params: dict | None = None, n_repeat: int | None = None,
                     n_warmup: int = 5, save: bool = True, verbose: bool = True, gpu: str | None = None,
                     alone: bool = False) -> list[dict]:
    """GEMM steps against cuBLAS (benchmark's protocol for StepSpec.timing "cublas").

    On a GPU they are measured now (and saved to results/<gpu>.json when `save`); without one, the
    recorded records for these steps and sizes are returned, each labelled source="recorded", of GPU
    `gpu` (a name or slug), or if None of the one GPU that has the most of them (results.one_gpu).
    With `alone`, each record also holds the step and the baselines timed each by itself, launches back to back
    ("alone_median_s", "baseline_alone_median_s", "pct_of_baseline_alone"), after the interleaved timing.
    `n_repeat`: timed calls (default 30).
    """
    n_repeat = 30 if n_repeat is None else n_repeat
    if backend() != "gpu":
        wanted = {(k.name, json.dumps(k.params, sort_keys=True)) for k in _resolve(steps, params, instance, Instance)}
        recs = results.one_gpu([r for r in results.load(gpu) if r["m"] in sizes  # one GPU's run, never a mix
                                and (r["step"], json.dumps(r["params"], sort_keys=True)) in wanted])
        if verbose and not recs:
            print("No GPU here and no recorded results for these steps yet.")
        return recs

    cupy = optional.module("cupy")


    kernels = []
    for s in steps:  # a step this GPU cannot run (cp.async on a T4, wgmma off Hopper) is skipped, said once
        try:
            kernels += _resolve([s], params, make_step, Kernel)
        except ArchError as e:  # printed even when not verbose: the reader should know why a row is missing
            print(f"not timed here: {str(e).splitlines()[0]}")
    for k in kernels:
        verify(k)  # raises: a step that computes the wrong answer is never timed
    env = environment()
    date = datetime.date.today().isoformat()
    records = []
    for size in sizes:
        m = n = kk = int(size)
        rng = cupy.random.default_rng(size)
        inputs = {}
        for k in kernels:
            if k.dtype not in inputs:
                a = (rng.random((m, kk), dtype=cupy.float32) * 2 - 1).astype(k.dtype)
                b = (rng.random((kk, n), dtype=cupy.float32) * 2 - 1).astype(k.dtype)
                inputs[k.dtype] = (a, b, baseline_calls(a, b))
            a, b, calls = inputs[k.dtype]
            c = cupy.empty((m, n), dtype=k.dtype)
            timed = time_interleaved({**calls, "step": lambda: k.run(a, b, c)}, n_repeat, n_warmup)
            t = timed.pop("step")
            base = timed
            best = min(base, key=lambda name: base[name]["median_s"])
            flops = 2.0 * m * n * kk
            rec = {"step": k.name, "params": k.params, "dtype": str(k.dtype), "m": m, "n": n, "k": kk,
                   **t, "tflops": flops / t["median_s"] / 1e12,
                   "baseline": best, "baseline_median_s": base[best]["median_s"],
                   "baseline_tflops": flops / base[best]["median_s"] / 1e12,
                   "pct_of_baseline": 100.0 * base[best]["median_s"] / t["median_s"],
                   "baselines": {name: v["median_s"] for name, v in base.items()},
                   **env, "date": date, "n_repeat": n_repeat, "order": "rotated", "source": "live"}
            if alone:
                by_itself = time_alone({**calls, "step": lambda: k.run(a, b, c)}, n_repeat, n_warmup)
                step_alone = by_itself.pop("step")["median_s"]
                base_alone = min(v["median_s"] for v in by_itself.values())
                rec.update(alone_median_s=step_alone, baseline_alone_median_s=base_alone,
                           pct_of_baseline_alone=100.0 * base_alone / step_alone)
            records.append(rec)
            if verbose:
                print(f"{k.label:55s} {size:6d}  {rec['tflops']:8.2f} TFLOP/s  "
                      f"{rec['pct_of_baseline']:6.1f}% of {best} ({rec['baseline_tflops']:.1f})"
                      + (f"  alone: {rec['pct_of_baseline_alone']:.1f}% ({flops / base_alone / 1e12:.1f})"
                         if alone else ""))
    if save and records:
        results.save(records)
    return records


def table(records: list[dict]) -> str:
    """A plain-text table: step, size, TFLOP/s, % of baseline and the baseline's own TFLOP/s in the same run (a
    percentage means something only beside its denominator, which moves with the GPU's power state), GPU, source."""
    rows = [f"{'step':28s} {'size':>6s} {'TFLOP/s':>8s} {'% cuBLAS':>9s} {'cuBLAS TFLOP/s':>15s}  gpu (source)"]
    for r in records:
        base = r.get("baseline_tflops")
        rows.append(f"{r['step']:28s} {r['m']:6d} {r['tflops']:8.2f} {r['pct_of_baseline']:8.1f}% "
                    f"{base if base is not None else float('nan'):15.2f}  {r['gpu']} ({r.get('source', 'recorded')}, {r['date']})")
    return "\n".join(rows)


def dumps(records: list[dict]) -> str:
    return json.dumps(records, indent=1)


def sweep(name: str, grid: dict[str, list[int]], size: int = 4096, fixed: dict | None = None,
          n_repeat: int = 20, save: bool = True, verbose: bool = True) -> list[dict]:
    """Benchmark every configuration of `grid` (a product of parameter values) at one size.

    Configurations the rules reject, or that fail to compile or launch, are reported and skipped,
    so a sweep over the whole tile space can be run in one go. Without a GPU: the recorded records.
    A fused step goes to fusion.sweep at N = `size` (`fixed` as one-value axes of the grid; n_repeat by size).
    """

    step = registry.lookup(name)
    return PROTOCOLS[step.timing].sweep(step, grid, size=size, fixed=fixed, n_repeat=n_repeat, save=save,
                                        verbose=verbose)


def sweep_cublas(step, grid: dict[str, list[int]], size: int = 4096, fixed: dict | None = None,
                 n_repeat: int = 20, save: bool = True, verbose: bool = True) -> list[dict]:
    """sweep's protocol for GEMM steps: each configuration benchmarked against cuBLAS at one size."""
    if backend() != "gpu":
        return [r for r in results.load() if r["step"] == step.name and r["m"] == size]
    records = []
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        params = {**(fixed or {}), **dict(zip(names, values))}
        try:
            kernel = make_step(step.name, **params)
            records += benchmark([kernel], sizes=[size], n_repeat=n_repeat, save=save, verbose=verbose)
        except GemmlabError as e:
            if verbose:
                print(f"skip {params}: {str(e).splitlines()[0]}")
    return records


def timing_line(kernel: Kernel, size: int = 2048, n_repeat: int = 10) -> str:
    """One live measurement for a slider: TFLOP/s and % of cuBLAS at size^3 (GPU only, not saved)."""
    rec = benchmark([kernel], sizes=[size], n_repeat=n_repeat, n_warmup=2, save=False, verbose=False)[0]
    return (f"{kernel.name}: {rec['tflops']:.2f} TFLOP/s at {size}^3, {rec['pct_of_baseline']:.1f}% of cuBLAS "
            f"({rec['baseline']}, {rec['gpu']}, live)")


def live_sizes(sizes, steps=1, dtype: str = "float16", budget_s: float = 60.0, gpu=None, n_repeat: int = 30,
               n_warmup: int = 5, efficiency: float = 0.25) -> list[int]:
    """The sizes of `sizes` to time live here, so that a chapter's live benchmark() takes about `budget_s`:
    every size on an H100- or H200-class GPU, the smaller ones on a T4 (16384^3 in fp16 takes minutes there).

    Estimate: benchmark()'s protocol runs, per step and size, n_warmup + n_repeat rounds of the step and two
    cuBLAS calls, each taken at `efficiency` of the GPU's spec-sheet peak for `dtype` (hardware.SPECS; for a
    GPU not in the table, SMs x clock x its architecture's rate per SM). Sizes are kept from the smallest
    while the running total fits the budget (the smallest always). `steps`: how many steps are timed, or
    their names (a step this GPU cannot run is not timed, so not counted). `gpu`: a name ('Tesla T4') or
    GpuSpec to plan for; default the live GPU. Without a GPU: every size (benchmark() returns records then).
    """

    if dtype not in FLOP_PER_CLOCK_PER_SM:
        raise ConfigError(f"dtype must be one of {sorted(FLOP_PER_CLOCK_PER_SM)}, not {dtype!r}")
    if gpu is None:
        if backend() != "gpu":
            return list(sizes)
        info = hardware.device_info()
        spec, cc = hardware.spec_for(info["name"]), int(info["arch"][3:])
    else:
        spec = hardware.spec_for(gpu)
        if spec is None:
            raise ConfigError(f"no spec sheet for GPU {gpu!r}: name one of {sorted(hardware.SPECS)} or pass a "
                              "hardware.GpuSpec")
        cc = int(spec.arch[3:].rstrip("a"))
    if spec is not None:
        peak_tflops = spec.fp16_tensor_tflops if dtype == "float16" else spec.fp32_tflops
    else:  # not in the table: the architecture's rate per SM at the reported clock
        per_sm = FLOP_PER_CLOCK_PER_SM[dtype].get(cc, min(FLOP_PER_CLOCK_PER_SM[dtype].values()))
        peak_tflops = info["sms"] * (info["clock_mhz"] or 1000) * 1e6 * per_sm / 1e12
    count = steps if isinstance(steps, int) else sum(registry.lookup(name).runs_on(cc) for name in steps)
    rate = peak_tflops * 1e12 * efficiency
    kept, total = [], 0.0
    for n in sorted(set(int(s) for s in sizes)):
        total += count * (n_warmup + n_repeat) * 3 * 2.0 * n ** 3 / rate
        if kept and total > budget_s:
            break
        kept.append(n)
    return [int(s) for s in sizes if int(s) in kept]


# ------------------------------------------------------------------------------------------------
# The fused steps' timing (GPU only): against a @ b @ c eager and as a CUDA graph; their benchmark, sweep and lane
# ------------------------------------------------------------------------------------------------
def repeats_for(n: int) -> int:
    """How many timed launches the fused lane takes at size n (more where a launch is short)."""
    return 300 if n <= 512 else 100 if n <= 1024 else 40 if n <= 2048 else 15


def time_call(fn, n_repeat: int, n_warmup: int = 10) -> dict:
    """Device time (bench's CUDA-event protocol) plus the wall time of a call and a synchronize."""
    cupy = optional.module("cupy")

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
    cupy = optional.module("cupy")

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
        torch = optional.module("torch")
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
    torch = optional.module("torch")

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


def record_fused(step: str, params: dict | None, kind: str, n: int, t: dict, base: dict, env: dict, **extra) -> dict:
    """A record in the GEMM records' schema (results.py), with the fused lane's fields besides (l, kind, ...)."""
    rec = {"step": step, "params": params or {}, "dtype": "float32", "kind": kind, "m": n, "k": n, "l": n, "n": n,
           **t, "tflops": abc_flops(n) / t["median_s"] / 1e12, **extra}
    # against the fastest cuBLAS call for the same problem, eager (a CUDA graph is compared separately)
    against = [k for k in results.BASELINES if k in base] or list(base)
    if against:
        name = min(against, key=lambda k: base[k]["median_s"])
        rec.update(baseline=name, baseline_median_s=base[name]["median_s"],
                   baseline_tflops=abc_flops(n) / base[name]["median_s"] / 1e12,
                   pct_of_baseline=100.0 * base[name]["median_s"] / t["median_s"],
                   baselines={k: v["median_s"] for k, v in base.items()})
    return {**rec, **env, "date": datetime.date.today().isoformat(), "source": "live"}


def random_inputs(n: int):
    """A, B, C: N x N float32 CuPy arrays, uniform in [-1, 1], seeded by N (the benchmark's and sweep's inputs)."""
    cupy = optional.module("cupy")
    rng = cupy.random.default_rng(n)
    return tuple((rng.random((n, n), dtype=cupy.float32) * 2 - 1) for _ in range(3))


def reference_gpu(a, b, c):
    """E = A B C in float64 on the GPU (the full-size guard's reference)."""
    cupy = optional.module("cupy")
    return cupy.matmul(cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64)), c.astype(cupy.float64))


def checked_launcher(kern: Kernel, a, b, c, want=None, tol: float = 1e-4, graph: bool = False):
    """(kern.launcher on a fresh E, max |E - E64| / max |E64|) after one launch at full size: a last guard,
    so that nothing is timed that does not match float64 there too (`want`: E64, computed if None;
    graph: the launcher replays a CUDA graph, Kernel.launcher)."""
    cupy = optional.module("cupy")
    e = cupy.empty((a.shape[0], c.shape[1]), dtype=cupy.float32)
    launch = kern.launcher(a, b, c, e, graph=graph)
    want = reference_gpu(a, b, c) if want is None else want
    rel = float(cupy.abs(e - want).max() / cupy.abs(want).max())
    if not rel < tol:
        raise VerificationError(f"{kern.label} at {a.shape[0]}: max error {rel:.3g} of max |E|: not timed")
    return launch, rel


def time_fused(kern: Kernel, a, b, c, n_repeat: int) -> tuple[dict, dict]:
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


FUSED_TIMED = ("fused/01_naive_row", "fused/02_row_panel", "fused/03_two_phase", "fused/04_split_k",
                 "fused/05_tf32x3", "fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3", "fused/08_tile_flags")
FUSED_MAX_SIZE = {"fused/01_naive_row": 1024}  # its time grows as N^3 (tens of ms a call at 4096): timed up to here


def benchmark_fused(names=FUSED_TIMED, sizes=FUSED_SIZES, params: dict | None = None, save_records: bool = True,
              verbose: bool = True, n_repeat: int | None = None, live: bool | None = None,
              gpu: str | None = None) -> list[dict]:
    """Baselines and fused steps at each size (N = M = K = L), all measured in the same run.

    Each step runs with its tiles for that size (FusedStep.tiles_for; `params` maps a step name to
    parameters that override them). On a GPU every kernel is checked first (check() raises before
    anything is timed); records are saved to results/<gpu>.fusion.json. Without a GPU, or with
    live=False: the recorded records for these sizes, of GPU `gpu` (a name or slug; every recorded
    GPU if None).
    """
    if live is False or backend() != "gpu":
        recs = [r for r in results.load_fused(gpu) if r["kind"] == "benchmark" and r["m"] in sizes]
        if verbose and not recs:
            print("No GPU here and no recorded fusion benchmark yet: the figures appear once the GPU lane has run "
                  "(python -m gemmlab fusion-lane).")
        return recs
    chosen = [(nm, registry.lookup(nm, track="fused")) for nm in names]
    chosen = [(nm, st) for nm, st in chosen if gpu_arch_ok(st)]
    compiled: dict = {}  # (name, its parameters) -> the checked kernel: one per set of tiles the sizes take

    def kernels_at(n: int) -> list[Kernel]:
        out = []
        for nm, st in chosen:
            if n > FUSED_MAX_SIZE.get(st.name, n):
                continue
            p = st.resolve({**st.tiles_for((n,) * 4), **(params or {}).get(nm, {})})
            key = (st.name, tuple(p.items()))
            if key not in compiled:
                compiled[key] = fused_step(st.name, **p)
                verify(compiled[key])
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
            records.append(record_fused(name, None, "benchmark", n, t, base, env))
        for k in kernels_at(n):
            try:
                t, extra = time_fused(k, a, b, c, reps)
            except (ShapeError, ConfigError) as e:
                if verbose:
                    print(f"{k.name:22s} {n:5d}  skipped: {str(e).splitlines()[0][:100]}")
                continue
            records.append(record_fused(k.name, k.params, "benchmark", n, t, base, env, **extra))
        if verbose:
            for r in records:
                if r["m"] == n:
                    sp = f"  {results.speedup(r):5.2f}x vs {r['baseline']}" if "pct_of_baseline" in r else ""
                    print(f"{r['step']:22s} {n:5d}  {r['median_s'] * 1e6:9.1f} us  wall {r['wall_median_s'] * 1e6:9.1f} us"
                          f"  {r['tflops']:6.2f} TFLOP/s{sp}")
    if save_records:
        results.save_fused(records)
    return records


FUSED_SWEEP_GRIDS = {
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
FUSED_SWEEP_GRIDS["fused/08_tile_flags"] = FUSED_SWEEP_GRIDS["fused/07_tma_tf32x3"]
# Large N wants large tiles: step 05's grid for 2048 and up (one group per tile, deeper pipelines),
# step 07's 64-column tiles.
FUSED_SWEEP_GRIDS_LARGE = {
    "fused/05_tf32x3": {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [16, 32], "WARP_M": [32, 64],
                        "WARP_N": [32], "SPLIT_K": [1], "NUM_STAGES": [3, 4]},
    "fused/07_tma_tf32x3": {"BLOCK_N": [64], "SPLIT_K": [2, 3], "NUM_STAGES": [6, 8]},
}
FUSED_SWEEP_GRIDS_LARGE["fused/08_tile_flags"] = FUSED_SWEEP_GRIDS_LARGE["fused/07_tma_tf32x3"]


def sweep_fused(name: str = "fused/03_two_phase", grid: dict | None = None, sizes=(512, 1024), save_records: bool = True,
          verbose: bool = True) -> list[dict]:
    """Every configuration of `grid` (a product of parameter values) at each size, against the baseline.

    Impossible configurations are skipped with the rule's sentence. Without a GPU: the recorded sweep.
    """
    st = registry.lookup(name, track="fused")
    if backend() != "gpu":
        return [r for r in results.load_fused() if r["kind"] == "sweep" and r["step"] == st.name and r["m"] in sizes]
    grid = grid or FUSED_SWEEP_GRIDS[st.name]
    env = environment()
    records = []
    for n in sizes:
        a, b, c = random_inputs(n)
        reps = max(50, repeats_for(n) // 3)
        base = {k: v for k, v in time_baselines(a, b, c, reps).items() if k in results.BASELINES}
        for values in itertools.product(*grid.values()):
            p = dict(zip(grid, values))
            try:
                k = fused_step(st.name, **p)
                verify(k, cases=[Case("identity", *st.fit((33, 34, 35, 36))), Case("random", *st.fit((67, 33, 70, 129)))])
                t, extra = time_fused(k, a, b, c, reps)
            except GemmlabError as e:
                if verbose:
                    print(f"skip {p}: {str(e).splitlines()[0][:110]}")
                continue
            rec = record_fused(st.name, k.params, "sweep", n, t, base, env, **extra)
            records.append(rec)
            if verbose:
                print(f"{n:5d} {p}  {rec['median_s'] * 1e6:8.1f} us  grid {extra['grid']}"
                      + (f"  {results.speedup(rec):.2f}x" if "pct_of_baseline" in rec else ""))
    if save_records:
        results.save_fused(records)
    return records


def fusion_lane(sizes=FUSED_SIZES, sweep_sizes=(512, 1024), sweep_names=("fused/08_tile_flags", "fused/07_tma_tf32x3", "fused/06_wgmma_tf32x3", "fused/05_tf32x3",
         "fused/04_split_k", "fused/03_two_phase", "fused/02_row_panel"), large_sizes=(2048, 4096)) -> list[dict]:
    """What the GPU lane runs: check every fused step, benchmark (baselines included), sweep the tiles."""
    if backend() != "gpu":
        raise GemmlabError("the fusion lane needs a GPU (CuPy sees none here); without one, "
                           "check() runs the steps in the emulator and benchmark() returns the records")
    for st in registry.FUSED_STEPS:
        if gpu_arch_ok(st):
            print(verify(fused_step(st.name)))
    recs = benchmark_fused(sizes=sizes)
    for name in sweep_names:
        st = registry.lookup(name, track="fused")
        if not gpu_arch_ok(st):
            print(f"{name} needs {st.arch_label}: not swept on this GPU")
            continue
        recs += sweep_fused(name, sizes=sweep_sizes)
        if name in FUSED_SWEEP_GRIDS_LARGE:
            recs += sweep_fused(name, FUSED_SWEEP_GRIDS_LARGE[name], sizes=large_sizes)
    # the best swept configurations of 03 and 04 at 512, benchmarked over every size
    for name in ("fused/03_two_phase", "fused/04_split_k"):
        top = results.best([r for r in recs if r["kind"] == "sweep"], name, 512)
        if top:
            recs += benchmark_fused([name], sizes=sizes, params={name: top["params"]}, save_records=False, verbose=True)
            tuned = [dict(r, kind="tuned") for r in recs if r["kind"] == "benchmark" and r["step"] == name
                     and r["params"] == top["params"]]
            results.save_fused(tuned)
    path = results.fusion_path(environment()["gpu"])
    print(f"records written to {path}")
    return recs


def _benchmark_abc(steps, sizes, params, n_repeat, n_warmup, save, verbose, gpu, alone) -> list[dict]:
    """benchmark's protocol for StepSpec.timing "abc" (the fused steps): by name, each size's tiles (FusedStep.tiles_for)
    overridden by `params` and by a kernel's own; benchmark_fused."""
    if alone:
        raise ConfigError("alone=True times GEMM steps by themselves; a fused step's benchmark times each call "
                          "back to back already.")
    named = [s if isinstance(s, str) else s.name for s in steps]
    tiles = {**(params or {}), **{s.name: s.params for s in steps if not isinstance(s, str)}}
    return benchmark_fused(named, sizes=sizes, params=tiles, save_records=save, verbose=verbose, n_repeat=n_repeat,
                           gpu=gpu)


def _sweep_abc(step, grid, size, fixed, n_repeat, save, verbose) -> list[dict]:
    """sweep's protocol for the fused steps: sweep_fused at N = `size`, `fixed` as one-value axes (n_repeat by size)."""
    return sweep_fused(step.name, {**{k: [v] for k, v in (fixed or {}).items()}, **grid}, sizes=(size,),
                       save_records=save, verbose=verbose)


class Protocol(NamedTuple):
    """How steps of one StepSpec.timing are benchmarked and swept: against which baselines, timed how."""
    benchmark: Callable
    sweep: Callable


PROTOCOLS = {"cublas": Protocol(benchmark_cublas, sweep_cublas),  # interleaved with cupy / torch matmul
             "abc": Protocol(lambda steps, **kw: _benchmark_abc(steps, **kw),  # a @ b @ c eager and CUDA graph
                             lambda step, grid, **kw: _sweep_abc(step, grid, **kw))}
