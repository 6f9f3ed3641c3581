"""GPU backend: CuPy RawModule (NVRTC) compiles a step for the current device and launches it."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import tempfile
from pathlib import Path

import numpy as np

from . import optional
from ..errors import ArchError, BackendError, CompileError, ConfigError, KernelError
from . import settings
from .arch import STATIC_SMEM
from . import nvrtc
from .nvrtc import Resources, raise_for_log
from .source import toolkit_include_dirs, wheel_include_dirs, with_fp16_header


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    found = nvrtc.cupy_sees_a_gpu()
    if found and settings.no_pool():
        cupy = optional.module("cupy")  # optional: present once a GPU is found

        cupy.cuda.set_allocator(None)  # one cudaMalloc per array: the sanitizer sees exact bounds
    return found


def _cupy():
    if not available():
        raise BackendError("no CUDA GPU is visible to CuPy here; use backend='cpu' (the emulator) "
                           "or run on a machine with an NVIDIA GPU (see the appendix on running the course).")
    cupy = optional.module("cupy")

    nvrtc.load_for_cupy()  # CuPy's CUDA major's NVRTC before its first compile (once; see its docstring)
    return cupy


@functools.lru_cache(maxsize=1)
def device() -> dict:
    """Name, compute capability and the launch limits of the current device."""
    cupy = _cupy()
    dev = cupy.cuda.Device()
    attrs = dev.attributes
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    return {
        "name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "cc": int(dev.compute_capability),
        "sms": attrs["MultiProcessorCount"],
        "max_threads_per_block": attrs["MaxThreadsPerBlock"],
        "max_block": (attrs["MaxBlockDimX"], attrs["MaxBlockDimY"], attrs["MaxBlockDimZ"]),
        "max_grid": (attrs["MaxGridDimX"], attrs["MaxGridDimY"], attrs["MaxGridDimZ"]),
        "shared_per_block": attrs["MaxSharedMemoryPerBlock"],
        "shared_per_block_optin": attrs["MaxSharedMemoryPerBlockOptin"],
        "registers_per_block": attrs["MaxRegistersPerBlock"],
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
    }


def arch() -> str:
    return f"sm_{device()['cc']}"


class GpuModule:
    """One compiled template instantiation on the current GPU."""

    def __init__(self, source: str, name_expression: str, label: str, target: str | None = None):
        cupy = _cupy()
        self.label = label
        includes = with_fp16_header(toolkit_include_dirs() + wheel_include_dirs())
        options = ("-std=c++17", *[f"-I{d}" for d in includes])
        if target:  # an arch CuPy would not pick (sm_90a): our NVRTC call makes the cubin, CuPy loads it
            artifact = nvrtc.compile(source, name_expression, target, label=label)
            path = Path(tempfile.gettempdir()) / f"gemmlab-{hashlib.sha1(artifact.cubin).hexdigest()[:16]}.cubin"
            path.write_bytes(artifact.cubin)
            try:
                self.function = cupy.RawModule(path=str(path)).get_function(artifact.lowered_name)
            except cupy.cuda.driver.CUDADriverError as e:  # a driver too old for this arch, or another GPU
                raise ArchError(f"{label} was compiled for {target} but could not be loaded on {device()['name']} "
                                f"({arch()}): {e}. It runs only on that architecture, with a CUDA 12+ driver.") from None
            return
        try:
            module = cupy.RawModule(code=source, options=options, name_expressions=[name_expression])
            self.function = module.get_function(name_expression)
        except cupy.cuda.compiler.CompileException as e:
            raise_for_log(str(e), label, arch())
        except cupy.cuda.driver.CUDADriverError as e:
            if "INVALID_PTX" in str(e) or "UNSUPPORTED_PTX" in str(e):
                raise ArchError(f"{label} could not be loaded on {device()['name']} ({arch()}): {e}. "
                                "It likely uses an instruction this architecture lacks.") from None
            raise CompileError(f"{label} could not be loaded: {e}") from None

    def resources(self) -> Resources:
        f = self.function
        return Resources(arch(), f.num_regs, f.shared_size_bytes, f.local_size_bytes, 0, 0)

    def allow_dynamic_shared(self, nbytes: int) -> None:
        """Opt in to `nbytes` of dynamic shared memory (needed above 48 KB, and before an occupancy query)."""
        if nbytes > STATIC_SMEM and self.function.max_dynamic_shared_size_bytes < nbytes:
            self.function.max_dynamic_shared_size_bytes = nbytes

    def launch(self, grid, block, args, shared_mem: int = 0, stream=None) -> None:
        check_launch(self, grid, block, shared_mem)
        cupy = _cupy()
        self.allow_dynamic_shared(shared_mem)
        try:
            self.function(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem, stream=stream)
        except cupy.cuda.driver.CUDADriverError as e:
            raise KernelError(f"{self.label} failed to launch: {e}") from None

    def packed_launcher(self, grid, block, args, shared_mem: int = 0, stream=None):
        """packed_launcher() for this module's kernel."""
        return packed_launcher(self.function, self.label, grid, block, args, shared_mem, stream)


