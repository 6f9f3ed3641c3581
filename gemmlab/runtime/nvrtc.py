"""Compile-only analysis with no GPU: NVRTC from NVIDIA's pip wheel, called through ctypes.

CuPy's RawModule needs a device even to compile, so this module talks to libnvrtc directly. It
compiles a template instantiation for any architecture (sm_75 = T4, sm_80, sm_90), and reports
what ptxas says about registers, shared memory and spills, the PTX, and the SASS (nvdisasm wheel).

Which NVRTC: whichever is installed (the pip wheel's first, then a CUDA toolkit's), or the library
that the environment variable GEMMLAB_NVRTC_LIB names (a path to a libnvrtc.so, e.g. another
release's wheel unpacked with `pip install --target`), headers from its ../include first. Register
counts and spills depend on the release (`version()` says which one ran). The GPU path compiles with
the NVRTC of CuPy's own CUDA major (`load_for_cupy`: libnvrtc.so.12 for cupy-cuda12x, from the
nvidia-cuda-nvrtc-cu12 wheel), loaded before CuPy's first compile, because CuPy's loader would otherwise
take the newest wheel (13.5); only the sm_90a steps' cubins, which CuPy cannot target, come from this
module. That loader takes any libnvrtc already in the process, so with a GPU present CuPy makes its
choice before this module loads its own (`_nvrtc`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import optional
from ..errors import ArchError, BackendError, CompileError, ConfigError
from . import settings
from .arch import ARCH_LIMITS, T4_SHARED_LIMIT, ArchLimits, arch_limits, register_allocation  # noqa: F401 (nvrtc.X)
from .source import toolkit_include_dirs, wheel_include_dirs, with_fp16_header
from .source import REPO
import importlib
from importlib import metadata



@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel instantiation on one architecture."""

    arch: str
    registers: int
    shared_bytes: int  # static shared memory; dynamic shared memory is the launch's business
    local_bytes: int  # stack frame (local memory per thread)
    spill_stores: int
    spill_loads: int
    # ptxas' warning C7519 (C7520 in older NVRTC): it waits for each wgmma before issuing the next (usually
    # registers that a wgmma reads are computed in between the wgmmas); the tensor cores then idle
    wgmma_serialized: bool = False

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0

    def __str__(self) -> str:
        return (f"{self.arch}: {self.registers} registers, {self.shared_bytes} B static shared, "
                f"{self.local_bytes} B stack, spills {self.spill_stores}/{self.spill_loads} B (st/ld)"
                + (", wgmmas serialized (ptxas warning C7519/C7520)" if self.wgmma_serialized else ""))


@dataclass(frozen=True)
class Artifact:
    """One compiled instantiation: PTX, cubin, ptxas log and resources."""

    name_expression: str
    lowered_name: str
    arch: str
    ptx: str
    cubin: bytes
    log: str
    resources: Resources


@dataclass(frozen=True)
class Fit:
    """Whether one block of a compiled kernel fits an architecture: every limit it breaks, by how much."""

    arch: str
    limits: ArchLimits
    resources: Resources
    threads: int
    dynamic_shared: int
    problems: tuple[str, ...]  # the limits broken, each with the excess; spills last
    nvrtc: str = ""            # the NVRTC release that compiled it: registers and spills depend on it

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        r, compiler = self.resources, f"NVRTC {self.nvrtc}: " if self.nvrtc else ""
        if self.problems:
            return f"fits {self.limits.name}: no ({compiler}" + "; ".join(self.problems) + ")"
        return (f"fits {self.limits.name}: yes ({compiler}{r.registers} registers x {self.threads} threads = "
                f"{register_allocation(r.registers, self.threads)} of {self.limits.registers_per_block}; "
                f"{r.shared_bytes + self.dynamic_shared} B shared of {self.limits.shared_optin}; no spills)")


