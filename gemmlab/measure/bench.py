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
import json

import numpy as np

from ..runtime import registry
from ..runtime.arch import FLOP_PER_CLOCK_PER_SM
from . import results
from ..errors import ConfigError
from .check import verify
from ..runtime.kernel import Instance, Kernel, backend, instance, step as make_step


def _stats(times: np.ndarray) -> dict:
    return {"median_s": float(np.median(times)), "p10_s": float(np.percentile(times, 10)),
            "p90_s": float(np.percentile(times, 90))}


def time_back_to_back(fn, n_repeat: int, n_warmup: int) -> dict:
    """Device time of `fn` called n_repeat times back to back (CUDA events, after n_warmup calls): median, p10, p90."""
    from cupyx.profiler import benchmark as cupy_benchmark

    run = cupy_benchmark(fn, (), n_repeat=n_repeat, n_warmup=n_warmup)
    return _stats(run.gpu_times[0])


def baseline_calls(a, b) -> dict:
    """cuBLAS through CuPy and, where installed, PyTorch, on the same inputs: name -> call."""
    import cupy

    out = {"cupy.matmul": lambda: cupy.matmul(a, b)}
    try:
        import torch

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
    import cupy

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
    import cupy

    from ..runtime import gpu

    dev = gpu.device()
    env = {"gpu": dev["name"], "cc": dev["cc"], "driver": dev["driver"], "cuda": dev["runtime"],
           "cupy": cupy.__version__}
    try:
        import torch

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
    """Records of each step at each size (M = N = K), with the baseline measured in the same run.

    On a GPU they are measured now (and saved to results/<gpu>.json when `save`); without one, the
    recorded records for these steps and sizes are returned, each labelled source="recorded", of GPU
    `gpu` (a name or slug), or if None of the one GPU that has the most of them (results.one_gpu).
    `params` maps a step name to template parameters; a step may also be given as a Kernel. With `alone`, each
    record also holds the step and the baselines timed each by itself, launches back to back ("alone_median_s",
    "baseline_alone_median_s", "pct_of_baseline_alone"), after the interleaved timing. `n_repeat`: timed calls
    (default 30).

    Fused steps (names or FusedKernels, registry.is_fused; not mixed with GEMM steps) go to fusion.benchmark: timed
    against a @ b @ c with the baselines' own records, n_repeat by size unless given, saved to results/<gpu>.fusion.json.
    """
    if registry.all_fused(steps, "benchmark"):
        if alone:
            raise ConfigError("alone=True times GEMM steps by themselves; a fused step's benchmark times each call "
                              "back to back already.")
        from ..runtime import fusion

        named = [s if isinstance(s, str) else s.name for s in steps]
        tiles = {**(params or {}), **{s.name: s.params for s in steps if not isinstance(s, str)}}
        return fusion.benchmark(named, sizes=sizes, params=tiles, save_records=save, verbose=verbose,
                                n_repeat=n_repeat, gpu=gpu)
    n_repeat = 30 if n_repeat is None else n_repeat
    if backend() != "gpu":
        wanted = {(k.name, json.dumps(k.params, sort_keys=True)) for k in _resolve(steps, params, instance, Instance)}
        recs = results.one_gpu([r for r in results.load(gpu) if r["m"] in sizes  # one GPU's run, never a mix
                                and (r["step"], json.dumps(r["params"], sort_keys=True)) in wanted])
        if verbose and not recs:
            print("No GPU here and no recorded results for these steps yet.")
        return recs

    import cupy

    from ..errors import ArchError

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
    import itertools

    from ..errors import GemmlabError

    step = registry.lookup(name)
    if registry.is_fused(step):
        from ..runtime import fusion

        return fusion.sweep(step.name, {**{k: [v] for k, v in (fixed or {}).items()}, **grid}, sizes=(size,),
                            save_records=save, verbose=verbose)
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
    from . import hardware
    from ..errors import ConfigError

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
    count = steps if isinstance(steps, int) else sum(registry.get(name).runs_on(cc) for name in steps)
    rate = peak_tflops * 1e12 * efficiency
    kept, total = [], 0.0
    for n in sorted(set(int(s) for s in sizes)):
        total += count * (n_warmup + n_repeat) * 3 * 2.0 * n ** 3 / rate
        if kept and total > budget_s:
            break
        kept.append(n)
    return [int(s) for s in sizes if int(s) in kept]
