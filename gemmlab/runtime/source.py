"""Assemble a step's kernel source: the .cu file with kernels/common.cuh inlined.

Inlining (instead of `-I kernels`) makes the header part of the text that compilers hash, so an
edit to common.cuh always recompiles, on the GPU (CuPy's cache) and on the CPU (ours) alike.
"""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from . import optional
from . import settings

PACKAGE = Path(__file__).resolve().parent.parent  # gemmlab/


def _course_root() -> Path:
    """Where kernels/ and results/ are: the checkout this package sits in, or, after `pip install` of the
    repository (as on Colab), the copies the package ships (pyproject.toml maps them into gemmlab/course)."""
    checkout = PACKAGE.parent
    return checkout if (checkout / "kernels" / "common.cuh").is_file() else PACKAGE / "course"


REPO = _course_root()
KERNELS = REPO / "kernels"
_INCLUDE_COMMON = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"common\.cuh"[ \t]*$', re.M)


def kernel_path(file: str) -> Path:
    """The absolute path of a kernel file given relative to kernels/ (or the repository)."""
    p = Path(file)
    if not p.is_absolute():
        p = KERNELS / p if (KERNELS / p).exists() else REPO / p
    return p


def assemble(file: str | os.PathLike, text: str | None = None) -> str:
    """The kernel's source text with `#include "common.cuh"` replaced by the header itself.

    `text` overrides the file's contents (a reader's edited kernel); `#line` directives keep the
    compiler's error lines pointing at the kernel file, not at the assembled text.
    """
    path = kernel_path(str(file))
    body = path.read_text() if text is None else text
    common = (KERNELS / "common.cuh").read_text()

    def inline(_m: re.Match) -> str:
        line = body[: _m.start()].count("\n") + 2
        return f'#line 1 "common.cuh"\n{common}\n#line {line} "{path.name}"'

    return f'#line 1 "{path.name}"\n' + _INCLUDE_COMMON.sub(inline, body, count=1)


def wheel_include_dirs() -> list[str]:
    """Header folders of NVIDIA's pip wheels (nvidia-cuda-runtime), newest CUDA first."""
    try:
        nvidia = optional.module("nvidia")  # namespace package of NVIDIA's wheels
    except ImportError:
        return []
    found = []
    for root in nvidia.__path__:
        found += sorted(glob.glob(os.path.join(root, "cu*", "include")), reverse=True)
        found += glob.glob(os.path.join(root, "cuda_runtime", "include"))
    return found


def toolkit_include_dirs() -> list[str]:
    """Header folders of an installed CUDA toolkit (CUDA_PATH, CUDA_HOME, /usr/local/cuda)."""
    return [os.path.join(r, "include") for r in settings.cuda_roots()]


def with_fp16_header(dirs: list[str]) -> list[str]:
    """Those of `dirs` that hold cuda_fp16.h (NVRTC 13 has no built-in copy), without repeats."""
    return [d for d in dict.fromkeys(dirs) if os.path.exists(os.path.join(d, "cuda_fp16.h"))]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(text: str, patch: str, label: str = "patch") -> str:
    """`text` with a unified diff (`diff -u`, one file) applied; every context and removed line must
    match exactly, else a ValueError says which hunk does not apply (the file changed since). As GNU patch
    does, a hunk whose lines moved (lines added or removed above it) is found at an offset, which carries
    over to the hunks after it."""
    old = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0      # next line of `old` not yet copied
    offset = 0   # how far the previous hunk had moved
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        i += 1
        if not m:
            continue  # the ---/+++ header, or anything before the first hunk
        body = []  # (tag, line) of this hunk
        while i < len(lines) and not lines[i].startswith("@@"):
            if lines[i][:1] != "\\":  # "\ No newline at end of file"
                body.append((lines[i][:1], lines[i][1:]))
            i += 1
        want = [line.rstrip("\n") for tag, line in body if tag in " -"]
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1) + offset

        def matches(at: int) -> bool:
            return at >= pos and at + len(want) <= len(old) and all(
                old[at + j].rstrip("\n") == w for j, w in enumerate(want))

        found = next((at for d in range(len(old) + 1) for at in (start - d, start + d) if matches(at)), None)
        if found is None:
            raise ValueError(f"{label}: hunk {m.group(0)} does not apply at line {start + 1}: "
                             "the file it was made against has changed")
        offset += found - start
        out += old[pos:found]
        pos = found
        for tag, line in body:
            if tag in " -":
                pos += 1
                if tag == " ":
                    out.append(old[pos - 1])
            elif tag == "+":
                out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out + old[pos:])
