"""Command line: python -m gemmlab steps | verify | bench | sweep | run | resources | sass | counters | fusion-lane |
exercise.

One command line for every step: the GEMM steps (sgemm/, hgemm/) and the fused A B C steps (fused/), all tables of
registry.py, alike, except `counters` (GEMM steps) and `fusion-lane` (the fused steps' GPU lane).
A bench or sweep takes steps of one kind: GEMM steps against cuBLAS, fused steps against a @ b @ c."""
from __future__ import annotations

import argparse
import sys

from .runtime import optional
from .measure import fusion
from .runtime import nvrtc, registry
from .errors import BackendError, ConfigError, GemmlabError
from .runtime.kernel import instance, set_backend, step
from .chapters import exercises
from .measure.bench import benchmark, sweep
from .runtime.kernel import backend, check_size
from .measure.check import verify
from .runtime import gpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("steps", help="list the steps")
    p.add_argument("--names", action="store_true", help="names only, one per line (for scripts)")
    p.add_argument("--track", choices=list(dict.fromkeys(s.track for s in registry.all_steps())), help="one track's steps: its roadmap, one line per step")
    for name, helptext in (("verify", "check a step against float64; exit 0 only if it passes"),
                           ("resources", "registers, shared memory, spills (compile-only)"),
                           ("sass", "print the SASS of a step (compile-only)")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("step", nargs="+" if name == "verify" else None)
        p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter")
        p.add_argument("--backend", choices=["cpu", "gpu"])
        if name != "verify":
            p.add_argument("--arch", help="sm_75 (T4), sm_80, sm_90 ... (default: sm_75; sm_90 for a fused step)")
    p = sub.add_parser("counters", help="global sectors and shared wavefronts per request (CPU emulator)")
    p.add_argument("step")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter")
    p.add_argument("--size", type=int, nargs=3, metavar=("M", "N", "K"), default=[256, 256, 256])
    p.add_argument("--blocks", type=int, default=4, help="blocks to run (0: the whole grid)")
    p = sub.add_parser("bench", help="time steps on the GPU against cuBLAS (fused steps: against a @ b @ c), "
                                     "save to results/")
    p.add_argument("steps", nargs="+")
    p.add_argument("--size", type=int, action="append", help="M = N = K (= L), repeatable (default: 4096; fused "
                                                                  f"steps {', '.join(map(str, fusion.DEFAULT_SIZES))})")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter (all steps)")
    p.add_argument("--repeat", type=int, help="timed calls (default: 30; fused steps: by size)")
    p.add_argument("--alone", action="store_true", help="also time each call by itself, launches back to back")
    p.add_argument("--no-save", action="store_true")
    p = sub.add_parser("run", help="launch a step once on random inputs (GPU), e.g. under a profiler")
    p.add_argument("step")
    p.add_argument("--size", type=int, default=4096, help="M = N = K")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p = sub.add_parser("sweep", help="benchmark a grid of template parameters at one size (GPU)")
    p.add_argument("step")
    p.add_argument("--vary", action="append", required=True, metavar="NAME=V1,V2,...")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="fixed template parameter")
    p.add_argument("--size", type=int, default=4096)
    p = sub.add_parser("fusion-lane", help="on a GPU: check the fused steps, benchmark them and the baselines at "
                                           "256..4096, sweep their tiles at 512 and 1024, record")
    p.add_argument("--sweeps", nargs="+", metavar="STEP",
                   help="the steps whose tiles are swept (default: 08, 07, 06, 05, 04, 03, 02)")

    exercises.add_cli_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "exercise":
        return exercises.run_cli(args)

    try:
        if args.command == "steps":
            for s in registry.all_steps(args.track):
                print(s.name if args.names else listing_line(s))
            return 0
        if args.command == "fusion-lane":
            fusion.lane(**({"sweep_names": tuple(fusion.get(n).name for n in args.sweeps)} if args.sweeps else {}))
            return 0
        if args.command == "bench":
            chosen = params_for(args.steps, registry.parse_params(args.param))
            registry.one_timing([s for s, _ in chosen], "bench")  # one kind of baseline per run, before a GPU is asked

            need_gpu("bench")
            # by name: benchmark compiles each with the --param given (a fused step: each size's tiles, overridden)
            benchmark([s.name for s, _ in chosen], sizes=args.size or list(chosen[0][0].bench_sizes),
                      params={s.name: p for s, p in chosen}, n_repeat=args.repeat, save=not args.no_save,
                      alone=args.alone)
            return 0
        if args.command == "run":
            print(launch_once(registry.lookup(args.step), args.size, registry.parse_params(args.param)))
            return 0
        if args.command == "sweep":
            grid = parse_vary(args.vary)
            fixed = registry.parse_params(args.param)
            (s, _), = params_for([args.step], {**fixed, **grid})
            need_gpu("sweep")

            sweep(s.name, grid, size=args.size, fixed=fixed)
            return 0
        if args.command == "counters":
            registry.lookup(args.step).check_countable()
            print(step(args.step, backend="cpu", **registry.parse_params(args.param)).counters(
                *args.size, max_blocks=args.blocks or None))
            return 0
        if args.command != "verify" and args.backend:  # resources, sass
            raise ConfigError(f"{args.command} compiles with NVRTC for --arch and runs nothing, so --backend "
                              f"{args.backend} does not apply; leave it out (--arch sm_90 picks the GPU).")
        set_backend(args.backend)
        if args.command == "verify":
            failed = 0
            for s, params in params_for(args.step, registry.parse_params(args.param)):
                # several steps in one process: one sanitizer start-up for all
                report = check_one(s, params)
                if report is not None:
                    print(report)
                    failed += not report.passed
            return 0 if not failed else 1
        s = registry.lookup(args.step)
        arch = args.arch if args.arch is not None else s.default_arch  # compile-only, judged by the arch's limits
        kernel = instance(s.name, **registry.parse_params(args.param))
        if args.command == "resources":
            print(kernel.resources(arch))
            if arch.removesuffix("a") in nvrtc.ARCH_LIMITS:
                print(_fit_text(kernel, arch, defaults=kernel.params == kernel.step.resolve({})))
        else:
            print(kernel.sass(arch))
        return 0
    except GemmlabError as e:
        return report_error(e)


