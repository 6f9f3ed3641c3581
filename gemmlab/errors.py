"""Every error the course raises: each says what was wrong and what to do about it."""
from __future__ import annotations


class GemmlabError(Exception):
    """Base class: catch this to survive any bad input in a notebook."""


class InputError(GemmlabError, ValueError):
    """Wrong dtype, shape, contiguity or device of an input array."""


class ConfigError(GemmlabError, ValueError):
    """A template configuration that cannot run (threads, shared memory, tile divisibility)."""


class ShapeError(InputError):
    """A problem shape this step rejects before launch."""


class CompileError(GemmlabError):
    """The compiler rejected the kernel; the message carries the compiler's own lines."""


class RecordsError(GemmlabError, ValueError):
    """A records file (results/) that cannot be read or written: the message names the file and what is wrong."""


class ArchError(GemmlabError):
    """The GPU's architecture lacks an instruction the step needs (cp.async on a T4, say)."""


class KernelError(GemmlabError, RuntimeError):
    """The kernel crashed, hung or broke a rule (divergent barrier) while running."""


class VerificationError(GemmlabError, AssertionError):
    """A kernel's output did not match the float64 reference."""


class BackendError(GemmlabError, RuntimeError):
    """The requested backend is not available here (no GPU, no compiler)."""