def fit(resources: Resources, threads: int, dynamic_shared: int = 0, arch: str | None = None,
        compiler: str = "") -> Fit:
    """Check one block (`threads`, `dynamic_shared` bytes asked for at launch) of a kernel whose ptxas
    report is `resources` against the limits of `arch` (default: the one it was compiled for): threads,
    registers per thread and per block, static and total shared memory, and spills."""
    arch = arch or resources.arch
    lim = arch_limits(arch)
    r, out = resources, []
    if threads > lim.threads_per_block:
        out.append(f"{threads} threads per block, over the limit of {lim.threads_per_block} by "
                   f"{threads - lim.threads_per_block}")
    if r.registers > lim.registers_per_thread:
        out.append(f"{r.registers} registers per thread, over the limit of {lim.registers_per_thread} by "
                   f"{r.registers - lim.registers_per_thread}")
    taken = register_allocation(r.registers, threads)
    if taken > lim.registers_per_block:
        out.append(f"{r.registers} registers x {threads} threads = {r.registers * threads} registers ({taken} as "
                   f"allocated per warp), over the register file's {lim.registers_per_block} by "
                   f"{taken - lim.registers_per_block}: the launch fails (too many resources requested)")
    if r.shared_bytes > lim.shared_static:
        out.append(f"{r.shared_bytes} B of static shared memory, over the limit of {lim.shared_static} by "
                   f"{r.shared_bytes - lim.shared_static}")
    total = r.shared_bytes + dynamic_shared
    if total > lim.shared_optin:
        out.append(f"{r.shared_bytes} B static + {dynamic_shared} B dynamic = {total} B of shared memory, over "
                   f"the {lim.shared_optin} a block may have on {arch} by {total - lim.shared_optin}")
    if r.spills:
        out.append(f"spills {r.spill_stores}/{r.spill_loads} B (stores/loads) to local memory")
    return Fit(arch, lim, r, threads, dynamic_shared, tuple(out), compiler)


LIB_ENV = "GEMMLAB_NVRTC_LIB"  # a libnvrtc.so to use instead of the installed one


def _release(lib: str) -> tuple[int, ...]:
    """The release a libnvrtc file name carries: libnvrtc.so.13 -> (13,), libnvrtc.so.12.8 -> (12, 8)."""
    return tuple(int(n) for n in re.findall(r"\d+", lib.rsplit(".so", 1)[-1]))


def _wheel_libraries() -> list[str]:
    """The libnvrtc files of NVIDIA's pip wheels, newest release first (nvidia/cu13/lib holds 13.x,
    nvidia/cuda_nvrtc/lib 12.x): sorted by release, not by folder name."""
    try:
        nvidia = optional.module("nvidia")
    except ImportError:
        return []
    libs = [lib for root in nvidia.__path__
            for lib in glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*[0-9]"))
            if "builtins" not in lib and ".alt." not in lib]
    return sorted(libs, key=_release, reverse=True)


def _library_candidates() -> list[tuple[str, list[str]]]:
    """(libnvrtc path, matching header folders): GEMMLAB_NVRTC_LIB's alone if set, else the pip wheels'
    (newest first), then a toolkit's."""
    chosen = settings.nvrtc_lib()
    if chosen:
        here = os.path.join(os.path.dirname(os.path.abspath(chosen)), os.pardir, "include")
        return [(chosen, [os.path.normpath(here)] + toolkit_include_dirs() + wheel_include_dirs())]
    found = [(lib, wheel_include_dirs() + toolkit_include_dirs()) for lib in _wheel_libraries()]
    for root in settings.cuda_roots():
        for lib in sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*"))):
            found.append((lib, toolkit_include_dirs() + wheel_include_dirs()))
    name = ctypes.util.find_library("nvrtc")
    if name:
        found.append((name, toolkit_include_dirs() + wheel_include_dirs()))
    return found


def cupy_cuda_major() -> int | None:
    """The CUDA major release CuPy was built for (12 for cupy-cuda12x), or None without CuPy."""
    try:
        cupy = optional.module("cupy")

        return int(cupy.cuda.runtime.runtimeGetVersion()) // 1000
    except Exception:  # noqa: BLE001 (no CuPy, or no CUDA runtime for it)
        return None


@functools.lru_cache(maxsize=1)
def load_for_cupy() -> str | None:
    """Load the wheel's NVRTC of CuPy's own CUDA major (libnvrtc.so.12 for cupy-cuda12x) before CuPy's
    first compile, and return its path. CuPy's loader (cuda.pathfinder) takes the newest wheel it finds
    (13.5, which the analysis pins) unless an NVRTC of its major is already in the process, and NVRTC 13
    writes PTX that a CUDA 12 driver (a T4 on Colab) cannot load. None when no such wheel is installed:
    CuPy then finds its own as before."""
    major = cupy_cuda_major()
    for lib in _wheel_libraries():
        if major is not None and _release(lib)[:1] == (major,):
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            return lib
    return None


