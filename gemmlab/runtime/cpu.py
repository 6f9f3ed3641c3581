"""CPU backend: compile a CUDA kernel with g++ against the emulator shim and run it in a child process.

The child process makes a crash, an out-of-bounds access or a hang a Python exception instead of a
dead notebook. See gemmlab/runtime/emulator/cuda_shim.h for how CUDA threads become fibers.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gemmlab.errors import BackendError, CompileError, ConfigError, InputError, KernelError
from . import settings
from .arch import arch_limits
import ctypes

EMULATOR_DIR = Path(__file__).resolve().parent / "emulator"
SHIM = EMULATOR_DIR / "cuda_shim.h"
RUNTIME = EMULATOR_DIR / "runtime.cpp"
ANALYSIS = EMULATOR_DIR / "analysis.cpp"
CXX = "g++"
BASE_FLAGS = ["-std=c++17", "-O2", "-DGEMMLAB_EMULATOR", "-fno-strict-aliasing", "-Wno-unknown-pragmas",
              "-g1", "-fno-pie", "-fstack-clash-protection"]
# -g1: line tables, so a fault names its source line; stack-clash protection probes every page of a
# large frame, so a thread that outgrows its stack hits the guard page instead of its neighbour's.
LINK_FLAGS = ["-no-pie", "-pthread"]
# The kernel (not the analysis build) checks every index into an array of known size (a static __shared__ array,
# a local one) and traps when it is outside, as a GPU's memory checker would: a write just past sA[BLOCK][BLOCK]
# would otherwise land in its neighbour. The trap needs no sanitizer runtime (runtime.cpp reports SIGILL).
BOUNDS_FLAGS = ["-fsanitize=bounds", "-fsanitize-undefined-trap-on-error"]
DEFAULT_TIMEOUT_S = 300.0  # a launch whose work is not known (a raw cpu.launch)
TIMEOUT_BASE_S = 30.0  # a step's launch: this plus its multiply-adds at TIMEOUT_RATE (timeout_for)
TIMEOUT_RATE = 5e6  # multiply-adds per second: a tenth of the slowest step's rate on a 2-core machine
MAX_WORKERS = 256  # runtime.cpp's kMaxWorkers

# Exit codes of the child (runtime.cpp).
_EXIT_BAD_LAUNCH, _EXIT_DEADLOCK, _EXIT_MEMORY, _EXIT_STACK, _EXIT_ARITH = 81, 82, 83, 84, 85


@dataclass(frozen=True)
class CpuModule:
    """A kernel compiled for the emulator: one executable that runs one launch per process."""
    label: str
    name_expression: str
    executable: Path
    source: str = field(default="", repr=False, compare=False)  # the compiled text (analysis mode rebuilds it)
    cluster: tuple[int, int, int] = (1, 1, 1)  # the kernel's __cluster_dims__: blocks the emulator runs together
    analysis: bool = False  # built by _analysis_executable (how to rebuild it if its cache entry is damaged)


def available() -> bool:
    """True when a C++ compiler for the emulator is on PATH."""
    return shutil.which(CXX) is not None


def _cache_dir() -> Path:
    root = settings.cache_root()
    path = root / "cpu" if root else Path.home() / ".cache" / "gemmlab" / "cpu"
    try:
        path.mkdir(parents=True, exist_ok=True)
        why = "" if os.access(path, os.W_OK | os.X_OK) else "not writable"
    except OSError as e:
        why = e.strerror or type(e).__name__
    if why:
        where = (f"GEMMLAB_CACHE={settings.given(settings.CACHE)!r}" if root
                 else f"the compile cache {Path.home() / '.cache' / 'gemmlab'}")
        raise ConfigError(f"{where} cannot hold the CPU backend's compiled kernels ({why}); set GEMMLAB_CACHE to a "
                          f"folder you can write to.")
    return path


@functools.lru_cache(maxsize=None)
def _cpu_flags() -> list[str]:
    """Hardware FMA and fp16 conversions when this CPU has them; contract a*b+c as nvcc does."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    words = set(re.findall(r"\w+", info))
    return ["-mfma", "-mf16c", "-ffp-contract=fast"] if {"fma", "f16c"} <= words else []


def _flags() -> list[str]:
    """Compiler flags; GEMMLAB_CPU_FLAGS adds more (the tests force the software half with it)."""
    return BASE_FLAGS + _cpu_flags() + settings.cpu_flags()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:24]


def _run_compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "LC_ALL": "C"}  # plain ASCII quotes in the diagnostics
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def _write_cache_text(path: Path, text: str) -> None:
    """Write a source into the compile cache; a full or broken disk is a ConfigError saying what to do."""
    try:
        path.write_text(text)
    except OSError as e:
        raise ConfigError(f"cannot write to the compile cache {path.parent} ({e.strerror or type(e).__name__}): "
                          "free some space there, or set GEMMLAB_CACHE to a folder with room") from None


def _check_cache_room(r: subprocess.CompletedProcess) -> None:
    """g++ failing for want of disk space is the cache's fault, not the kernel's: a ConfigError."""
    if r.returncode != 0 and "No space left on device" in r.stderr:
        raise ConfigError(f"the compile cache {_cache_dir()} is full (g++: No space left on device): free some "
                          "space there, or set GEMMLAB_CACHE to a folder with room")


