"""Steps 10, 11 and 12 and cuBLAS with the SM clock held at base, the L2 left warm: does the gap at 4096 stay when the
power controller cannot move the clock? Two parts:

    ncu --clock-control base --cache-control none --metrics gpu__time_duration.sum --csv \\
        python lab/hgemm-past-cublas/fixed_clock.py run N > N.csv      (launches each call 20 times, in turn)
    python lab/hgemm-past-cublas/fixed_clock.py table N.csv ...         (median time per kernel, % of cuBLAS's)

Under Nsight Compute each launch is serialised and timed alone, at the base clock; with --cache-control none the
L2 keeps what the previous launch left, as in the benchmark's warm loop.
"""
import csv
import io
import statistics
import sys

TURNS = 20
STEPS = {"10": "hgemm/10_tma_store", "11": "hgemm/11_mma_in_flight", "12": "hgemm/12_stream_k"}


def run(n: int) -> None:
    import cupy
    import numpy as np
    import torch

    import gemmlab
    from gemmlab import bench

    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(n)
    a, b = (cupy.asarray((rng.random((n, n), dtype=np.float32) * 2 - 1).astype(np.float16)) for _ in range(2))
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    c = cupy.empty((n, n), np.float16)
    calls = {"torch": lambda: torch.matmul(ta, tb)}
    for label, name in STEPS.items():
        calls[label] = (lambda k: lambda: k.run(a, b, c))(gemmlab.step(name, backend="gpu"))
    for turn in range(TURNS):
        for name in bench.rotated(list(calls), turn):
            calls[name]()
            cupy.cuda.runtime.deviceSynchronize()


def launches(path: str) -> dict[str, list[float]]:
    """The Nsight Compute CSV's kernel times in us: 'step 10', 'step 11', 'cuBLAS' -> one per launch."""
    from gemmlab import registry

    symbols = {registry.get(name).symbol: f"step {label}" for label, name in STEPS.items()}
    text = open(path).read()
    times: dict[str, list[float]] = {}
    for r in csv.DictReader(io.StringIO(text[text.index('"ID"'):])):
        if r["Metric Name"] == "gpu__time_duration.sum":
            name = r["Kernel Name"]
            who = next((label for symbol, label in symbols.items() if symbol in name),
                       "cuBLAS" if "nvjet" in name or "gemm" in name.lower() else None)
            if who:
                scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}[r["Metric Unit"]]
                times.setdefault(who, []).append(float(r["Metric Value"].replace(",", "")) * scale)
    return times


def table(paths: list[str]) -> None:
    for path in paths:
        times = launches(path)
        med = {who: statistics.median(t) for who, t in times.items()}
        base = med.get("cuBLAS")
        print(path + ": " + "   ".join(f"{who} {t:9.1f} us ({len(times[who])} launches"
                                       + (f", {100 * base / t:5.1f}% of cuBLAS)" if base else ")")
                                       for who, t in sorted(med.items())))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(int(sys.argv[2]))
    else:
        table(sys.argv[2:])