@functools.lru_cache(maxsize=1)
def cupy_sees_a_gpu() -> bool:
    """True when CuPy imports and sees at least one CUDA device (gpu.available, which also sets the allocator)."""
    try:
        cupy = optional.module("cupy")  # optional: absent on a machine without a GPU

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return False


def _let_cupy_choose_first() -> None:
    """On a machine with a GPU, have CuPy load its NVRTC now (load_for_cupy, then CuPy's own loader, as on
    its first compile): its loader takes a libnvrtc already in the process, so loading ours first would
    hand CuPy our release (13.5 to a CUDA 12 CuPy) instead of its own."""
    if not cupy_sees_a_gpu():
        return
    load_for_cupy()
    try:
        importlib.import_module("cupy_backends.cuda.libs.nvrtc").getVersion()
    except Exception:  # noqa: BLE001 (CuPy finds no NVRTC: its own compile will say so, not ours)
        pass


@functools.lru_cache(maxsize=None)
def _nvrtc() -> tuple[ctypes.CDLL, tuple[str, ...]]:
    _let_cupy_choose_first()
    candidates = _library_candidates()
    for path, includes in candidates:
        try:
            # its libnvrtc-builtins first: some releases (13.0's wheel) open it by name, found only if loaded
            for builtins in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*")) \
                    if os.path.dirname(path) else []:
                ctypes.CDLL(builtins)
            lib = ctypes.CDLL(path)
        except OSError as e:
            if settings.nvrtc_lib():
                raise ConfigError(f"{LIB_ENV}={settings.given(LIB_ENV)!r} could not be loaded ({e}); point it at a "
                                  f"libnvrtc.so (e.g. <site-packages>/nvidia/cu13/lib/libnvrtc.so.13) or unset it to "
                                  f"use the installed one.") from None
            continue
        if settings.nvrtc_lib():
            settings.check_nvrtc_library(lib, settings.given(LIB_ENV))
        return lib, tuple(with_fp16_header(includes))
    raise BackendError("NVRTC was not found: install the pinned requirements "
                       "(pip install -r requirements.txt brings the nvidia-cuda-nvrtc wheel) "
                       "or a CUDA toolkit.")


def available() -> bool:
    """True when compile-only analysis can run here (a GEMMLAB_NVRTC_LIB that is no NVRTC is a ConfigError)."""
    try:
        _nvrtc()
        return True
    except BackendError:
        return False


def library_path() -> str:
    """The file of the libnvrtc that compile-only analysis loaded (for reports next to `version()`)."""
    lib, _ = _nvrtc()
    return lib._name


def pinned_version() -> str | None:
    """The NVRTC release the course pins ("13.5"), which its T4 claims are checked with: requirements.txt's
    pin in a checkout, the same pin from the installed package's `analysis` extra elsewhere (a test holds
    the two equal)."""
    try:
        lines = (REPO / "requirements.txt").read_text().splitlines()
    except OSError:
        try:
            lines = [r.split(";")[0].strip() for r in metadata.requires("gemmlab") or []]
        except Exception:  # noqa: BLE001 (not installed as a package either)
            return None
    pins = [ln.split("==")[1].strip() for ln in lines if ln.startswith("nvidia-cuda-nvrtc==")]
    return ".".join(pins[0].split(".")[:2]) if pins else None


def version() -> str:
    """NVRTC's release, "13.5": register counts and spills depend on it."""
    lib, _ = _nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _check(lib, status: int, what: str) -> None:
    if status != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise BackendError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(status).decode()}")


def _get(lib, prog, size_fn: str, get_fn: str) -> bytes:
    n = ctypes.c_size_t()
    _check(lib, getattr(lib, size_fn)(prog, ctypes.byref(n)), size_fn)
    buf = ctypes.create_string_buffer(n.value)
    _check(lib, getattr(lib, get_fn)(prog, buf), get_fn)
    return buf.raw[: n.value]


_ARCH_NEEDED = re.compile(r"requires \.?target sm_(\d+)|not supported on \.target|sm_(\d+) or higher", re.I)
# (findall gives the two groups of each match; the middle alternative has neither.)


