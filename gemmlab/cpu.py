"""CPU backend: compile a CUDA kernel with g++ against the emulator shim and run it in a child process.

The child process makes a crash, an out-of-bounds access or a hang a Python exception instead of a
dead notebook. See gemmlab/emulator/cuda_shim.h for how CUDA threads become fibers.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gemmlab.errors import BackendError, CompileError, ConfigError, InputError, KernelError

EMULATOR_DIR = Path(__file__).resolve().parent / "emulator"
SHIM = EMULATOR_DIR / "cuda_shim.h"
RUNTIME = EMULATOR_DIR / "runtime.cpp"
CXX = "g++"
BASE_FLAGS = ["-std=c++17", "-O2", "-DGEMMLAB_EMULATOR", "-fno-strict-aliasing", "-Wno-unknown-pragmas",
              "-g1", "-fno-pie", "-fstack-clash-protection"]
# -g1: line tables, so a fault names its source line; stack-clash protection probes every page of a
# large frame, so a thread that outgrows its stack hits the guard page instead of its neighbour's.
LINK_FLAGS = ["-no-pie", "-pthread"]
DEFAULT_TIMEOUT_S = 300.0

# Exit codes of the child (runtime.cpp).
_EXIT_BAD_LAUNCH, _EXIT_DEADLOCK, _EXIT_MEMORY, _EXIT_STACK, _EXIT_ARITH = 81, 82, 83, 84, 85


@dataclass(frozen=True)
class CpuModule:
    """A kernel compiled for the emulator: one executable that runs one launch per process."""
    label: str
    name_expression: str
    executable: Path


def available() -> bool:
    """True when a C++ compiler for the emulator is on PATH."""
    return shutil.which(CXX) is not None


def _cache_dir() -> Path:
    root = os.environ.get("GEMMLAB_CACHE")
    path = Path(root) / "cpu" if root else Path.home() / ".cache" / "gemmlab" / "cpu"
    path.mkdir(parents=True, exist_ok=True)
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
    return BASE_FLAGS + _cpu_flags()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:24]


def _run_compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "LC_ALL": "C"}  # plain ASCII quotes in the diagnostics
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def _emulator_sources() -> bytes:
    """Every header and source of the emulator: part of every cache key."""
    return b"".join(p.name.encode() + p.read_bytes() for p in sorted(EMULATOR_DIR.iterdir())
                    if p.suffix in (".h", ".cpp"))


def _runtime_object() -> Path:
    """The scheduler and launch driver, compiled once per shim version."""
    flags = _flags()
    key = _digest(_emulator_sources(), " ".join(flags))
    obj = _cache_dir() / f"runtime-{key}.o"
    if not obj.exists():
        tmp = obj.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
        r = _run_compiler([CXX, *flags, "-I", str(EMULATOR_DIR), "-c", str(RUNTIME), "-o", str(tmp)])
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


def compile_kernel(source: str, name_expression: str, *, label: str) -> CpuModule:
    """Compile `source` (common.cuh already inlined) for the emulator; cached by content on disk."""
    if not available():
        raise BackendError(f"the CPU emulator needs {CXX}; install it (apt-get install g++) or use a GPU")
    kernel = rewrite_extern_shared(source)
    text = kernel + f"\nint main(int argc, char** argv) {{ return emu::run_main(argc, argv, &{name_expression}); }}\n"
    runtime = _runtime_object()
    flags = _flags()
    key = _digest(_emulator_sources(), text, name_expression, " ".join(flags))
    cache = _cache_dir()
    exe = cache / f"{key}.bin"
    if not exe.exists():
        src = cache / f"{key}.cu"
        src.write_text(text)
        tmp = cache / f"{key}.{uuid.uuid4().hex[:8]}.tmp"
        r = _run_compiler([CXX, *flags, "-I", str(EMULATOR_DIR), "-include", str(SHIM), "-x", "c++", str(src),
                           "-x", "none", str(runtime), *LINK_FLAGS, "-o", str(tmp)])
        if r.returncode != 0:
            log = r.stderr.replace(str(src), label)
            lines = log.splitlines()
            if len(lines) > 60:
                lines = lines[:60] + [f"... ({len(lines) - 60} more lines)"]
            main_line = kernel.count("\n") + 2
            if f"{label}:{main_line}:" in log:
                lines.append(f"(line {main_line} is the emulator's entry point: is `{name_expression}` the kernel's "
                             f"name with all its template arguments?)")
            raise CompileError(f"{label}: g++ could not compile the kernel for the CPU emulator:\n" + "\n".join(lines))
        os.replace(tmp, exe)
    return CpuModule(label=label, name_expression=name_expression, executable=exe)


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


def _scratch_dir() -> str | None:
    shm = "/dev/shm"  # tmpfs: the arrays never touch a disk
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def launch(module: CpuModule, grid, block, args: list, shared_mem: int = 0, timeout: float | None = None) -> None:
    """Run one launch of `module` in a child process; arrays in `args` are updated in place."""
    g, b = _check_geometry(grid, block, shared_mem)
    arrays: list[tuple[int, np.ndarray, int]] = []
    lines, offset = [], 0
    for i, a in enumerate(args):
        line, offset = _arg_line(i, a, arrays, offset)
        lines.append(line)
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    with tempfile.TemporaryDirectory(prefix="gemmlab-", dir=_scratch_dir()) as tmp:
        data = Path(tmp) / "arrays.bin"
        with open(data, "wb") as f:
            for _, a, off in arrays:
                f.seek(off)
                f.write(memoryview(a).cast("B") if a.nbytes else b"")
        desc = Path(tmp) / "launch.txt"
        desc.write_text(f"grid {g[0]} {g[1]} {g[2]}\nblock {b[0]} {b[1]} {b[2]}\nsmem {int(shared_mem)}\n"
                        f"nargs {len(args)}\n" + "\n".join(lines) + "\n")
        try:
            r = subprocess.run([str(module.executable), str(desc), str(data)], capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            _forward(e.stdout)
            raise KernelError(f"{module.label}: did not finish in {timeout:g} s: an infinite loop or a barrier "
                              f"some threads never reach?") from None
        _forward(r.stdout)
        if r.returncode != 0:
            raise _launch_error(module, r.returncode, r.stderr.decode(errors="replace"), args)
        with open(data, "rb") as f:
            for _, a, off in arrays:
                if a.nbytes and a.flags.writeable:
                    f.seek(off)
                    f.readinto(memoryview(a).cast("B"))


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
