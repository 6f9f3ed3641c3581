"""gemmlab: one kernel source, run on a GPU (CuPy), on the CPU (an emulator), or compiled with no GPU.

The shared machinery of the course "Writing a fast CUDA matrix multiplication".
"""
from . import errors
from .runtime import registry
from .runtime.kernel import Instance, Kernel, backend, instance, set_backend, step
from .runtime.registry import steps
from .measure.check import verify
from .measure.bench import benchmark
import importlib

__all__ = ["Instance", "Kernel", "backend", "benchmark", "errors", "instance", "registry", "set_backend", "step", "steps",
           "verify"]


# Short names for every module, imported on first use so that `import gemmlab` stays light: gemmlab.bench is
# gemmlab.measure.bench, gemmlab.show is gemmlab.chapters.show, and so on (the layout: README, "Where things live").
_HOMES = {
    **dict.fromkeys(["arch", "backends", "bounds", "clusters", "cpu", "gpu", "kernel", "nvrtc", "operands", "registry", "settings",
                     "source", "tma", "variants"], "runtime"),
    **dict.fromkeys(["bench", "check", "document_figures", "fusion", "hardware", "profile", "results"], "measure"),
    **dict.fromkeys(["coalescing", "documents", "exercises", "explore", "fusion_report", "glue", "layouts", "pipeline",
                     "plots", "show", "sitecontrols", "swizzle", "tensorcores", "tiling", "widgets"], "chapters"),
}


def __getattr__(name):
    if name in _HOMES:
        return importlib.import_module(f".{_HOMES[name]}.{name}", __name__)
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")
