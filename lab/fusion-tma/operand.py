"""Does shared memory's bandwidth, or a group's wait for its own wgmmas, bound step 08's K loop? (chapter 8)

    python lab/fusion-tma/operand.py > results/experiments/fusion-tma/operand-<gpu>-<date>.log   # on an H100 / H200
    python lab/fusion-tma/steps.py record                          # -> results.json["operand"]

Two changes to step 08, each checked against float64 at full size (and on fusion.check's shapes at 512),
launched directly and from a CUDA graph, in turn with torch `a @ b @ c`, three rounds per size:
- register_operand.patch: each tile computed transposed, so that the right operand (B, then C) goes from global
  memory into the wgmmas' registers and only the K-major left one (A, then T) passes through shared memory,
  its big part read by the wgmmas as TMA landed it: a K tile moves 24 KB through shared memory, not 44 KB.
  Also timed without its loads from global memory (its fragments made up: wrong results, timed only), for
  what the K loop costs with the shared-memory traffic cut and nothing added.
- inflight.patch: each group keeps the wgmmas of two K tiles in flight (wait<1>), two split tiles and two
  sets of A fragments a group, the sums kept in the tensor cores' accumulators across the K loop.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import steps  # noqa: E402  (this folder's helpers: replaced(), overlap_step() for two split tiles a group)

REGISTER_OPERAND_PATCH = HERE / "register_operand.patch"  # against kernels/fused/08_tile_flags.cu
INFLIGHT_PATCH = HERE / "inflight.patch"  # against kernels/fused/08_tile_flags.cu
# per size: step 08's tiles (its sized_tiles) and the register-operand variant's (BLOCK_M rows x 64 columns)
CONFIGS = {512: (dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=12), dict(BLOCK_M=32, SPLIT_K=3, NUM_STAGES=12)),
           1024: (dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=8), dict(BLOCK_M=64, SPLIT_K=2, NUM_STAGES=8)),
           2048: (dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=8), dict(BLOCK_M=64, SPLIT_K=2, NUM_STAGES=8))}
LOAD = "__float_as_uint(__ldg(y + (size_t)k * cols + 8 * (q & 1)))"
NO_LOADS = [(LOAD, "(u32)(k + q)")]  # the fragments made up, not loaded (timed only)


def _smem(p, d=None):
    """The variant's dynamic shared memory: alignment, the ring of stages (BLOCK_M x 32 of X and its small part),
    the partial sums of groups 1 .. SPLIT_K - 1, two mbarriers per stage."""
    return 1024 + p["NUM_STAGES"] * 2 * 4 * p["BLOCK_M"] * 32 + 4 * (p["SPLIT_K"] - 1) * 64 * p["BLOCK_M"] + 16 * p["NUM_STAGES"]


def _rules(p):
    from gemmlab import fusion

    out = [] if p["BLOCK_M"] in (32, 64) else [f"BLOCK_M={p['BLOCK_M']} must be 32 or 64 (the N of one wgmma)"]
    return out + fusion.tma_rules({**p, "BLOCK_N": 32}, smem=lambda _: _smem(p))


def _maps(backend, a, b, c, t, tile):
    """A's and T's tensor maps, boxes of a tile's rows x 32 (B and C are read by the consumers themselves)."""
    from gemmlab import tma

    return [tma.tensor_map(backend, a, 4, tile[0], 32), tma.tensor_map(backend, t, 8, tile[0], 32)]


def register_operand_source() -> str:
    """Step 08's source with register_operand.patch applied (a ValueError if 08 changed where the patch touches it)."""
    return steps.patched("fused/08_tile_flags", REGISTER_OPERAND_PATCH)


def register_operand_step():
    """A FusedStep for register_operand.patch: step 08's (its counters, its shapes), tiles of BLOCK_M rows x 64."""
    from gemmlab import fusion
    from gemmlab.runtime.registry import Param

    return dataclasses.replace(
        fusion.get("fused/08_tile_flags"), name="fused/register_operand", symbol="fused_register_operand",
        params={"BLOCK_M": Param(32, (32, 64), "rows of a tile (the wgmma's N)"),
                "SPLIT_K": Param(3, (1, 2, 3, 4, 5, 6, 7), "consumer warpgroups per tile"),
                "NUM_STAGES": Param(12, (2, 4, 6, 8, 12, 16, 24), "K tiles of 32 in the ring")},
        fixed={"BLOCK_N": 64, "BLOCK_K": 32}, rules=_rules, smem=_smem, tensor_maps=_maps, sized_tiles=(),
        summary="08 computing each tile transposed, its right operand loaded into registers (an experiment)",
        previous="fused/08_tile_flags")


def register_operand_kernel(backend: str | None = None, subs=(), **params):
    from gemmlab import fusion

    text = steps.replaced(register_operand_source(), subs, "register_operand.patch")
    return fusion.FusedKernel(register_operand_step(), params, backend, source=text)


def inflight_source() -> str:
    """Step 08's source with inflight.patch applied (a ValueError if 08 changed where the patch touches it)."""
    return steps.patched("fused/08_tile_flags", INFLIGHT_PATCH)


def inflight_kernel(backend: str | None = None, **params):
    from gemmlab import fusion

    return fusion.FusedKernel(steps.overlap_step(), params, backend, source=inflight_source())


def tag(name: str, p: dict) -> str:
    letter = {"BLOCK_M": "m", "BLOCK_N": "n", "SPLIT_K": "k", "NUM_STAGES": "s"}
    return name + " " + " ".join(f"{letter[k]}{v}" for k, v in p.items())


def main() -> None:
    import cupy

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    p08, p_reg = CONFIGS[512]
    print("check register operand:", fusion.check(register_operand_kernel("gpu", **p_reg)))
    print("check inflight:", fusion.check(inflight_kernel("gpu", **p08)))
    for n, (p08, p_reg) in CONFIGS.items():
        a, b, c, want, calls = experiments.fusion_problem(n)
        for name, k in (("08", fusion.step("fused/08_tile_flags", **p08)), ("register operand", register_operand_kernel(**p_reg)),
                        ("inflight", inflight_kernel(**p08))):
            t = tag(name, p08 if name != "register operand" else p_reg)
            err = experiments.add_launchers(calls, t, k, a, b, c, want)
            print(f"config n={n} {t}: {k.module.function.num_regs} registers, error {err:.2e}")
        k = register_operand_kernel(subs=NO_LOADS, **p_reg)
        calls[tag("register operand no loads", p_reg)] = k.launcher(a, b, c, cupy.empty((n, n), dtype=cupy.float32))
        experiments.time_rounds(calls, n, steps.REPEATS[n])


if __name__ == "__main__":
    main()
