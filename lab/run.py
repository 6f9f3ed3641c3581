"""Run an experiment's variants on a GPU: each is a step's .cu file with one change, kept as a patch.

    python lab/run.py FOLDER bench STEP "SPEC SPEC ..." [SIZES] [ROUNDS]
    python lab/run.py FOLDER run STEP SPEC          # one launch at 4096 (for ncu)
    python lab/run.py FOLDER stamp VARIANT ...      # a new patch's "# measured against" line (no GPU)

A SPEC is VARIANT or VARIANT:NAME=VALUE,NAME=VALUE. FOLDER/VARIANT.patch is a unified diff against
the step's .cu file (the variant keeps the step's kernel name and template parameters, so it loads
in the step's place); a VARIANT named 'step' or ending in '_base' is the step itself. The parameters
start from the step's defaults; EXTRA_THREADS=N launches N threads more than the step does (producer
warps). Each variant is checked against float64 first, unless its SPEC starts with '!'
(a diagnostic with part of the loop removed on purpose, which computes a wrong answer). Then, per
size and round, cuBLAS (cupy.matmul and torch.matmul, TF32 off) and each variant are timed on the
same inputs, launch by launch in turn; each line gives the variant's % of the faster cuBLAS call.
FOLDER is lab/FOLDER (its logs and results.json go to results/experiments/FOLDER/). A patch is applied
to its kernel's text at the commit its first line records, "# measured against COMMIT (KERNEL)", which
`stamp` writes: the latest commit of the kernel the patch applies to (gemmlab.experiments.stamp).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the checkout's gemmlab

from gemmlab import registry  # noqa: E402
from lab import experiments

folder = pathlib.Path(__file__).resolve().parent / sys.argv[1]
mode = sys.argv[2]

if mode == "stamp":
    for name in sys.argv[3:]:
        rec = experiments.stamp(folder / f"{name.removesuffix('.patch')}.patch")
        print(f"{name}: measured against {rec.commit} ({rec.kernel})")
    sys.exit(0)

import cupy  # noqa: E402  (bench and run need a GPU)

from gemmlab.measure.check import verify  # noqa: E402
from lab.experiments import variant_kernel  # noqa: E402

step = registry.get(sys.argv[3])
if mode == "run":
    k, n = variant_kernel(folder, step, sys.argv[4], backend="gpu"), 4096
    a, b = (cupy.random.random((n, n), dtype=cupy.float32).astype(step.dtype) for _ in range(2))
    k.run(a, b, cupy.empty((n, n), dtype=step.dtype))
    cupy.cuda.Device().synchronize()
    sys.exit(0)

specs = sys.argv[4].split()
sizes = [int(s) for s in sys.argv[5].split()] if len(sys.argv) > 5 else [4096]
rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 2
kernels = {}
for s in specs:
    try:
        k = variant_kernel(folder, step, s, backend="gpu")
        if not s.startswith("!"):
            verify(k)
        kernels[s] = k
    except Exception as e:  # noqa: BLE001 (report the variant and go on with the others)
        print(f"{s}: FAILED {type(e).__name__}: {str(e)[:300]}")
experiments.time_against_cublas(kernels, sizes, rounds, step.dtype)
