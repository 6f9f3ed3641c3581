"""Launch one kernel TIMES times on the same random operands, for Nsight Compute runs that profile several
launches of one process (--launch-skip / --launch-count): the spread between launches, or warm launches.

    python3 lab/gaps/launch.py WHAT SIZE TIMES

WHAT is a step name (sgemm/07_warptiling), a step with parameters (sgemm/04_1d_blocktiling:BLOCK_M=32,BLOCK_N=32),
a lab variant FOLDER/VARIANT of a step (ch5-variants/padded@sgemm/07_warptiling), or f16_accumulate (chapter 7's
hgemm/01 with fp16 accumulators). The operands are made once; the launches follow each other on one stream.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the checkout's gemmlab and lab

import cupy  # noqa: E402  (a GPU only)

from gemmlab import registry  # noqa: E402
from gemmlab.chapters import tensorcores  # noqa: E402
from gemmlab.runtime.kernel import Kernel  # noqa: E402
from lab.experiments import variant_kernel  # noqa: E402

what, size, times = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if what == "f16_accumulate":
    kernel = tensorcores.f16_accumulate(backend="gpu")
elif "@" in what:
    variant, step_name = what.split("@")
    folder, spec = variant.split("/")
    kernel = variant_kernel(pathlib.Path(__file__).resolve().parents[1] / folder, registry.get(step_name), spec,
                            backend="gpu")
else:
    name, _, rest = what.partition(":")
    kernel = Kernel(registry.lookup(name), registry.parse_params([kv for kv in rest.split(",") if kv]), "gpu")
step = kernel.step
rng = cupy.random.default_rng(0)
operands = [rng.random((size, size), dtype=cupy.float32).astype(step.dtype) for _ in step.inputs]
out = cupy.empty((size, size), dtype=step.dtype)
for _ in range(times):
    kernel.run(*operands, out)
cupy.cuda.runtime.deviceSynchronize()
print(f"launched {what} {times} times at {size}^3")