def _emulator_sources() -> bytes:
    """Every header and source of the emulator: part of every cache key."""
    return b"".join(p.name.encode() + p.read_bytes() for p in sorted(EMULATOR_DIR.iterdir())
                    if p.suffix in (".h", ".cpp"))


def complete_elf(path: Path) -> bool:
    """Whether `path` is a whole ELF file (an object or an executable): its header, program headers and section
    headers (which the linker and the assembler write last, at the end) all lie inside the file. An empty file,
    one cut short by a full disk or a killed compile, or one that is no ELF at all, is not."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return False
    order = "little" if head[5] == 1 else "big"
    num = lambda at, n: int.from_bytes(head[at:at + n], order)  # noqa: E731
    if head[4] == 2:  # 64-bit
        if len(head) < 64:
            return False
        phoff, shoff, phentsize, phnum, shentsize, shnum = num(0x20, 8), num(0x28, 8), num(0x36, 2), num(0x38, 2), \
            num(0x3A, 2), num(0x3C, 2)
    else:
        phoff, shoff, phentsize, phnum, shentsize, shnum = num(0x1C, 4), num(0x20, 4), num(0x2A, 2), num(0x2C, 2), \
            num(0x2E, 2), num(0x30, 2)
    return shnum > 0 and shoff + shnum * shentsize <= size and phoff + phnum * phentsize <= size


def _usable(path: Path) -> bool:
    """A cache entry to trust: a whole ELF file; a damaged one is removed, so that the caller builds it again."""
    if complete_elf(path):
        return True
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise ConfigError(f"the CPU backend's cache entry {path} is damaged and cannot be removed ({e.strerror}); "
                          f"delete it, or set GEMMLAB_CACHE to another folder.") from None
    return False


def _runtime_object(source: Path = RUNTIME) -> Path:
    """The scheduler and launch driver (or analysis mode's counters), compiled once per shim version; a damaged
    cache entry (empty, cut short) is compiled again."""
    flags = _flags()
    key = _digest(_emulator_sources(), " ".join(flags))
    obj = _cache_dir() / f"{source.stem}-{key}.o"
    if not _usable(obj):
        tmp = obj.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
        r = _run_compiler([CXX, *flags, "-I", str(EMULATOR_DIR), "-c", str(source), "-o", str(tmp)])
        _check_cache_room(r)
        if r.returncode != 0:
            raise CompileError(f"the CPU emulator's runtime did not compile (a bug in gemmlab):\n{r.stderr}")
        os.replace(tmp, obj)
    return obj


_ATTRIBUTE = r"(?:__align__|alignas|__attribute__)\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?P<decl>[^;\[]*?)\s*(?P<name>\w+)\s*\[\s*\]\s*;")


_STATIC_SHARED = re.compile(r"\bstatic(\s+)__shared__")


def rewrite_extern_shared(source: str) -> str:
    """`extern __shared__ <attrs> T name[];` -> a pointer to the block's dynamic shared memory arena,
    and `static __shared__` -> `__shared__` (the shim's `__shared__` is already `static thread_local`).

    Newlines inside a declaration are kept, so g++'s line numbers still match the kernel text.
    """
    source = _STATIC_SHARED.sub(lambda m: "\n" * m.group(1).count("\n") + "__shared__", source)

    def replace(m: re.Match) -> str:
        elem = " ".join(re.sub(_ATTRIBUTE, " ", m.group("decl")).split())
        if not elem:
            raise CompileError(f"cannot read the element type of `{m.group(0)}`")
        name = m.group("name")
        return (f"{elem}* {name} = reinterpret_cast<{elem}*>(emu::dynamic_smem());"
                + "\n" * m.group(0).count("\n"))
    return _EXTERN_SHARED.sub(replace, source)


_TEMPLATE_HEAD = re.compile(r"\btemplate\s*<(?P<params>[^<>]*)>")


def cluster_dims(source: str, name_expression: str) -> tuple[int, int, int]:
    """The cluster shape that the kernel `name_expression` ("hgemm_clusters<256, 4, 16, 2>") declares with
    `__cluster_dims__(X, Y, Z)`, its template parameters replaced by the expression's arguments; (1, 1, 1)
    without one. The GPU reads the attribute from the compiled kernel; the emulator is told it (GEMMLAB_CPU_CLUSTER)."""
    symbol, _, args = name_expression.partition("<")
    symbol = symbol.strip()
    decl = re.search(r"__cluster_dims__\s*\((?P<dims>[^()]*)\)(?:[^;{}()]|\([^()]*\))*?\b" + re.escape(symbol) + r"\s*\(", source)
    if not decl:
        return (1, 1, 1)
    heads = list(_TEMPLATE_HEAD.finditer(source, 0, decl.start()))
    names = [p.split("=")[0].split()[-1] for p in heads[-1].group("params").split(",") if p.strip()] if heads else []
    values = [v.strip() for v in args.rstrip().removesuffix(">").split(",")] if args else []
    env = dict(zip(names, values))
    dims = []
    for expr in decl.group("dims").split(","):
        text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: env.get(m.group(0), m.group(0)), expr).replace("/", "//")
        if not re.fullmatch(r"[\d\s+\-*/()%]+", text):
            raise CompileError(f"cannot read the cluster shape __cluster_dims__({decl.group('dims')}) of "
                               f"{name_expression}: write it with integers and template parameters")
        dims.append(int(eval(text, {"__builtins__": {}})))  # digits and arithmetic only, checked above
    dims += [1] * (3 - len(dims))
    if min(dims) < 1:
        raise CompileError(f"{name_expression}: __cluster_dims__ gives a cluster of {tuple(dims)} blocks")
    return tuple(dims[:3])


def compile_kernel(source: str, name_expression: str, *, label: str) -> CpuModule:
    """Compile `source` (common.cuh already inlined) for the emulator; cached by content on disk."""
    if not available():
        raise BackendError(f"the CPU emulator needs {CXX}; install it (apt-get install g++) or use a GPU")
    kernel = rewrite_extern_shared(source)
    text = kernel + f"\nint main(int argc, char** argv) {{ return emu::run_main(argc, argv, &{name_expression}); }}\n"
    flags = _flags()
    key = _digest(_emulator_sources(), text, name_expression, " ".join(flags + BOUNDS_FLAGS))
    exe = _cache_dir() / f"{key}.bin"
    if not _usable(exe):
        _build_kernel(text, exe, label, name_expression, main_line=kernel.count("\n") + 2)
    return CpuModule(label=label, name_expression=name_expression, executable=exe, source=text,
                     cluster=cluster_dims(source, name_expression))


def _build_kernel(text: str, exe: Path, label: str, name_expression: str = "", main_line: int = 0) -> None:
    """Compile the emulator's executable `exe` from `text` (the kernel and its main()), written whole or not at all."""
    runtime = _runtime_object()
    flags = _flags()
    src = exe.with_suffix(".cu")
    _write_cache_text(src, text)
    tmp = exe.with_name(f"{exe.stem}.{uuid.uuid4().hex[:8]}.tmp")
    r = _run_compiler([CXX, *flags, *BOUNDS_FLAGS, "-I", str(EMULATOR_DIR), "-include", str(SHIM), "-x", "c++",
                       str(src), "-x", "none", str(runtime), *LINK_FLAGS, "-o", str(tmp)])
    _check_cache_room(r)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        log = r.stderr.replace(str(src), label)
        lines = log.splitlines()
        if len(lines) > 60:
            lines = lines[:60] + [f"... ({len(lines) - 60} more lines)"]
        if main_line and f"{label}:{main_line}:" in log:
            lines.append(f"(line {main_line} is the emulator's entry point: is `{name_expression}` the kernel's "
                         f"name with all its template arguments?)")
        raise CompileError(f"{label}: g++ could not compile the kernel for the CPU emulator:\n" + "\n".join(lines))
    os.replace(tmp, exe)


def cpu_threads() -> int:
    """Blocks the emulator runs at once, one OS thread each: this machine's CPUs (at most MAX_WORKERS),
    or fewer if GEMMLAB_CPU_THREADS says so. Read here only; the child is told the number (launch.txt),
    so a persistent step's grid (fusion.cpu_workers) and the child's workers always agree."""
    n = min(os.cpu_count() or 1, MAX_WORKERS)
    asked = settings.cpu_threads(n)
    return n if asked is None else min(n, asked)


def timeout_for(macs: float | None = None) -> float:
    """Seconds a launch may take on the CPU backend: GEMMLAB_CPU_TIMEOUT if set, else TIMEOUT_BASE_S plus
    `macs` multiply-adds at TIMEOUT_RATE (DEFAULT_TIMEOUT_S when the work is not known), at most
    settings.MAX_TIMEOUT_S."""
    chosen = settings.cpu_timeout()
    if chosen is not None:
        return chosen
    return DEFAULT_TIMEOUT_S if macs is None else min(TIMEOUT_BASE_S + macs / TIMEOUT_RATE, settings.MAX_TIMEOUT_S)


def check_timeout(value, what: str = "timeout") -> float:
    """`value` as a positive number of seconds, at most settings.MAX_TIMEOUT_S; a ConfigError naming `what` otherwise."""
    return settings.timeout(value, what)


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value) if isinstance(value, (tuple, list)) else ()
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise ConfigError(f"{what} must be 1 to 3 integers, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _check_geometry(grid, block, shared_mem) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    g, b = _dims(grid, "grid"), _dims(block, "block")
    threads = b[0] * b[1] * b[2]
    if min(b) <= 0 or not 1 <= threads <= 1024 or b[0] > 1024 or b[1] > 1024 or b[2] > 64:
        raise ConfigError(f"block {b} has {threads} threads: a block needs 1 to 1024 threads "
                          f"(x, y <= 1024, z <= 64); change the block tile or threads per block")
    if min(g) <= 0 or g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
        raise ConfigError(f"grid {g} is invalid: every grid dimension must be >= 1 (y, z <= 65535); "
                          f"is the problem size zero?")
    if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise ConfigError(f"shared_mem must be a non-negative number of bytes, got {shared_mem!r}")
    return g, b


def _arg_line(i: int, a, arrays: list[tuple[int, np.ndarray, int]], offset: int) -> tuple[str, int]:
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise InputError(f"argument {i}: the array must be C-contiguous (use np.ascontiguousarray)")
        arrays.append((i, a, offset))
        return f"a {offset} {a.nbytes}", offset + (a.nbytes + 63) // 64 * 64
    if isinstance(a, (bool, np.bool_)):
        raise InputError(f"argument {i}: pass an int, not a bool")
    if isinstance(a, (int, np.integer)):
        if not -2**31 <= int(a) < 2**32:
            raise InputError(f"argument {i}: {a} does not fit in 32 bits")
        return f"i {int(a)}", offset
    if isinstance(a, (float, np.floating)):
        value = float(a) if isinstance(a, np.floating) else float(np.float32(a))
        return f"f {value.hex()}", offset
    raise InputError(f"argument {i}: {type(a).__name__} is not supported; pass NumPy arrays, ints or floats")


def available_memory() -> int | None:
    """Bytes of memory this process can still get: the machine's MemAvailable (/proc/meminfo), or less under an
    address-space limit (ulimit -v) not yet used; None where neither can be read."""
    have = []
    try:
        with open("/proc/meminfo") as f:
            have += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource  # optional: POSIX only

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            with open("/proc/self/status") as f:
                used = [int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")]
            have.append(max(0, limit - (used[0] if used else 0)))
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return min(have) if have else None


def check_memory(what: str, need: int, instead: str) -> None:
    """An InputError before `what` allocates `need` bytes when the machine has less available (numpy's
    MemoryError, or the kernel's out-of-memory killer, otherwise): says how much and what to do `instead`."""
    have = available_memory()
    if have is not None and need > have:
        raise InputError(f"{what} needs about {need / 2**30:.1f} GiB of memory, more than the {have / 2**30:.1f} GiB "
                         f"available here; {instead}.")


def _scratch_dir() -> str | None:
    shm = "/dev/shm"  # tmpfs: the arrays never touch a disk
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class _ChildFiles:
    """The files an emulator child reads and writes (its launch description, the arrays, analysis mode's counts).

    Anonymous memory files (memfd) where Linux has them: the child opens /proc/self/fd/N, and the memory goes with the
    last process that holds it, so a parent killed mid-launch (a notebook's kernel restarted) leaves nothing behind
    in /dev/shm. Elsewhere, a temporary folder (in /dev/shm when it is writable) removed on the way out."""

    def __enter__(self) -> "_ChildFiles":
        self.fds: list[int] = []
        self._files: list = []
        self._tmp = None
        return self

    def new(self, name: str):
        """(path for the child, read-write binary file for us) of a new empty file."""
        if self._tmp is None and hasattr(os, "memfd_create"):
            try:
                fd = os.memfd_create(f"gemmlab-{name}")  # close-on-exec: only pass_fds reach the child
            except OSError:
                pass
            else:
                self.fds.append(fd)
                f = os.fdopen(fd, "r+b")
                self._files.append(f)
                return f"/proc/self/fd/{fd}", f
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gemmlab-", dir=_scratch_dir())
        path = Path(self._tmp.name) / name
        f = open(path, "w+b")
        self._files.append(f)
        return str(path), f

    def __exit__(self, *exc) -> None:
        for f in self._files:
            f.close()
        if self._tmp is not None:
            self._tmp.cleanup()


@functools.lru_cache(maxsize=1)
def _prctl():
    """libc's prctl (Linux), looked up before any fork; None elsewhere."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int, prctl):
    """The child's first act, between fork and exec: ask the kernel for SIGKILL when the thread that started it
    ends (Python killed, a notebook's kernel restarted), so no emulator spins on alone; and if the parent is
    already gone, end at once."""
    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return arm


def launch(module: CpuModule, grid, block, args: list, shared_mem: int = 0, timeout: float | None = None,
           inputs=()) -> None:
    """Run one launch of `module` in a child process; arrays in `args` are updated in place, except those at the
    argument indices in `inputs` (the kernel's `const` operands: a GPU kernel that writes through one never
    changes the caller's array, so the emulator does not either). It is stopped after `timeout` seconds (None:
    timeout_for(), GEMMLAB_CPU_TIMEOUT or DEFAULT_TIMEOUT_S)."""
    _run_child(module, grid, block, args, shared_mem, timeout, inputs=inputs)


_SHIM_TLS = re.compile(r"_ZN3emu|_ZZN3emu|_ZGV|_ZTH|_ZTW|(gridDim|blockDim|threadIdx|blockIdx)$")


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=None)  # a cached executable's name is its content's digest: read it once
def static_shared_bytes(executable: Path) -> dict[str, int]:
    """The kernel's static __shared__ variables (thread-local in the emulator): mangled name -> bytes, read from
    the executable's symbol table (the shim's own thread-locals left out); {} when readelf is missing."""
    if not shutil.which("readelf"):
        return {}
    r = subprocess.run(["readelf", "-sW", str(executable)], capture_output=True, text=True)
    out = {}
    for ln in r.stdout.splitlines():
        f = ln.split()
        if len(f) == 8 and f[3] == "TLS" and f[6] != "UND" and not _SHIM_TLS.match(f[7]):
            out[f[7]] = int(f[2], 0) if f[2].isdigit() else int(f[2], 16)
    return out


def check_shared_memory(module: CpuModule, shared_mem: int) -> None:
    """A ConfigError when the kernel's shared memory breaks a GPU's limits (the emulator models an sm_90 block:
    48 KB static, 227 KB static + dynamic), which the CPU would otherwise run without complaint."""
    lim = arch_limits("sm_90")
    static = sum(static_shared_bytes(module.executable).values())
    if static > lim.shared_static:
        raise ConfigError(f"{module.label}: its __shared__ arrays take {static} B, over the {lim.shared_static} B of "
                          "static shared memory a block may declare on any GPU: the launch would fail there. Shrink "
                          "the tiles, or use extern __shared__ (dynamic shared memory) for more than 48 KB")
    if static + shared_mem > lim.shared_optin:
        raise ConfigError(f"{module.label}: {static} B static + {shared_mem} B dynamic shared memory, over the "
                          f"{lim.shared_optin} B a block may have on {lim.name}: the launch would fail on a GPU; "
                          "shrink the tiles or the stages")


def _run_child(module: CpuModule, grid, block, args: list, shared_mem: int, timeout: float | None,
               env: dict | None = None, copy_back: bool = True, inputs=(), analysis_blocks: int | None = None
               ) -> str | None:
    """One launch in a child process; with `analysis_blocks` (analysis mode: 0 for all blocks), the counts file's
    text is returned."""
    g, b = _check_geometry(grid, block, shared_mem)
    env = dict(env or {})
    if module.cluster != (1, 1, 1):
        env["GEMMLAB_CPU_CLUSTER"] = ",".join(map(str, module.cluster))
    arrays: list[tuple[int, np.ndarray, int]] = []
    lines, offset = [], 0
    for i, a in enumerate(args):
        line, offset = _arg_line(i, a, arrays, offset)
        lines.append(line)
    timeout = timeout_for() if timeout is None else check_timeout(timeout)
    workers = cpu_threads()
    env = settings.child_environment(env)
    check_memory(f"{module.label} on the CPU emulator", 2 * offset,  # the arrays' file and the child's own copies
                 "the emulator runs a kernel at a few GFLOP/s at best: try it on smaller matrices")
    _ready(module)
    check_shared_memory(module, int(shared_mem))  # read from the executable, so once it is whole
    with _ChildFiles() as files:
        data, f = files.new("arrays.bin")
        for _, a, off in arrays:
            f.seek(off)
            f.write(memoryview(a).cast("B") if a.nbytes else b"")
        f.flush()
        desc, d = files.new("launch.txt")
        d.write((f"grid {g[0]} {g[1]} {g[2]}\nblock {b[0]} {b[1]} {b[2]}\nsmem {int(shared_mem)}\n"
                 f"workers {workers}\nnargs {len(args)}\n" + "\n".join(lines) + "\n").encode())
        d.flush()
        if analysis_blocks is not None:
            counts, out = files.new("counts.txt")
            env.update(GEMMLAB_ANALYSIS=counts, GEMMLAB_ANALYSIS_BLOCKS=str(int(analysis_blocks)))
        try:
            r = subprocess.run([str(module.executable), desc, data], capture_output=True, timeout=timeout, env=env,
                               pass_fds=files.fds, preexec_fn=_die_with(os.getpid(), _prctl()))
        except subprocess.TimeoutExpired as e:
            _forward(e.stdout)
            raise KernelError(f"{module.label}: did not finish in {timeout:g} s, the CPU backend's time-out (an infinite "
                              f"loop, or a barrier some threads never reach?); if it only needs longer, pass "
                              f"timeout=SECONDS or set GEMMLAB_CPU_TIMEOUT.") from None
        except OSError as e:  # the executable went bad between the check and the start
            raise KernelError(f"{module.label}: the emulator could not start {module.executable} ({e.strerror}); "
                              f"run the call again (a damaged cache entry is rebuilt).") from None
        _forward(r.stdout)
        if r.returncode != 0:
            raise _launch_error(module, r.returncode, r.stderr.decode(errors="replace"), args)
        if analysis_blocks is not None:
            out.seek(0)
            return out.read().decode(errors="replace")
        if not copy_back:
            return None
        protected = {int(i) for i in inputs}
        for i, a, off in arrays:
            if a.nbytes and a.flags.writeable and i not in protected:
                f.seek(off)
                f.readinto(memoryview(a).cast("B"))
    return None


def _forward(out: bytes | None) -> None:
    """The kernel's printf output goes to Python's stdout, so a notebook shows it."""
    if out:
        sys.stdout.write(out.decode(errors="replace"))
        sys.stdout.flush()


def _source_line(module: CpuModule, pc: str) -> str | None:
    """Map a code address to the kernel's source line through the executable's line table."""
    if not shutil.which("addr2line"):
        return None
    r = subprocess.run(["addr2line", "-i", "-e", str(module.executable), pc], capture_output=True, text=True)
    src = module.executable.with_suffix(".cu").name
    for loc in r.stdout.splitlines():  # innermost inlined frame first
        file, _, line = loc.rpartition(":")
        if file.endswith(src):
            return line.split()[0]
    return None


def _launch_error(module: CpuModule, rc: int, stderr: str, args: list) -> Exception:
    label = module.label
    ours = [ln[len("gemmlab-emulator: "):] for ln in stderr.splitlines() if ln.startswith("gemmlab-emulator: ")]
    other = "\n".join(ln for ln in stderr.splitlines() if not ln.startswith("gemmlab-emulator: ")).strip()
    msg = ours[0] if ours else other

    def describe_array(m: re.Match) -> str:
        offset, i = int(m.group(1)), int(m.group(2))
        a = args[i]
        return (f"at element {offset // a.itemsize} of argument {i} ({a.dtype} array of shape {a.shape}, "
                f"valid elements 0..{a.size - 1})")
    msg = re.sub(r"at byte offset (-?\d+) of argument (\d+) \(an array of \d+ bytes\)", describe_array, msg)
    pc = re.search(r" \[pc=(0x[0-9a-f]+)\]", msg)
    if pc:
        line = _source_line(module, pc.group(1))
        msg = msg.replace(pc.group(0), f" at line {line}" if line else "")

    if rc == _EXIT_BAD_LAUNCH:
        return InputError(f"{label}: {msg}")
    if rc == _EXIT_DEADLOCK:
        return KernelError(f"{label}: {msg}")
    if rc == _EXIT_MEMORY:
        return KernelError(f"{label}: {msg}. Check the bounds guards (row < M, col < N) at the tile edges.")
    if rc in (_EXIT_STACK, _EXIT_ARITH):
        return KernelError(f"{label}: {msg}")
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        hint = {signal.SIGABRT: " (a failed assert?)", signal.SIGSEGV: " (an out-of-bounds access?)",
                signal.SIGBUS: " (an out-of-bounds access?)"}.get(-rc, "")
        return KernelError(f"{label}: the kernel crashed with {name}{hint}" + (f":\n{other}" if other else ""))
    return KernelError(f"{label}: the emulator exited with code {rc}" + (f":\n{stderr.strip()}" if stderr.strip() else ""))


# ------------------------------------------------------------------------------------------------
# Analysis mode: global-memory sectors and shared-memory wavefronts per warp-wide request
# ------------------------------------------------------------------------------------------------
# How it counts: gemmlab/runtime/emulator/analysis.cpp (the kernel is compiled with -fsanitize=thread, the
# TSan runtime is replaced by our own callbacks, accesses are grouped per warp and call site).
ANALYSIS_FLAGS = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0",
                  # one source access = one access, as nvcc emits it: no vectorised or merged copies
                  "-fno-tree-vectorize", "-fno-store-merging",
                  # a float4 / uint4 copy stays one 16-byte access instead of four 4-byte ones
                  "-fno-tree-sra",
                  # DWARF 5 line tables of GCC 12 confuse addr2line 2.40 about #line file names
                  "-gdwarf-4"]
_OPS = [("global", "load"), ("global", "store"), ("shared", "load"), ("shared", "store"),
        ("shared", "ldmatrix"), ("global", "cp.async"), ("shared", "cp.async")]
_SKIP_FILES = {SHIM.name, "common.cuh"}


@dataclass(frozen=True)
class SiteCount:
    """One memory instruction of the kernel (merged over the copies the compiler made of it).

    A request is one warp-wide execution of the instruction (the n-th execution by each active lane).
    `sectors`: distinct 32-byte sectors summed over requests (global); `wavefronts`: bank-conflict
    passes summed over requests (shared); `bytes`: what the lanes asked for; `lanes`: lane accesses.
    `min` / `max`: the fewest and most sectors (or wavefronts) of one request.
    """
    file: str
    line: int
    space: str  # 'global' | 'shared'
    kind: str  # 'load' | 'store' | 'ldmatrix' | 'cp.async'
    array: str  # 'A', 'arg3', a __shared__ variable's name, or 'dynamic'
    requests: int
    sectors: int
    wavefronts: int
    bytes: int
    lanes: int
    min: int
    max: int

    @property
    def units(self) -> int:
        """Sectors (global) or wavefronts (shared)."""
        return self.sectors if self.space == "global" else self.wavefronts

    @property
    def per_request(self) -> float:
        return self.units / self.requests if self.requests else 0.0

    @property
    def unit_name(self) -> str:
        return "sectors" if self.space == "global" else "wavefronts"


@dataclass
class Counters:
    """What analysis mode counted over the first `blocks` of `grid_blocks` blocks of one launch.

    Nsight Compute names for the same things (over the analysed blocks only):
      shared load requests / wavefronts   smsp__sass_inst_executed_op_shared_ld.sum /
                                          l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
      shared store requests / wavefronts  ..._op_shared_st.sum / ..._mem_shared_op_st.sum
      global load requests / sectors      l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum /
                                          l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
      (ldmatrix and cp.async are listed apart: kinds 'ldmatrix' and 'cp.async').
    """
    label: str
    sites: list[SiteCount]
    blocks: int
    grid_blocks: int
    barriers: int  # __syncthreads() completed, summed over the analysed blocks
    warp_barriers: int  # the same, counted once per warp (barrier instructions executed)

    def select(self, space: str | None = None, kind: str | None = None, array: str | None = None,
               line: int | None = None) -> list[SiteCount]:
        return [s for s in self.sites if (space is None or s.space == space) and (kind is None or s.kind == kind)
                and (array is None or s.array == array) and (line is None or s.line == line)]

    def _per_request(self, space: str, kind: str | None, array: str | None, line: int | None) -> float:
        sites = self.select(space, kind, array, line)
        requests = sum(s.requests for s in sites)
        if not requests:
            raise KeyError(f"{self.label}: no {space} {kind or 'access'} requests"
                           + (f" to {array}" if array else "") + (f" on line {line}" if line else ""))
        return sum(s.units for s in sites) / requests

    def global_sectors_per_request(self, kind: str | None = "load", array: str | None = None,
                                   line: int | None = None) -> float:
        """Average 32-byte sectors per warp-wide global request (4 = coalesced floats, 32 = scattered)."""
        return self._per_request("global", kind, array, line)

    def shared_wavefronts_per_request(self, kind: str | None = "load", array: str | None = None,
                                      line: int | None = None) -> float:
        """Average wavefronts per warp-wide shared request (1 = conflict-free 4-byte accesses)."""
        return self._per_request("shared", kind, array, line)

    @property
    def totals(self) -> dict:
        """Sums: '<space>_<kind>_requests' / '_sectors' or '_wavefronts' / '_bytes', '<space>_requests',
        ..., 'barriers', 'warp_barriers', 'blocks', 'grid_blocks'."""
        t: dict = {}
        for s in self.sites:
            for prefix in (f"{s.space}_{s.kind}", s.space):
                for name, value in (("requests", s.requests), (s.unit_name, s.units), ("bytes", s.bytes)):
                    t[f"{prefix}_{name}"] = t.get(f"{prefix}_{name}", 0) + value
        t.update(barriers=self.barriers, warp_barriers=self.warp_barriers, blocks=self.blocks,
                 grid_blocks=self.grid_blocks)
        return t

    def __str__(self) -> str:
        head = f"{self.label}: counted over {self.blocks} of {self.grid_blocks} blocks"
        rows = [("site", "array", "access", "requests", "per request", "min-max", "bytes")]
        for s in self.sites:
            rows.append((f"{s.file}:{s.line}", s.array, f"{s.space} {s.kind}", f"{s.requests}",
                         f"{s.per_request:.2f} {s.unit_name}", f"{s.min}-{s.max}", f"{s.bytes}"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        right = {3, 4, 5, 6}
        lines = [head] + ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                                           for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
        t = self.totals
        for space, unit in (("global", "sectors"), ("shared", "wavefronts")):
            if t.get(f"{space}_requests"):
                parts = []
                for kind in ("load", "store", "ldmatrix", "cp.async"):
                    req = t.get(f"{space}_{kind}_requests")
                    if req:
                        u = t[f"{space}_{kind}_{unit}"]
                        parts.append(f"{kind} {req} requests, {u} {unit} ({u / req:.2f}/request), "
                                     f"{t[f'{space}_{kind}_bytes']} B")
                lines.append(f"  {space}: " + "; ".join(parts))
        lines.append(f"  barriers: {self.barriers} __syncthreads() ({self.warp_barriers} warp-level)")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython shows the table
        p.text(str(self))


def _analysis_executable(module: CpuModule) -> CpuModule:
    """`module` rebuilt with every kernel load and store instrumented (cached next to it)."""
    text = module.source
    if not text:
        src = module.executable.with_suffix(".cu")
        if not src.exists():
            raise CompileError(f"{module.label}: the kernel's source is gone from the cache; compile it again")
        text = src.read_text()
    flags = _flags() + ANALYSIS_FLAGS
    key = _digest(_emulator_sources(), text, " ".join(flags), "analysis")
    exe = _cache_dir() / f"{key}.analysis.bin"
    if not _usable(exe):
        _build_analysis(text, exe, module.label)
    return replace(module, executable=exe, source=text, analysis=True)


def _build_analysis(text: str, exe: Path, label: str) -> None:
    """Compile analysis mode's executable `exe` from `text` (the kernel and its main()), written whole or not at all."""
    flags = _flags() + ANALYSIS_FLAGS
    runtime, counters = _runtime_object(RUNTIME), _runtime_object(ANALYSIS)
    src = exe.with_suffix(".cu")
    _write_cache_text(src, text)
    tag = uuid.uuid4().hex[:8]
    obj, tmp = exe.with_name(f"{exe.stem}.{tag}.o"), exe.with_name(f"{exe.stem}.{tag}.tmp")
    try:
        # Two steps: -fsanitize=thread on the link line would pull in the real TSan runtime.
        r = _run_compiler([CXX, *flags, "-I", str(EMULATOR_DIR), "-include", str(SHIM), "-x", "c++", str(src),
                           "-c", "-o", str(obj)])
        if r.returncode == 0:
            r = _run_compiler([CXX, str(obj), str(runtime), str(counters), *LINK_FLAGS, "-o", str(tmp)])
        _check_cache_room(r)
        if r.returncode != 0:
            raise CompileError(f"{label}: the analysis build failed:\n" + r.stderr.replace(str(src), label))
        os.replace(tmp, exe)
    finally:
        obj.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def _ready(module: CpuModule) -> None:
    """Before a launch: `module`'s executable is whole, or it is built again from the text it was compiled from (a
    cache entry damaged or removed since, by a full disk, a killed compile or a cleanup)."""
    if _usable(module.executable):
        return
    if not module.source:
        raise KernelError(f"{module.label}: its compiled kernel {module.executable} is damaged or gone from the cache; "
                          f"compile the step again (gemmlab.step).")
    if module.analysis:
        _build_analysis(module.source, module.executable, module.label)
    else:
        _build_kernel(module.source, module.executable, module.label)


def _frames(executable: Path, pcs: list[int]) -> dict[int, list[tuple[str, int]]]:
    """Inline frames (file, line), innermost first, of each return address in `pcs`."""
    out: dict[int, list[tuple[str, int]]] = {pc: [] for pc in pcs}
    if not pcs or not shutil.which("addr2line"):
        return out
    # A return address points after the call: look up the call instruction itself.
    r = subprocess.run(["addr2line", "-a", "-i", "-e", str(executable), *[hex(pc - 1) for pc in pcs]],
                       capture_output=True, text=True)
    current = None
    for ln in r.stdout.splitlines():
        if ln.startswith("0x"):
            current = int(ln, 16) + 1
            continue
        file, _, line = ln.split(" (")[0].rpartition(":")
        if current in out and line.strip().isdigit():
            out[current].append((file, int(line)))
    return out


def _site_frame(frames: list[tuple[str, int]]) -> tuple[str, int]:
    """The kernel's own line: the innermost frame outside the shim, common.cuh and system headers."""
    for file, line in frames:
        name = os.path.basename(file)
        if name not in _SKIP_FILES and not file.startswith("/usr/") and str(EMULATOR_DIR) not in file:
            return file, line
    return frames[-1] if frames else ("?", 0)


def _tls_symbols(executable: Path) -> list[tuple[int, int, str]]:
    """(offset, size, short name) of the executable's thread-local variables: the static __shared__ ones."""
    if not shutil.which("readelf"):
        return []
    r = subprocess.run(["readelf", "-sW", "--demangle", str(executable)], capture_output=True, text=True)
    syms = []
    for ln in r.stdout.splitlines():
        f = ln.split(None, 7)
        if len(f) == 8 and f[3] == "TLS" and f[6] != "UND":
            name = re.sub(r"\(.*\)", "()", f[7]).rsplit("::", 1)[-1]
            syms.append((int(f[1], 16), int(f[2], 0) if f[2].isdigit() else int(f[2], 16), name))
    return syms


def analyze(module: CpuModule, grid, block, args: list, shared_mem: int = 0, max_blocks: int | None = None,
            names: list[str] | None = None, timeout: float | None = None) -> Counters:
    """Run the launch in analysis mode and count memory requests per warp (see Counters).

    Only the first `max_blocks` blocks run (None: all); the arrays in `args` are left unchanged.
    `names` names the arguments (e.g. ["M", "N", "K", "A", "B", "C"]) in the table.
    """
    exe = _analysis_executable(module)
    if max_blocks is not None and (not isinstance(max_blocks, (int, np.integer)) or max_blocks < 1):
        raise ConfigError(f"max_blocks must be a positive number of blocks or None, got {max_blocks!r}")
    text = _run_child(exe, grid, block, args, shared_mem, timeout, copy_back=False,
                      analysis_blocks=int(max_blocks or 0))
    return _parse_counts(exe, text, names)


def _parse_counts(exe: CpuModule, text: str, names: list[str] | None) -> Counters:
    blocks = grid_blocks = barriers = warp_barriers = 0
    raw = []
    for ln in text.splitlines():
        f = ln.split()
        if not f:
            continue
        if f[0] == "blocks":
            blocks, grid_blocks = int(f[1]), int(f[2])
        elif f[0] == "barriers":
            barriers, warp_barriers = int(f[1]), int(f[2])
        elif f[0] == "site":
            raw.append((int(f[1], 16), int(f[2]), f[3], int(f[4]), *map(int, f[5:11])))
    frames = _frames(exe.executable, sorted({r[0] for r in raw}))
    tls = _tls_symbols(exe.executable) if any(r[2] == "static" for r in raw) else []
    source_name = exe.executable.with_suffix(".cu").name
    merged: dict[tuple, list[int]] = {}
    for pc, op, region, offset, requests, lanes, nbytes, units, lo, hi in raw:
        file, line = _site_frame(frames.get(pc, []))
        file = exe.label if os.path.basename(file) == source_name else os.path.basename(file)
        if region == "static":
            array = next((n for o, size, n in tls if o <= offset < o + max(size, 1)), "shared")
        elif region == "dynamic":
            array = "dynamic"
        else:
            arg = int(region[3:])
            array = names[arg] if names and arg < len(names) else region
        space, kind = _OPS[op]
        key = (file, line, space, kind, array)
        m = merged.setdefault(key, [0, 0, 0, 0, lo, hi])
        m[0] += requests
        m[1] += lanes
        m[2] += nbytes
        m[3] += units
        m[4] = min(m[4], lo)
        m[5] = max(m[5], hi)
    sites = [SiteCount(file, line, space, kind, array, requests=m[0],
                       sectors=m[3] if space == "global" else 0, wavefronts=m[3] if space == "shared" else 0,
                       bytes=m[2], lanes=m[1], min=m[4], max=m[5])
             for (file, line, space, kind, array), m in merged.items()]
    sites.sort(key=lambda s: (s.file, s.line, s.space, s.kind, s.array))
    return Counters(exe.label, sites, blocks, grid_blocks, barriers, warp_barriers)
