"""SM clock and board power while one variant runs back to back for a few seconds (GPU only).

    python lab/hgemm-diagnosis/power.py

nvidia-smi is sampled every ~50 ms; the median of the last two thirds of the samples is printed.
Diagnostics (the '!' variants of run.py) compute wrong answers on purpose: they are only timed here.
"""
import statistics
import subprocess
import threading
import time

import cupy

from gemmlab import registry
from lab.experiments import variant_kernel

STEP = registry.get("hgemm/07_cp_async")
VARIANTS = ["s07_base", "s07_noldsm", "s07_copyonly", "s07_copymma", "s07_nocopy"]


def sample(into: list, stop: threading.Event) -> None:
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout
        try:
            mhz, watts = out.strip().split(", ")
            into.append((float(mhz), float(watts)))
        except ValueError:
            pass
        time.sleep(0.05)


def main(n: int = 8192, seconds: float = 4.0) -> None:
    a, b = (cupy.random.random((n, n), dtype=cupy.float32).astype(cupy.float16) for _ in range(2))
    c = cupy.empty((n, n), dtype=cupy.float16)
    for name in VARIANTS:
        k = variant_kernel("hgemm-diagnosis", STEP, name, backend="gpu")
        k.run(a, b, c)
        cupy.cuda.Device().synchronize()
        samples, stop = [], threading.Event()
        thread = threading.Thread(target=sample, args=(samples, stop))
        thread.start()
        start, runs = time.time(), 0
        while time.time() - start < seconds:
            for _ in range(5):
                k.run(a, b, c)
            cupy.cuda.Device().synchronize()
            runs += 5
        stop.set()
        thread.join()
        late = samples[len(samples) // 3:]
        print(f"{name:16s} {runs / (time.time() - start):7.1f} runs/s  SM clock median "
              f"{statistics.median(s[0] for s in late):6.0f} MHz  power median "
              f"{statistics.median(s[1] for s in late):5.0f} W  ({len(late)} samples)", flush=True)


if __name__ == "__main__":
    main()
