"""Every environment variable gemmlab reads, parsed and checked here and nowhere else (README, "Environment variables").

Each reader looks at the environment when it is called (a notebook or a test may change a variable between calls), and a
value it cannot use is a ConfigError that names the variable, says what was wrong and what to give instead.
"""
from __future__ import annotations

import ctypes
import math
import os
from pathlib import Path

import numpy as np

from ..errors import ConfigError

BACKEND = "GEMMLAB_BACKEND"  # gpu | cpu: the backend of every step (a call's backend= still wins)
CACHE = "GEMMLAB_CACHE"  # the folder of the CPU backend's compiled kernels (default ~/.cache/gemmlab)
CPU_FLAGS = "GEMMLAB_CPU_FLAGS"  # more g++ flags for the emulator (the tests force the software fp16 with it)
CPU_THREADS = "GEMMLAB_CPU_THREADS"  # the emulator's worker threads (blocks run at once)
CPU_TIMEOUT = "GEMMLAB_CPU_TIMEOUT"  # seconds a CPU launch may take
CPU_STACK_KB = "GEMMLAB_CPU_STACK_KB"  # KB of stack per emulated CUDA thread (read by the emulator's child too)
NVRTC_LIB = "GEMMLAB_NVRTC_LIB"  # a libnvrtc.so for compile-only analysis instead of the installed one
NO_POOL = "GEMMLAB_NO_POOL"  # set (non-empty): CuPy allocates each array alone, so compute-sanitizer sees exact bounds
CUDA_ROOTS = ("CUDA_PATH", "CUDA_HOME")  # a CUDA toolkit's folder (headers, libnvrtc), then /usr/local/cuda
CUPY_TF32 = "CUPY_TF32"  # CuPy's own: 1 lets cuBLAS's fp32 baseline use TF32 (hardware.py records which)

BACKENDS = ("gpu", "cpu")
MAX_TIMEOUT_S = 1_000_000.0  # about 11.6 days; Python's waits overflow far above it (1e10 s)
STACK_KB_RANGE = (16, 65536)  # a fiber's stack: 16 KB at least (the emulator's floor), 64 MB at most
MAX_CPU_THREADS = 256  # runtime.cpp's kMaxWorkers


def _raw(name: str) -> str:
    """The variable's value with surrounding blanks removed; "" when unset."""
    return os.environ.get(name, "").strip()


def given(name: str) -> str:
    """The variable's value as it was set ("" when unset): for a message that quotes it."""
    return os.environ.get(name, "")


def backend() -> str | None:
    """GEMMLAB_BACKEND: 'gpu', 'cpu', or None (unset: a GPU when CuPy sees one, else the CPU emulator)."""
    raw = _raw(BACKEND)
    if not raw:
        return None
    if raw.lower() not in BACKENDS:
        raise ConfigError(f"{BACKEND}={os.environ[BACKEND]!r} is not a backend; set it to 'gpu' or 'cpu', or unset it "
                          f"(a GPU when there is one, else the CPU emulator).")
    return raw.lower()


def cache_root() -> Path | None:
    """GEMMLAB_CACHE as a folder, `~` expanded (None: unset, the default ~/.cache/gemmlab)."""
    raw = _raw(CACHE)
    if not raw:
        return None
    path = Path(os.path.expandvars(os.path.expanduser(raw)))
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{CACHE}={os.environ[CACHE]!r} is a file, not a folder; set {CACHE} to a folder you can "
                          f"write to, or unset it.")
    return path


def cpu_flags() -> list[str]:
    """GEMMLAB_CPU_FLAGS: extra g++ flags for the emulator, split at blanks."""
    return _raw(CPU_FLAGS).split()


def _whole_number(name: str, lo: int, hi: int | None, what: str) -> int | None:
    """Variable `name` as a whole number from `lo` to `hi` (None: unset or blank); a ConfigError that names it and
    says `what` it should be otherwise."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return None
    if not raw.strip().isdigit() or int(raw) < lo or (hi is not None and int(raw) > hi):
        raise ConfigError(f"{name}={raw!r} is not {what}, or unset it.")
    return int(raw)


def cpu_threads(most: int) -> int | None:
    """GEMMLAB_CPU_THREADS as a whole number of at least 1 (None: unset); `most`, this machine's CPUs, for the message."""
    return _whole_number(CPU_THREADS, 1, None, "a thread count; set it to a whole number of at least 1 (the "
                         f"emulator's worker threads; {most} here at most)")


