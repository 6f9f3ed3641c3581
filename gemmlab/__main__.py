"""Command line: python -m gemmlab steps | verify | bench | sweep | run | resources | sass | counters | exercise."""
from __future__ import annotations

import argparse
import sys

from . import nvrtc, registry
from .errors import GemmlabError
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
            from .kernel import backend

            if backend() != "gpu":
                print("bench needs a GPU (CuPy sees none here).", file=sys.stderr)
                return 2
            params = registry.parse_params(args.param)
            kernels = [step(s, **{k: v for k, v in params.items() if k in registry.get(s).params})
                       for s in args.steps]
            benchmark(kernels, sizes=args.size or [4096], n_repeat=args.repeat, save=not args.no_save)
            return 0
        if args.command == "run":
            import cupy

            kernel = step(args.step, backend="gpu", **registry.parse_params(args.param))
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

            grid = {}
            for item in args.vary:
                name, _, values = item.partition("=")
                grid[name] = [int(v) for v in values.split(",") if v]
            sweep(args.step, grid, size=args.size, fixed=registry.parse_params(args.param))
            return 0
        if args.command == "counters":
            print(step(args.step, backend="cpu", **registry.parse_params(args.param)).counters(
                *args.size, max_blocks=args.blocks or None))
            return 0
        set_backend(args.backend)
        if args.command == "verify":
            from .check import verify

            params, failed = registry.parse_params(args.param), 0
            for name in args.step:  # several steps in one process: one sanitizer start-up for all
                s = registry.get(name)
                report = verify(step(name, **{k: v for k, v in params.items() if k in s.params}),
                                raise_on_fail=False)
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
        print(f"error: {e}", file=sys.stderr)
        return 1


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
