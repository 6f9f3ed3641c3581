"""The package's optional dependencies, imported where they are first needed and through this one door: CuPy (and
its cupyx, cupy_backends) on a machine with a GPU, PyTorch for the baselines that time torch's a @ b @ c, the NVIDIA
wheels (nvidia) that bring NVRTC and its headers. `import gemmlab` stays light and works without any of them; a
function that needs one asks for it here and gets an ImportError if it is absent."""
from __future__ import annotations

import importlib


def module(name: str):
    """The module called `name` ('cupy', 'torch', 'cupyx.profiler', 'cupy_backends.cuda.api.driver', 'nvidia'),
    imported on first use (a dotted name gives the submodule); ImportError when it is not installed."""
    return importlib.import_module(name)


class _Lazy:
    """A module imported at its first attribute access: `widgets = optional.lazy("ipywidgets")` at the top of a
    module that draws live controls keeps that module (and the command line that imports it) usable where the
    dependency is missing, until a control is actually built."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(module(self._name), attr)


def lazy(name: str) -> _Lazy:
    """Module `name`, imported when first used (ImportError then, if it is not installed)."""
    return _Lazy(name)