def raise_for_log(log: str, label: str, arch: str) -> None:
    """Turn a failed compile's log into an ArchError (missing instruction) or a CompileError."""
    errors = "\n".join(line for line in log.splitlines() if "error" in line.lower()) or log
    too_much = re.search(r"too much shared data \((0x[0-9a-f]+) bytes, (0x[0-9a-f]+) max\)", log)
    if too_much:
        need, limit = (int(g, 16) for g in too_much.groups())
        raise ConfigError(f"{label} needs {need} bytes of static shared memory on {arch}, over the "
                          f"{limit}-byte limit: choose smaller tiles.")
    if "__cluster_dims__ is not supported for this GPU architecture" in log:  # the front end, before ptxas
        raise ArchError(f"{label} uses what {arch} lacks (it needs sm_90): thread-block clusters (__cluster_dims__).\n"
                        f"Pick a step for this GPU, or analyse it for a newer arch (e.g. arch='sm_90').")
    if _ARCH_NEEDED.search(log):
        # ptxas repeats the message for every use; name each missing feature once, and ask for the
        # newest arch any of them needs (Hopper's wgmma and setmaxnreg exist on sm_90a only).
        needs = [int(n) for pair in _ARCH_NEEDED.findall(log) for n in pair if n]
        features = list(dict.fromkeys(re.findall(r"(?:Feature|Modifier) '([^']+)' requires", log)))
        missing = list(dict.fromkeys(re.findall(r"Instruction '([^']+)' not supported on \.target", log)))
        if any(m.startswith(("wgmma", "setmaxnreg")) for m in missing):
            need_txt = "sm_90a"
        else:
            need_txt = f"sm_{max(needs)}" if needs else "a newer architecture"
        what = ", ".join(features + missing) or errors.strip()
        example = need_txt if need_txt.startswith("sm_") else "sm_80"
        raise ArchError(f"{label} uses what {arch} lacks (it needs {need_txt}): {what}.\n"
                        f"Pick a step for this GPU, or analyse it for a newer arch (e.g. arch='{example}').")
    raise CompileError(f"{label} did not compile for {arch}:\n{errors.strip()}")


