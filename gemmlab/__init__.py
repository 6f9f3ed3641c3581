"""gemmlab: one kernel source, run on a GPU (CuPy), on the CPU (an emulator), or compiled with no GPU.

The shared machinery of the course "Writing a fast CUDA matrix multiplication".
"""
from . import errors, registry
from .kernel import Instance, Kernel, backend, instance, set_backend, step
from .registry import steps
from .check import verify
from .bench import benchmark

__all__ = ["Instance", "Kernel", "backend", "benchmark", "errors", "instance", "registry", "set_backend", "step", "steps",
           "verify"]



def __getattr__(name):  # submodules on first use, so `import gemmlab` stays light
    if name in ("results", "nvrtc", "cpu", "gpu", "layouts", "hardware", "coalescing", "plots", "widgets", "tiling",
                "explore", "pipeline", "profile", "swizzle", "glue", "bench", "check", "kernel", "source", "fusion",
                "tensorcores", "show"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")