def report_error(e: GemmlabError) -> int:
    """A GemmlabError as the command lines show it: "error: <its sentence>" on stderr, exit status 2."""
    print(f"error: {e}", file=sys.stderr)
    return 2


def need_gpu(command: str) -> None:
    """A BackendError, before anything runs, where `command` would time on a GPU and there is none."""
    if backend() != "gpu":
        raise BackendError(f"{command} times kernels on a GPU and CuPy sees none here; run it on a machine with a "
                           f"CUDA GPU (the recorded timings are in results/).")


def listing_line(s) -> str:
    """One line of `steps`: name, chapter, dtype, architecture tag, default parameters, the idea."""
    params = ", ".join(f"{k}={v.default}" for k, v in s.params.items())
    summary = s.summary.removeprefix(f"{s.arch_tag}: ").removesuffix(f" ({s.arch_tag})") if s.arch_tag else s.summary
    return f"{s.name:26s} ch{registry.chapter_label(s):2s} {s.dtype:8s} {s.arch_tag:7s} <{params}>  {summary}"


def check_one(s, params: dict):
    """The float64 check of one step (check.verify), not raising on a failure; None, with a SKIP line, for a step
    the live GPU lacks the instructions of."""
    if backend() == "gpu" and not fusion.gpu_arch_ok(s):
        print(f"SKIP: {s.name} needs {s.arch_label}")
        return None

    return verify(step(s.name, **params), raise_on_fail=False)


def launch_once(s, size: int, params: dict) -> str:
    """`run`: step `s` launched once on the GPU on random size x size operands (a BackendError without a GPU)."""
    check_size(size, "--size")
    try:
        kernel = step(s.name, backend="gpu", **params)
    except BackendError:
        if gpu.available():
            raise
        raise BackendError(f"run launches {s.name} once on a GPU (to profile it) and CuPy sees none here; on the CPU "
                           f"emulator, check it with: python -m gemmlab verify {s.name} --backend cpu") from None
    cupy = optional.module("cupy")

    rng = cupy.random.default_rng(0)
    operands = [rng.random((size, size), dtype=cupy.float32).astype(s.dtype) for _ in s.inputs]
    kernel.run(*operands, cupy.empty((size, size), dtype=s.dtype))
    cupy.cuda.runtime.deviceSynchronize()
    return f"ran {kernel.label} once at {size}^3"


def params_for(names: list[str], params: dict) -> list[tuple]:
    """(step, the parameters of `params` it has) for each step named; a ConfigError listing the steps'
    parameters when a name in `params` belongs to none of them (a typo must not run the defaults)."""
    steps = [registry.lookup(n) for n in names]
    unknown = sorted(set(params) - {k for s in steps for k in s.params})
    if unknown:
        listing = "; ".join(f"{s.name} has {', '.join(s.params) or 'none'}" for s in steps)
        raise ConfigError(f"no template parameter {', '.join(unknown)} here ({listing}); check the name.")
    return [(s, {k: v for k, v in params.items() if k in s.params}) for s in steps]


def parse_vary(items: list[str]) -> dict:
    """sweep's --vary NAME=V1,V2,... as {NAME: [V1, V2, ...]}; a ConfigError for a name without values."""
    grid = {}
    for item in items:
        name, _, values = item.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not name or not vals or not all(v.lstrip("-").isdigit() for v in vals):
            raise ConfigError(f"--vary takes NAME=V1,V2,... with integer values (BLOCK_K=8,16,32), not {item!r}.")
        grid[name] = [int(v) for v in vals]
    return grid


def _fit_text(kernel, arch: str, defaults: bool) -> str:
    """The fit claim for `arch` with the launch it is judged by, and (default parameters) what other NVRTC
    releases were measured to do: a claim that holds with one compiler only names it."""
    fit = kernel.fit(arch)
    lines = [f"launch: {fit.threads} threads per block, {fit.dynamic_shared} B dynamic shared memory "
             f"(the registry's geometry); compiled by NVRTC {fit.nvrtc} ({nvrtc.library_path()})", str(fit)]
    notes = kernel.step.compiler_notes(arch, fit.nvrtc) if defaults else []
    if notes:
        pinned = nvrtc.pinned_version()
        if pinned and pinned != fit.nvrtc:
            notes.insert(0, f"no spills with NVRTC {pinned} (requirements.txt)")
        lines.append(f"depends on the compiler: {'; '.join(notes)} (measured, default parameters)")
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped reading (`steps | head -1`): no traceback, as other tools
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's last flush goes nowhere
        status = 141  # 128 + SIGPIPE, what a shell reports for a tool its pipe stopped
    sys.exit(status)
