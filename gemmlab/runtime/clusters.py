"""How many thread-block clusters the live GPU runs at once (the persistent grid of the clusters lab kernel,
lab/hgemm-past-cublas/clusters.cu).

The hardware places a cluster's blocks on SMs of one GPC. With one block per SM, a GPC whose SM count
is not a multiple of the cluster size leaves SMs idle, so fewer than SMs / size clusters may be resident
at once; that kernel walks its tiles with a static stride, so a grid of more clusters than that would run a
second wave of clusters after the first: a long tail. The driver answers the question
(cuOccupancyMaxActiveClusters); it needs a kernel, so it is asked about a stand-in that occupies an SM
as the step does (its threads and dynamic shared memory; shared memory limits the step to one block per
SM, so its registers do not change the answer).
"""
from __future__ import annotations

import ctypes
import functools

from . import optional
from .arch import STATIC_SMEM


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig (cuda.h, CUDA 12+)
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def query(function_ptr: int, grid: int, threads: int, shared_bytes: int) -> int:
    """cuOccupancyMaxActiveClusters for a loaded kernel (CUfunction) with a compile-time cluster shape;
    -1 if the driver cannot say."""
    cfg = _LaunchConfig(grid, 1, 1, threads, 1, 1, shared_bytes, None, None, 0)
    n = ctypes.c_int(-1)
    err = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(function_ptr),
                                                                    ctypes.byref(cfg))
    return n.value if err == 0 else -1


@functools.lru_cache(maxsize=None)
def max_active(cluster: int, threads: int, shared_bytes: int) -> int | None:
    """Clusters of `cluster` blocks (each `threads` threads and `shared_bytes` of dynamic shared memory) that
    the current GPU runs at once; None when it cannot be asked (no GPU, an old driver)."""
    try:
        cupy = optional.module("cupy")

        code = (f'extern "C" __global__ void __cluster_dims__({cluster}, 1, 1) __launch_bounds__({threads}, 1) '
                'stand_in(int* p) { extern __shared__ int s[]; if (p) p[threadIdx.x] = s[threadIdx.x]; }')
        fn = cupy.RawModule(code=code, options=("-std=c++17",)).get_function("stand_in")
        if shared_bytes > STATIC_SMEM:
            fn.max_dynamic_shared_size_bytes = shared_bytes
        n = query(getattr(fn, "kernel", fn).ptr, cluster, threads, shared_bytes)
        return n if n > 0 else None
    except Exception:  # no GPU, no cluster support, a driver without the call: the caller falls back
        return None