def timeout(value, what: str = "timeout") -> float:
    """`value` as a time-out in seconds: a number above 0 and at most MAX_TIMEOUT_S; a ConfigError naming `what`
    (the keyword or the variable) otherwise."""
    try:
        t = float("nan") if isinstance(value, (bool, np.bool_)) else float(value)
    except (TypeError, ValueError, OverflowError):
        t = float("nan")
    if not 0 < t < math.inf:
        raise ConfigError(f"{what}={value!r} is not a time-out; give a positive number of seconds (such as 600).")
    if t > MAX_TIMEOUT_S:
        raise ConfigError(f"{what}={value!r} is longer than the CPU backend can wait; give at most {MAX_TIMEOUT_S:.0f} "
                          f"seconds (about {MAX_TIMEOUT_S / 86400:.1f} days).")
    return t


def cpu_timeout() -> float | None:
    """GEMMLAB_CPU_TIMEOUT in seconds (None: unset), checked as timeout() checks a keyword."""
    raw = os.environ.get(CPU_TIMEOUT, "")
    return timeout(raw, CPU_TIMEOUT) if raw.strip() else None


def cpu_stack_kb() -> int | None:
    """GEMMLAB_CPU_STACK_KB, the stack of each emulated CUDA thread in KB (None: unset, the emulator's 64 KB)."""
    lo, hi = STACK_KB_RANGE
    return _whole_number(CPU_STACK_KB, lo, hi, f"a stack size; set it to a whole number of KB from {lo} to {hi} "
                         "(each emulated CUDA thread's stack; 64 when unset)")


def nvrtc_lib() -> str | None:
    """GEMMLAB_NVRTC_LIB: the libnvrtc file to load, `~` expanded (None: unset). A path that is no file is a
    ConfigError here; one that loads but is no NVRTC is checked by nvrtc_symbols."""
    raw = _raw(NVRTC_LIB)
    if not raw:
        return None
    path = os.path.expanduser(raw)
    if not os.path.isfile(path):
        raise ConfigError(f"{NVRTC_LIB}={os.environ[NVRTC_LIB]!r} is not a file; point it at a libnvrtc.so (e.g. "
                          f"<site-packages>/nvidia/cu13/lib/libnvrtc.so.13) or unset it to use the installed one.")
    return path


def check_nvrtc_library(lib: ctypes.CDLL, path: str) -> None:
    """A ConfigError naming GEMMLAB_NVRTC_LIB when the library it chose lacks NVRTC's functions (another library)."""
    missing = [f for f in ("nvrtcVersion", "nvrtcCreateProgram", "nvrtcCompileProgram") if not hasattr(lib, f)]
    if missing:
        raise ConfigError(f"{NVRTC_LIB}={path!r} loads, but it is not NVRTC (no {missing[0]}); point it at a "
                          f"libnvrtc.so or unset it to use the installed one.")


def no_pool() -> bool:
    """GEMMLAB_NO_POOL set to anything: CuPy's memory pool off (the GPU lane's sanitizer runs)."""
    return bool(os.environ.get(NO_POOL))


def cuda_roots() -> list[str]:
    """CUDA_PATH, CUDA_HOME (those set) and /usr/local/cuda: where a CUDA toolkit may be."""
    return [r for r in (os.environ.get(name) for name in CUDA_ROOTS) if r] + ["/usr/local/cuda"]


def cupy_tf32() -> bool:
    """CuPy's CUPY_TF32 (anything but '' or '0'): cuBLAS's fp32 matmul may use TF32."""
    return os.environ.get(CUPY_TF32, "0") not in ("", "0")


def child_environment(extra: dict | None = None) -> dict:
    """The environment of an emulator child: this one, GEMMLAB_CPU_STACK_KB checked (and written as the number the
    child reads), plus `extra`."""
    env = dict(os.environ)
    kb = cpu_stack_kb()
    if kb is None:
        env.pop(CPU_STACK_KB, None)  # a blank value: the emulator's default, as unset
    else:
        env[CPU_STACK_KB] = str(kb)
    return {**env, **(extra or {})}