@functools.lru_cache(maxsize=256)
def _compile_cached(source: str, name_expression: str, arch: str, options: tuple[str, ...], label: str) -> Artifact:
    lib, includes = _nvrtc()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None),
           "nvrtcCreateProgram")
    try:
        _check(lib, lib.nvrtcAddNameExpression(prog, name_expression.encode()), "nvrtcAddNameExpression")
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-Xptxas=-v", *[f"-I{d}" for d in includes], *options]
        status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
        log = _get(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog").decode(errors="replace").rstrip("\x00")
        if status != 0:
            raise_for_log(log, label, arch)
        lowered = ctypes.c_char_p()
        _check(lib, lib.nvrtcGetLoweredName(prog, name_expression.encode(), ctypes.byref(lowered)),
               "nvrtcGetLoweredName")
        lowered_name = lowered.value.decode()
        ptx = _get(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX").decode().rstrip("\x00")
        cubin = _get(lib, prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return Artifact(name_expression, lowered_name, arch, ptx, cubin, log, parse_ptxas_log(log, lowered_name, arch))


def compile(source: str, name_expression: str, arch: str = "sm_75", options: tuple[str, ...] = (),
            label: str = "kernel") -> Artifact:
    """Compile one template instantiation for `arch` with no GPU present (cached)."""
    if not re.fullmatch(r"sm_\d{2,3}a?", arch):
        raise ConfigError(f"arch must look like 'sm_75', 'sm_80' or 'sm_90', not {arch!r}; pass one of those.")
    try:
        return _compile_cached(source, name_expression, arch, tuple(options), label)
    except MissingReport:
        # NVRTC 13.0 (seen on an H100 machine) caches what ptxas produced for a PTX text it has seen
        # before, even in another process, and a cached result comes back without ptxas' report. A
        # uniquely named, unused device variable makes the PTX new; the kernel's code is unchanged.
        fresh = f"{source}\n__device__ int gemmlab_fresh_compile_{uuid.uuid4().hex};\n"
        return _compile_cached(fresh, name_expression, arch, options, label)


class MissingReport(BackendError):
    """ptxas' -v report was absent from NVRTC's log."""


def parse_ptxas_log(log: str, lowered_name: str, arch: str) -> Resources:
    """Read registers, shared memory, stack and spills of one function off ptxas' -v output."""
    current, props = None, {}
    for line in log.splitlines():
        # named in the line, before the function's report; C7519 in NVRTC 13.5, C7520 in 13.0: read the words
        if "wgmma.mma_async instructions are serialized" in line and lowered_name in line:
            props["wgmma_serialized"] = True
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?", line)
        if m:
            current = m.group(1)
        if current != lowered_name:
            continue
        for key, pattern in (("local", r"(\d+) bytes stack frame"), ("spill_stores", r"(\d+) bytes spill stores"),
                             ("spill_loads", r"(\d+) bytes spill loads"), ("registers", r"Used (\d+) registers"),
                             ("shared", r"(\d+) bytes smem")):
            m = re.search(pattern, line)
            if m:
                props[key] = int(m.group(1))
    if "registers" not in props:
        lib = _library_candidates()[0][0] if _library_candidates() else "?"
        raise MissingReport(f"could not read ptxas' report for {lowered_name} on {arch} "
                            f"(NVRTC {version()} from {lib}); the log was:\n{log}")
    return Resources(arch, props["registers"], props.get("shared", 0), props.get("local", 0),
                     props.get("spill_stores", 0), props.get("spill_loads", 0), props.get("wgmma_serialized", False))


def nvdisasm_path() -> str | None:
    """The nvdisasm binary: the pip wheel's, else one on PATH or in a toolkit."""
    try:
        nvidia = optional.module("nvidia")

        for root in nvidia.__path__:
            for p in sorted(glob.glob(os.path.join(root, "*", "bin", "nvdisasm")), reverse=True):
                return p
    except ImportError:
        pass
    return shutil.which("nvdisasm") or next(iter(glob.glob("/usr/local/cuda/bin/nvdisasm")), None)


def sass(artifact: Artifact) -> str:
    """The SASS of the artifact's cubin, disassembled by nvdisasm."""
    tool = nvdisasm_path()
    if tool is None:
        raise BackendError("nvdisasm was not found: pip install -r requirements.txt brings the nvidia-cuda-nvdisasm wheel.")
    digest = hashlib.sha1(artifact.cubin).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"gemmlab-{digest}.cubin"
    path.write_bytes(artifact.cubin)
    out = subprocess.run([tool, "-c", "-fun", artifact.lowered_name, str(path)], capture_output=True, text=True)
    if out.returncode != 0:  # older nvdisasm: no -fun; print all code
        out = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise BackendError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def opcodes(sass_text: str) -> list[str]:
    """The opcodes of a SASS listing in program order, predicates dropped ('LDS.128', 'FFMA', ...)."""
    return [m.group(1) for m in map(_OPCODE.search, sass_text.splitlines()) if m]


def count_instructions(sass_text: str, opcodes_wanted: list[str]) -> dict[str, int]:
    """How many SASS instructions start with each opcode (e.g. 'LDS.128', 'FFMA', 'HMMA')."""
    counts = dict.fromkeys(opcodes_wanted, 0)
    for op in opcodes(sass_text):
        for want in opcodes_wanted:
            if op == want or op.startswith(want + "."):
                counts[want] += 1
    return counts


_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\b.*`\((\.L_x_\d+)\)")


def split_at_loop(sass_text: str) -> dict[str, list[str]]:
    """The opcodes of a kernel around its first loop: 'before' it (the set-up each thread runs once), the 'loop'
    (from the label a later branch jumps back to, through that branch: one iteration's instructions) and 'after'.
    A kernel without a backward branch is all 'before'."""
    lines = sass_text.splitlines()
    seen: dict[str, int] = {}
    for i, line in enumerate(lines):
        label = _LABEL.match(line)
        if label:
            seen[label.group(1)] = i
        branch = _BRANCH.search(line)
        if branch and branch.group(1) in seen:
            start = seen[branch.group(1)]
            return {"before": opcodes("\n".join(lines[:start])), "loop": opcodes("\n".join(lines[start:i + 1])),
                    "after": opcodes("\n".join(lines[i + 1:]))}
    return {"before": opcodes(sass_text), "loop": [], "after": []}


def memory_order(sass_text: str, wanted: tuple[str, ...] = ("LDG", "STS", "BAR", "LDS", "LDGSTS")) -> str:
    """The kernel's global loads, shared stores and loads and barriers in program order, runs merged:
    'LDGx6 STSx5 BARx1 LDSx32 BARx1' shows where each phase of a K step sits relative to the others."""
    runs: list[list] = []
    for op in (op.split(".")[0] for op in opcodes(sass_text)):
        if op in wanted:
            if runs and runs[-1][0] == op:
                runs[-1][1] += 1
            else:
                runs.append([op, 1])
    return " ".join(f"{op}x{n}" for op, n in runs)
