"""Which backend a step runs on: a GPU through CuPy, or the CPU emulator (set_backend, GEMMLAB_BACKEND, else a GPU
when CuPy sees one). Below the registry, so that a step's rules can judge by the active backend's limits."""
from __future__ import annotations

from . import gpu, settings
from ..errors import BackendError, ConfigError

BACKENDS = ("gpu", "cpu")
_forced: str | None = None  # set_backend's choice; None: GEMMLAB_BACKEND's (settings.backend), else automatic


def set_backend(name: str | None) -> None:
    """Force 'gpu' or 'cpu' for every later step; None goes back to the default: GEMMLAB_BACKEND if it is set, else
    automatic (a GPU when CuPy sees one)."""
    global _forced
    if name is not None and name not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS} or None, not {name!r}")
    _forced = name


def backend(requested: str | None = None) -> str:
    """The backend a step runs on: the requested one, else the forced one (set_backend, else GEMMLAB_BACKEND),
    else GPU when CuPy sees one."""
    name = requested or _forced or settings.backend()
    if name is None:
        return "gpu" if gpu.available() else "cpu"
    if name not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, not {name!r}")
    if name == "gpu" and not gpu.available():
        if not (requested or _forced):
            raise BackendError(f"{settings.BACKEND}=gpu asks for the GPU backend, but CuPy sees no CUDA GPU here; set "
                               f"{settings.BACKEND}=cpu (or unset it) to run on the CPU emulator.")
        raise BackendError("backend='gpu' was asked for, but CuPy sees no CUDA GPU here; use backend='cpu'.")
    return name
