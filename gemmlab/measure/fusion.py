"""Chapter 8's names for the fused steps (E = A B C in one launch), gathered in one place for the chapters, the
notebooks and the lab: `gemmlab.fusion`. Nothing here is a second stack: the steps are a table of the registry
(registry.FUSED_STEPS), they compile and launch through kernel.py's one Kernel (FusedKernel is its name here), they
are checked by check.py's one verify, timed by bench.py (benchmark_fused, sweep_fused, fusion_lane) and recorded by results.py
(results/<gpu>.fusion.json); their models (flops, traffic, intensity) live in hardware.py.

    k = fusion.step("fused/03_two_phase", BLOCK_M=64, BLOCK_N=32)
    E = k(A, B, C)                  # checked inputs, NumPy or CuPy arrays
    fusion.check(k)                 # float64 reference, structured inputs first, NaN propagation
    fusion.benchmark()              # on a GPU: against torch / cupy a @ b @ c and a CUDA graph
    python -m gemmlab fusion-lane   # on a GPU: check + baselines + benchmark + sweep, recorded

Records go to results/<gpu>.fusion.json; without a GPU, benchmark() and sweep() return them.
"""
from __future__ import annotations

from ..errors import GemmlabError, InputError  # noqa: F401 (fusion.InputError: what a bad operand raises)
from ..runtime import registry
from ..runtime.arch import CPU_SMEM_LIMIT, STATIC_SMEM  # noqa: F401 (fusion.X)
from ..runtime.kernel import (FusedInstance, FusedKernel, check_size, compiled, cpu_workers,  # noqa: F401 (fusion.X)
                              gpu_arch_ok, resident_blocks, resources, fused_step as step)
from ..runtime.registry import (FUSED_SIZES as DEFAULT_SIZES, FUSED_STEPS, WGMMA_TILE_K, WGMMA_TILE_M,  # noqa: F401
                                Dims, FusedStep, Param, limits_of, smem_limit, tma_maps, tma_rules, tma_smem)
from .bench import (FUSED_MAX_SIZE as MAX_SIZE, FUSED_SWEEP_GRIDS as SWEEP_GRIDS,  # noqa: F401 (fusion.X)
                    FUSED_SWEEP_GRIDS_LARGE as SWEEP_GRIDS_LARGE, FUSED_TIMED as DEFAULT_STEPS,
                    benchmark_fused as benchmark, checked_launcher, fusion_lane as lane, random_inputs, reference_gpu,
                    repeats_for, sweep_fused as sweep, time_baselines, time_call, torch_graph_abc)
from .check import (Case, VerifyReport as Report, abc_inputs as make_inputs,  # noqa: F401 (fusion.X)
                    compare_abc as compare, fused_cases as default_cases, reference_abc as reference, verify as check)
from .hardware import (abc_flops as flops, abc_ideal_time_s as ideal_time_s,  # noqa: F401 (fusion.X)
                       abc_intensity as intensity, abc_traffic_bytes as traffic_bytes, document_intensity)
from .results import (BASELINE, BASELINES, FUSION_SUFFIX as SUFFIX, best, fused_baseline as baseline,  # noqa: F401
                      fusion_path as records_path, load_fused as load, lookup_fused as lookup,
                      save_fused as save, speedup)


def get(name: str) -> FusedStep:
    """The fused step called `name` ("fused/03_two_phase"; "03_two_phase" or "two_phase" also work): the one lookup,
    registry.lookup, in the fused track."""
    return registry.lookup(name, track="fused")


def steps() -> list[FusedStep]:
    return registry.all_steps("fused")


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
    check_size(n, "n")
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
