"""Command line: python -m gemmlab steps | verify | bench | sweep | run | resources | sass | counters | exercise."""
from __future__ import annotations

import argparse
import sys

from . import nvrtc, registry
from .errors import BackendError, ConfigError, GemmlabError
from .kernel import instance, set_backend, step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmlab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("steps", help="list the steps")
    p.add_argument("--names", action="store_true", help="names only, one per line (for scripts)")
    for name, helptext in (("verify", "check a step against float64; exit 0 only if it passes"),
                           ("resources", "registers, shared memory, spills (compile-only)"),
                           ("sass", "print the SASS of a step (compile-only)")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("step", nargs="+" if name == "verify" else None)
        p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter")
        p.add_argument("--backend", choices=["cpu", "gpu"])
        if name != "verify":
            p.add_argument("--arch", default="sm_75", help="sm_75 (T4), sm_80, sm_90 ...")
    p = sub.add_parser("counters", help="global sectors and shared wavefronts per request (CPU emulator)")
    p.add_argument("step")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter")
    p.add_argument("--size", type=int, nargs=3, metavar=("M", "N", "K"), default=[256, 256, 256])
    p.add_argument("--blocks", type=int, default=4, help="blocks to run (0: the whole grid)")
    p = sub.add_parser("bench", help="time steps against cuBLAS on the GPU, save to results/")
    p.add_argument("steps", nargs="+")
    p.add_argument("--size", type=int, action="append", help="M = N = K (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="template parameter (all steps)")
    p.add_argument("--repeat", type=int, default=30)
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
    from . import exercises  # `exercise list | start | check`: its parser and its command live there

    exercises.add_cli_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "exercise":
        return exercises.run_cli(args)

    try:
        if args.command == "steps":
            for s in registry.steps():
                if args.names:
                    print(s.name)
                    continue
                params = ", ".join(f"{k}={v.default}" for k, v in s.params.items())
                summary = s.summary.removeprefix(f"{s.arch_tag}: ") if s.arch_tag else s.summary
                print(f"{s.name:26s} ch{s.chapter}  {s.dtype:8s} {s.arch_tag:7s} <{params}>  {summary}")
            return 0
        if args.command == "bench":
            from .bench import benchmark

            params = params_for(args.steps, registry.parse_params(args.param))
            need_gpu("bench")
            kernels = [step(s.name, **p) for s, p in params]
            benchmark(kernels, sizes=args.size or [4096], n_repeat=args.repeat, save=not args.no_save,
                      alone=args.alone)
            return 0
        if args.command == "run":
            kernel = step(args.step, backend="gpu", **registry.parse_params(args.param))  # no GPU: BackendError
            import cupy

            rng = cupy.random.default_rng(0)
            a = rng.random((args.size, args.size), dtype=cupy.float32).astype(kernel.dtype)
            b = rng.random((args.size, args.size), dtype=cupy.float32).astype(kernel.dtype)
            c = cupy.empty((args.size, args.size), dtype=kernel.dtype)
            kernel.run(a, b, c)
            cupy.cuda.runtime.deviceSynchronize()
            print(f"ran {kernel.label} once at {args.size}^3")
            return 0
        if args.command == "sweep":
            from .bench import sweep

            grid = parse_vary(args.vary)
            fixed = registry.parse_params(args.param)
            params_for([args.step], {**fixed, **grid})
            need_gpu("sweep")
            sweep(args.step, grid, size=args.size, fixed=fixed)
            return 0
        if args.command == "counters":
            print(step(args.step, backend="cpu", **registry.parse_params(args.param)).counters(
                *args.size, max_blocks=args.blocks or None))
            return 0
        set_backend(args.backend)
        if args.command == "verify":
            from .check import verify

            failed = 0
            for s, params in params_for(args.step, registry.parse_params(args.param)):
                # several steps in one process: one sanitizer start-up for all
                report = verify(step(s.name, **params), raise_on_fail=False)
                print(report)
                failed += not report.passed
            return 0 if not failed else 1
        kernel = instance(args.step, **registry.parse_params(args.param))
        if args.command == "resources":
            print(kernel.resources(args.arch))
            if args.arch.removesuffix("a") in nvrtc.ARCH_LIMITS:
                print(_fit_text(kernel, args.arch, defaults=kernel.params == kernel.step.resolve({})))
        else:
            print(kernel.sass(args.arch))
        return 0
    except GemmlabError as e:
        return report_error(e)


def report_error(e: GemmlabError) -> int:
    """A GemmlabError as the command lines show it: "error: <its sentence>" on stderr, exit status 2."""
    print(f"error: {e}", file=sys.stderr)
    return 2


def need_gpu(command: str) -> None:
    """A BackendError, before anything runs, where `command` would time on a GPU and there is none."""
    from .kernel import backend

    if backend() != "gpu":
        raise BackendError(f"{command} times kernels on a GPU and CuPy sees none here; run it on a machine with a "
                           f"CUDA GPU (the recorded timings are in results/).")


def params_for(names: list[str], params: dict) -> list[tuple]:
    """(step, the parameters of `params` it has) for each step named; a ConfigError listing the steps'
    parameters when a name in `params` belongs to none of them (a typo must not run the defaults)."""
    steps = [registry.get(n) for n in names]
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
    sys.exit(main())