def packed_launcher(function, label: str, grid, block, args, shared_mem: int = 0, stream=None):
    """A no-argument function that launches `function` (a CuPy RawKernel) with these arguments through
    cuLaunchKernel directly.

    CuPy's RawKernel call converts every argument on every call (a few microseconds of host time for
    ten arguments); here they are converted once, into the array of pointers that cuLaunchKernel takes,
    and each call is one driver call. For timing loops: the arrays must stay alive and unchanged in
    shape, and the launch is not checked (check it once with GpuModule.launch()).
    """
    driver = optional.module("cupy_backends.cuda.api.driver")  # optional: CuPy's, on a machine with a GPU

    cupy = _cupy()
    ctype = {np.int32: ctypes.c_int32, np.uint32: ctypes.c_uint32}
    values = []
    for a in args:
        if isinstance(a, cupy.ndarray):
            values.append(ctypes.c_void_p(a.data.ptr))
        elif type(a) in ctype:
            values.append(ctype[type(a)](int(a)))
        else:
            raise ConfigError(f"{label}: packed_launcher takes CuPy arrays, np.int32 and np.uint32 arguments, "
                              f"not {type(a).__name__}")
    params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    f = getattr(function, "kernel", function).ptr
    (gx, gy, gz), (bx, by, bz) = tuple(grid), tuple(block)
    st = (stream or cupy.cuda.get_current_stream()).ptr
    keep = (args, values, params)  # alive as long as the launcher is

    def launch(_keep=keep):
        driver.launchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, st, ctypes.addressof(params), 0)

    return launch


def graph_launcher(function, label: str, grid, block, args, shared_mem: int = 0):
    """A no-argument function that replays, on the current stream, a CUDA graph holding this one launch.

    The same kernel and arguments as packed_launcher(), captured once on a side stream. On the H200 of
    the course's runs a graph launch cost the host less than half of what cuLaunchKernel did
    (lab/fusion-kernel-time/paths.py, recorded in results/experiments/fusion-kernel-time). Same rules as
    packed_launcher(): for timing loops, arrays alive and unchanged.
    """
    cupy = _cupy()
    side = cupy.cuda.Stream(non_blocking=True)
    launch = packed_launcher(function, label, grid, block, args, shared_mem, stream=side)
    side.begin_capture()
    try:
        launch()
    finally:
        graph = side.end_capture()

    def replay(_keep=(launch, side)):
        graph.launch()

    return replay


def check_launch(module: GpuModule, grid, block, shared_mem: int) -> None:
    """Refuse a launch the device cannot run, with the reason, before CUDA does it cryptically."""
    dev, f = device(), module.function
    threads = block[0] * block[1] * block[2]
    problems = []
    if threads > dev["max_threads_per_block"]:
        problems.append(f"{threads} threads per block, over the limit of {dev['max_threads_per_block']}")
    for axis, (b, lim) in enumerate(zip(block, dev["max_block"])):
        if b > lim:
            problems.append(f"block dimension {'xyz'[axis]}={b} over the limit of {lim}")
    for axis, (g, lim) in enumerate(zip(grid, dev["max_grid"])):
        if g > lim:
            problems.append(f"grid dimension {'xyz'[axis]}={g} over the limit of {lim}")
    smem = f.shared_size_bytes + shared_mem
    if smem > dev["shared_per_block_optin"]:
        problems.append(f"{smem} bytes of shared memory per block, over this GPU's "
                        f"{dev['shared_per_block_optin']}")
    if f.num_regs * threads > dev["registers_per_block"]:
        problems.append(f"{f.num_regs} registers x {threads} threads = {f.num_regs * threads} registers, "
                        f"over the {dev['registers_per_block']} a block may use")
    if problems:
        raise ConfigError(f"{module.label} cannot launch: " + "; ".join(problems) +
                          ". Choose smaller tiles or fewer threads per block.")

