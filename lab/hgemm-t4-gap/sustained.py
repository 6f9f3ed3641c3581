"""Each kernel alone, back to back for a few seconds: sustained TFLOP/s, SM clock and board power.

    python lab/hgemm-t4-gap/sustained.py [N] [SECONDS]

The course's protocol (bench.time_interleaved) launches cuBLAS and a step in turn, so both run in the
same thermal and power state: the state of their mix. A kernel that draws less power than cuBLAS
would, alone, hold a higher clock; interleaved, it shares cuBLAS's. This measures the other view:
each call (cuBLAS through cupy and torch, steps 04-08) runs alone for SECONDS (default 4) after a
1 s warm-up, the throughput taken from CUDA events around batches of 5 launches over the last two
thirds of the window, while nvidia-smi samples the clock and power. The list is run twice, cuBLAS
first and last, to show how much the order (the GPU's history) moves the figures. Besides the steps:
the seed's kernel 5 structure with fp16 sums (f16acc.py's configuration) and hgemm-diagnosis's
s06_pipe on 128 x 128 tiles (the best T4-compatible source measured). GPU only.
"""
import statistics
import subprocess
import sys
import threading
import time

import importlib.util
import pathlib

import cupy

from gemmlab import bench, registry
from lab.experiments import variant_kernel
from gemmlab.runtime.kernel import Kernel

HERE = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("f16acc", HERE / "f16acc.py")
f16acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(f16acc)
SEED5 = "05 fp16 acc, 256x256x32, warp 128x64 (seed kernel 5)"

STEPS = ["hgemm/04_register_prefetch", "hgemm/05_tuned_tiles", "hgemm/06_double_buffer", "hgemm/07_cp_async",
         "hgemm/08_wgmma"]


def sample(into: list, stop: threading.Event) -> None:
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
        try:
            mhz, watts, temp = out.strip().split(", ")
            into.append((time.time(), float(mhz), float(watts), float(temp)))
        except ValueError:
            pass
        time.sleep(0.05)


def sustained(fn, flops: float, seconds: float) -> dict:
    t_end = time.time() + 1.0  # warm-up
    while time.time() < t_end:
        fn()
    cupy.cuda.Device().synchronize()
    samples, stop = [], threading.Event()
    thread = threading.Thread(target=sample, args=(samples, stop))
    thread.start()
    start, rates = time.time(), []
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    while time.time() - start < seconds:
        s.record()
        for _ in range(5):
            fn()
        e.record()
        e.synchronize()
        if time.time() - start > seconds / 3:
            rates.append(5 * flops / (cupy.cuda.get_elapsed_time(s, e) / 1e3) / 1e12)
    stop.set()
    thread.join()
    late = [x for x in samples if x[0] - start > seconds / 3]
    return {"tflops": statistics.median(rates), "mhz": statistics.median(x[1] for x in late),
            "watts": statistics.median(x[2] for x in late), "temp": max(x[3] for x in late)}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    rng = cupy.random.default_rng(n)
    a, b = ((rng.random((n, n), dtype=cupy.float32) * 2 - 1).astype(cupy.float16) for _ in range(2))
    c = cupy.empty((n, n), dtype=cupy.float16)
    calls = bench.baseline_calls(a, b)
    for name in STEPS:
        k = Kernel(registry.get(name), {}, "gpu")
        calls[name] = (lambda k=k: k.run(a, b, c))
    extra = {"seed kernel 5 (fp16 sums)": f16acc.kernel(*next(v[1:] for v in f16acc.VARIANTS if v[0] == SEED5)),
             "s06_pipe 128x128": variant_kernel(HERE.parent / "hgemm-diagnosis", registry.get("hgemm/06_double_buffer"),
                                                "s06_pipe:BLOCK_M=128,BLOCK_N=128", backend="gpu")}
    for name, k in extra.items():
        calls[name] = (lambda k=k: k.run(a, b, c))
    flops = 2.0 * n**3
    order = list(calls)
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, N={n}, {seconds:.0f} s per call", flush=True)
    for rnd, names in enumerate((order, order[2:] + order[:2])):
        got = {}
        for name in names:
            got[name] = sustained(calls[name], flops, seconds)
            r = got[name]
            print(f"round {rnd} {name:28s} {r['tflops']:7.1f} TFLOP/s  SM clock {r['mhz']:5.0f} MHz  "
                  f"power {r['watts']:4.0f} W  max temp {r['temp']:3.0f} C", flush=True)
        best = max(got[k]["tflops"] for k in ("cupy.matmul", "torch.matmul") if k in got)
        print(f"round {rnd} % of the faster cuBLAS (alone, sustained): " + ", ".join(
            f"{k} {100 * got[k]['tflops'] / best:.1f}" for k in got if k not in ("cupy.matmul", "torch.matmul")),
            flush=True)


if __name__ == "__main__":
    main()
