"""A step compiled for a backend: call it on arrays, ask it for its resources, PTX and SASS."""
from __future__ import annotations

import re

import numpy as np

from . import optional
from . import cpu, gpu, nvrtc, registry
from .backends import BACKENDS, backend, set_backend  # noqa: F401 (kernel.backend, gemmlab.set_backend)
from ..errors import ArchError, ConfigError, InputError
from .arch import SM_LIMITS, blocks_per_sm
from .registry import WGMMA_TILE_K, Launch, StepSpec, cdiv
from .source import assemble, kernel_path

def require_arch(name: str, min_arch: int, instead: str = "an earlier step", exact: bool = False) -> None:
    """An ArchError, before anything compiles, if the live GPU is older than compute capability
    min_arch / 10 (the step's instructions do not exist there), or, for an arch-specific step
    (`exact`: sm_90a's wgmma), any other architecture."""
    cc = gpu.device()["cc"]
    if exact and cc != min_arch:
        raise ArchError(f"{name} is compiled for sm_{min_arch}a: its instructions (wgmma, setmaxnreg) exist on "
                        f"compute capability {min_arch / 10:.1f} only; this GPU, {gpu.device()['name']}, is "
                        f"{cc / 10:.1f}. Use {instead}, or backend='cpu' to run it in the emulator.")
    if cc < min_arch:
        raise ArchError(f"{name} needs compute capability {min_arch / 10:.1f} or newer (its instructions do "
                        f"not exist before sm_{min_arch}); this GPU, {gpu.device()['name']}, is {cc / 10:.1f}. "
                        f"Use {instead}, or backend='cpu' to run it in the emulator.")


def gpu_target(step, lookup=registry.lookup) -> str | None:
    """For a launch on the live GPU: an ArchError if it cannot run `step` (see require_arch), naming the
    latest earlier step that does run here (`lookup`: the step of a name, to follow `previous`), else the
    NVRTC target to compile for when CuPy's own choice will not do (sm_90a for an arch-specific step)."""
    instead = step.previous
    if not step.runs_on(gpu.device()["cc"]):
        while instead and not lookup(instead).runs_on(gpu.device()["cc"]):  # 07 -> 06 (Hopper only too) -> 05
            instead = lookup(instead).previous
    require_arch(step.name, step.min_arch, instead or "an earlier step", exact=step.arch_specific)
    return step.target(f"sm_{step.min_arch}") if step.arch_specific else None


def _compile(backend_name: str, source: str, expr: str, label: str, target: str | None = None):
    if backend_name == "gpu":
        return gpu.GpuModule(source, expr, label, target)

    return cpu.compile_kernel(source, expr, label=label)


_modules: dict[tuple, object] = {}


def compiled_module(backend_name: str, source: str, expr: str, label: str, target: str | None = None):
    """The compiled module for (backend, source, instantiation), compiled once per process (kernels share it).
    A failed compile raises and caches nothing, so a corrected source compiles next time.
    `target` (an NVRTC arch such as sm_90a) overrides CuPy's choice for the live GPU."""
    key = (backend_name, source, expr)
    if key not in _modules:
        _modules[key] = _compile(backend_name, source, expr, label, target)
    return _modules[key]


class Instance:
    """A step with fixed template parameters: enough for compile-only analysis, no backend needed. Any step: what
    differs between a GEMM step and a fused one (operands, rules by arch, launch) is the step's own data
    (registry.StepSpec); its parameters are judged by the emulator's limits here, and by each arch's in compiled()."""

    def __init__(self, step: StepSpec, params: dict, source_text: str | None = None, target: str | None = "cpu",
                 source: str | None = None):  # source: the name FusedInstance took it by
        source_text = source if source_text is None else source_text
        self.step = step
        self.params = step.resolve(params, target)
        self.source_text = source_text
        self.source = assemble(step.file, source_text)
        self.name_expression = step.name_expression(self.params)
        self.label = f"{step.name}{self._param_text()}"

    def __repr__(self) -> str:
        return f"Instance({self.label})"

    def _param_text(self) -> str:
        return "<" + ", ".join(f"{k}={v}" for k, v in self.params.items()) + ">" if self.params else ""

    @property
    def ARCH(self) -> str:  # noqa: N802 (the name the chapters use)
        """The arch analysed when none is given: a T4's sm_75 for a GEMM step, sm_90 for a fused one (the step's)."""
        return self.step.default_arch

    # --- compile-only analysis (no GPU needed) ---
    def compiled(self, arch: str | None = None) -> nvrtc.Artifact:
        """The step compiled by NVRTC for `arch` (default: ARCH), its parameters judged by that arch's limits (by
        the emulator's where the step's instructions do not exist on `arch`: the compile's ArchError says why)."""
        arch = self.ARCH if arch is None else arch
        cc = int(arch[3:].rstrip("a")) if re.fullmatch(r"sm_\d{2,3}a?", arch) else 0  # nvrtc.compile names a bad one
        params = self.step.resolve(self.params, arch if self.step.runs_on(cc) else "cpu")
        return nvrtc.compile(self.source, self.step.name_expression(params), self.step.target(arch),
                             label=self.label)  # "" is no arch: nvrtc.compile says so

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.step.dtype)

    def resources(self, arch: str | None = None) -> nvrtc.Resources:
        """Registers, shared memory, stack and spills that ptxas reports for `arch` (default: ARCH)."""
        return self.compiled(arch).resources

    def fit(self, arch: str | None = None, size: int = 1024) -> nvrtc.Fit:
        """Whether one block fits `arch` (default: ARCH): ptxas' report plus the threads and dynamic shared memory
        the step's launch asks for at size^3 (size^4 for E = A B C), against the arch's limits (nvrtc.fit)."""
        threads, shared = self.step.fit_block(self.params, size)
        return nvrtc.fit(self.resources(arch), threads, shared, compiler=nvrtc.version())

    def ptx(self, arch: str | None = None) -> str:
        return self.compiled(arch).ptx

    def sass(self, arch: str | None = None) -> str:
        return nvrtc.sass(self.compiled(arch))


class Kernel(Instance):
    """One step with fixed template parameters, compiled for one backend.

    `Kernel(A, B)` returns C = A @ B; a fused step's, `Kernel(A, B, C)`, returns E = A B C (the step's `inputs`).
    Inputs are checked (dtype, 2-D, contiguity, shapes, shapes the step cannot run) before anything launches; NumPy
    and CuPy arrays are both accepted and the result has the input's type.
    """

    def __init__(self, step: StepSpec, params: dict, backend_name: str | None = None, source_text: str | None = None,
                 source: str | None = None):  # source: the name FusedKernel took it by
        source_text = source if source_text is None else source_text
        self.backend = backend(backend_name)
        target = gpu_target(step) if self.backend == "gpu" else None  # ArchError first
        super().__init__(step, params, source_text, self.backend)  # the rules of the backend asked for
        self.module = compiled_module(self.backend, self.source, self.name_expression, self.label, target)
        self._checked: set = set()  # run()'s layout keys already checked
        self._scratch: dict = {}

    def __repr__(self) -> str:
        return f"Kernel({self.label}, backend={self.backend!r})"

    def resources(self, arch: str | None = None) -> nvrtc.Resources:
        """For `arch` by NVRTC; with no arch, the live GPU function's (or ARCH's on the CPU backend)."""
        if arch is None and self.backend == "gpu":
            return self.module.resources()
        return super().resources(arch)

    # --- the problem and its checks ---
    def check_inputs(self, *operands) -> tuple:
        """The problem's sizes (the step's dim_names: (M, N, K), or (M, K, L, N) for E = A B C) of valid operands;
        an InputError (or ShapeError) saying what to fix otherwise."""
        names = self.step.inputs
        if len(operands) != len(names):
            raise InputError(f"{self.name} takes {len(names)} operands ({', '.join(names)}), not {len(operands)}")
        check_matrices(self.name, self.dtype, dict(zip(names, operands)))
        dims = self.step.problem([tuple(x.shape) for x in operands])
        self.step.check_dims(dims, self.params, self.backend)
        return dims

    def check_output(self, *arrays) -> None:
        """check_inputs of the operands, and the output (the last array, what run() writes) of the backend's array
        type, the step's dtype, C-contiguous and of the product's shape: an InputError saying what to fix otherwise."""
        *operands, out = arrays
        dims = self.check_inputs(*operands)
        name = self.step.output
        check_matrices(self.name, self.dtype, {name: out})
        check_backend_arrays(self.name, self.backend, {**dict(zip(self.step.inputs, operands)), name: out})
        check_writable({name: out})
        m, n = self.step.output_shape(dims)
        if tuple(out.shape) != (m, n):
            raise InputError(f"{name} is {out.shape[0]}x{out.shape[1]} but {self.step.product_text(dims)} is "
                             f"{m}x{n}; pass an output of shape ({m}, {n})")

    def __call__(self, *operands, timeout: float | None = None):
        """The product of the operands (C = A B, or E = A B C). `timeout`: seconds the CPU backend waits for the
        launch (default: cpu.timeout_for)."""
        dims = self.check_inputs(*operands)
        is_cupy = any(type(x).__module__.startswith("cupy") for x in operands)
        xp = optional.module("cupy") if self.backend == "gpu" else np
        arrays = [to_array(xp, x) for x in operands]
        out = xp.zeros(self.step.output_shape(dims), dtype=self.dtype)
        if all(dims):
            self.run(*arrays, out, timeout=timeout)
        return to_array(optional.module("cupy") if is_cupy else np, out)

    # --- launch ---
    def launch_config(self, *dims, grid: int | None = None) -> Launch:
        """The launch for a problem of `dims`: launch_config(M, N, K), or launch_config((M, K, L, N)) for E = A B C;
        `grid`: the blocks of a persistent fused step (at most those resident at once)."""
        dims = tuple(dims[0]) if len(dims) == 1 else dims
        return self.step.launch_for(self, dims, grid)

    def grid_for(self, dims: tuple, grid: int | None = None) -> int:
        """Blocks to launch for `dims` (a persistent fused step: min(tiles, resident blocks), or `grid` if it fits)."""
        return self.step.blocks(self, tuple(dims), grid)

    def tiles(self, dims: tuple) -> int:
        """Output tiles of a fused step's larger phase: the most blocks that have work."""
        return self.step.tile_count(self.params, tuple(dims))

    def resident_blocks(self, dynamic_smem: int = 0) -> tuple[int, str]:
        """(blocks that can be resident at once, how that was found) on this kernel's backend."""
        return resident_blocks(self, dynamic_smem)

    def workspace(self, xp, m: int, l: int):
        """Scratch T (M x L) and the sync words, zeroed once: the grid barrier's word (it resets itself), or
        a counter per 32 x 32 piece of T, enough for step 08's tiles and for the experiments' (results/experiments/
        fusion-tma: tiles of 32 rows x 64 columns); each launch leaves them at zero."""
        words = max(2, cdiv(m, WGMMA_TILE_K) * cdiv(l, WGMMA_TILE_K))
        if xp is np:  # the emulator copies arrays per launch: fresh ones cost nothing
            return np.empty((m, l), np.float32), np.zeros(words, np.uint32)
        key = (m, l)
        if key not in self._scratch:
            self._scratch = {key: (xp.empty((m, l), np.float32), xp.zeros(words, np.uint32))}
        return self._scratch[key]

    def launch_args(self, *arrays, grid: int | None = None) -> tuple[Launch, list]:
        """The launch configuration and the kernel's arguments for arrays on the backend's device (the operands
        and the output, last): the step's own (registry.StepSpec.arguments). FusedKernel's grid may follow the
        arrays positionally, as it did."""
        if len(arrays) == len(self.step.inputs) + 2 and grid is None:
            *arrays, grid = arrays
        return self.step.arguments(self, tuple(arrays), grid)

    def extra_args(self, a, b, c) -> list:
        """The step's arguments after (M, N, K, A, B, C) for these arrays: step 08's tensor maps."""
        return self.step.extra_args(self.backend, a, b, c, self.params) if self.step.extra_args else []

    def run(self, *arrays, grid: int | None = None, stream=None, timeout: float | None = None) -> None:
        """Launch on arrays already on the backend's device (no copies): the operands, then the output. For timing:
        the arrays are checked (check_output) once per distinct shape, dtype and layout, so a timing loop pays a
        key lookup only. `timeout`: seconds the CPU backend waits (default: cpu.timeout_for of the problem's work)."""
        key = layout_key(*arrays)
        if key not in self._checked:
            self.check_output(*arrays)
            self._checked.add(key)
        cfg, args = self.launch_args(*arrays, grid=grid)
        if self.backend == "gpu":
            self.module.launch(cfg.grid, cfg.block, args, cfg.shared_bytes, stream=stream)
        else:
            dims = self.step.problem([tuple(x.shape) for x in arrays[:-1]])
            first = len(dims)  # the operands follow the sizes in the kernel's arguments
            cpu.launch(self.module, cfg.grid, cfg.block, args, shared_mem=cfg.shared_bytes,
                       timeout=cpu.timeout_for(self.step.work(dims)) if timeout is None else timeout,
                       inputs=tuple(range(first, first + len(self.step.inputs))))

    def launcher(self, *arrays, graph: bool = False):
        """A no-argument function that launches on these device arrays (operands, then output): for timing (GPU only).

        The first launch goes through run() and its checks; the returned function reuses that
        launch's grid, arguments and workspace, so the time measured is the kernel's, not the
        Python around it (the occupancy query and the launch checks cost microseconds, as much as
        the whole kernel at N = 256). It calls cuLaunchKernel with arguments packed once
        (gpu.GpuModule.packed_launcher): CuPy's own call re-converts them each time, which at 512
        costs a noticeable share of the event time (results/experiments/fusion-kernel-time).
        graph=True: it replays a CUDA graph of that launch instead (gpu.graph_launcher), which costs
        less host time per call than cuLaunchKernel.
        """
        self.run(*arrays)
        cfg, args = self.launch_args(*arrays)
        if graph:
            return gpu.graph_launcher(self.module.function, self.label, cfg.grid, cfg.block, args, cfg.shared_bytes)
        return self.module.packed_launcher(cfg.grid, cfg.block, args, cfg.shared_bytes)

    def counters(self, m: int = 256, n: int = 256, k: int = 256, max_blocks: int | None = 4, seed: int = 0):
        """Memory requests of one (m, n, k) launch, counted by the CPU emulator's analysis mode.

        Global-memory sectors and shared-memory wavefronts per warp-wide request, per source line
        (a `gemmlab.cpu.Counters`; print it for a table). Random inputs of the step's dtype; only the
        first `max_blocks` blocks run (None: all). On the GPU backend a CPU twin of the same step
        and parameters does the counting (it needs g++, not a GPU). GEMM steps (StepSpec.check_countable).
        """
        self.step.check_countable()
        module = (self.module if self.backend == "cpu"
                  else compiled_module("cpu", self.source, self.name_expression, self.label))
        registry.check_shape(self.step, m, n, k)
        if min(m, n, k) < 1:
            raise InputError(f"counters need a non-empty problem, not M={m}, N={n}, K={k}")
        cpu.check_memory(f"counters of {self.step.name} at M={m}, N={n}, K={k}",
                     # the float64 draw, A, B and C, and the emulator's two copies of A, B and C
                     8 * max(m * k, k * n) + 3 * self.dtype.itemsize * (m * k + k * n + m * n),
                     "the counts per request do not depend on the size once a few tiles fit: count at 256 or 1024")
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(self.dtype)
        b = rng.standard_normal((k, n)).astype(self.dtype)
        c = np.zeros((m, n), dtype=self.dtype)
        cfg = self.launch_config(m, n, k)
        extra = self.step.extra_args("cpu", a, b, c, self.params) if self.step.extra_args else []
        return cpu.analyze(module, cfg.grid, cfg.block, [np.int32(m), np.int32(n), np.int32(k), a, b, c, *extra],
                           shared_mem=cfg.shared_bytes, max_blocks=max_blocks, names=["M", "N", "K", "A", "B", "C"])


def check_matrices(name: str, dtype, arrays: dict) -> None:
    """Each of `arrays` ({"A": a, ...}) a 2-D, C-contiguous NumPy or CuPy array of `dtype`: an InputError
    naming the first that is not and what to do (the GEMM and the fused steps' one check)."""
    for label, x in arrays.items():
        if not hasattr(x, "dtype") or not hasattr(x, "shape"):
            raise InputError(f"{label} must be a NumPy or CuPy array, not {type(x).__name__}")
        if x.ndim != 2:
            raise InputError(f"{label} must be a 2-D matrix; it has shape {tuple(x.shape)}")
        if x.dtype != dtype:
            raise InputError(f"{name} takes {dtype} inputs but {label} is {x.dtype}: "
                             f"convert with {label}.astype(np.{dtype})")
        if not x.flags.c_contiguous:
            raise InputError(f"{label} is not C-contiguous (a transposed view or a slice?): the kernel reads it as "
                             f"row-major; pass np.ascontiguousarray({label}) (cupy.ascontiguousarray on a GPU)")


def check_size(value, what: str = "size") -> int:
    """`value` as a problem size, a whole number of at least 1: a ConfigError naming `what` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{what}={value!r} is not a problem size; give a whole number of at least 1 (such as 64).")
    return int(value)


def check_writable(arrays: dict) -> None:
    """Each of `arrays` ({"C": c}: what a launch writes) writable: an InputError naming a read-only one (a GPU kernel
    would write it anyway; the CPU backend would leave it unwritten)."""
    for label, x in arrays.items():
        if not getattr(getattr(x, "flags", None), "writeable", True):
            raise InputError(f"{label} is read-only ({label}.flags.writeable is False), but the kernel writes its result "
                             f"there; pass a writable array ({label}.copy(), or np.empty of the same shape)")


def check_backend_arrays(name: str, backend_name: str, arrays: dict) -> None:
    """run()'s arrays on the backend's device: NumPy arrays for 'cpu', CuPy arrays for 'gpu'."""
    for label, x in arrays.items():
        on_gpu = type(x).__module__.startswith("cupy")
        if on_gpu != (backend_name == "gpu"):
            raise InputError(f"{name} runs on the {backend_name} backend but {label} is a {type(x).__module__}."
                             f"{type(x).__name__}; run() takes arrays already there: pass "
                             + ("NumPy arrays" if backend_name == "cpu" else "CuPy arrays (cupy.asarray)")
                             + ", or call the kernel itself, which copies")


def layout_key(*arrays) -> tuple:
    """What run()'s checks depend on: each array's type, shape, dtype and strides."""
    return tuple((type(x), getattr(x, "shape", None), getattr(x, "dtype", None), getattr(x, "strides", None))
                 for x in arrays)


def to_array(xp, x):
    """x as an array of module xp (numpy or cupy), copying between host and device if needed. A device
    view that starts off a 16-byte boundary (a row-offset slice: C-contiguous, mid-allocation) is
    copied too: the kernels' 16-byte loads assume aligned rows, and a misaligned one kills the context."""
    if xp is np:
        return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x
    y = xp.asarray(x)
    return y.copy() if y.data.ptr % 16 else y


# ------------------------------------------------------------------------------------------------
# Residency: how many blocks of a persistent kernel (the fused steps from 03 on) can be on the GPU at once
# ------------------------------------------------------------------------------------------------
def cpu_workers() -> int:
    """Blocks the emulator runs at once: one OS thread each (cpu.cpu_threads, which the child is told)."""
    return cpu.cpu_threads()


def resident_blocks(kern: Kernel, dynamic_smem: int = 0) -> tuple[int, str]:
    """(blocks that can be resident at once, how that was found) for this kernel on its backend."""
    threads = kern.step.threads(kern.params)  # a persistent fused step's block
    if kern.backend == "cpu":
        return cpu_workers(), "one block per emulator worker thread"
    dev = gpu.device()
    kern.module.allow_dynamic_shared(dynamic_smem)  # before the occupancy query counts it
    f = kern.module.function
    per_sm = None
    try:
        driver = optional.module("cupy_backends.cuda.api.driver")  # optional: CuPy's, on a machine with a GPU
        per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(getattr(f, "kernel", f).ptr, threads,
                                                                      dynamic_smem))
        how = "occupancy API"
    except Exception:  # an older CuPy: the same count from registers, threads and shared memory
        cc = dev["cc"] if dev["cc"] in SM_LIMITS else 90
        per_sm, _ = blocks_per_sm(f.num_regs, threads, f.shared_size_bytes + dynamic_smem, cc)
        how = "registers, threads and shared memory"
    return per_sm * dev["sms"], f"{per_sm} per SM x {dev['sms']} SMs ({how})"


FusedKernel = Kernel  # the names chapter 8 and the lab use for a fused step's kernel and instance: the same classes
FusedInstance = Instance


def compiled(name: str, arch: str = "sm_90", source: str | None = None, **params):
    """Compile-only (no backend, no GPU): step `name` compiled for `arch` (nvrtc.Artifact: PTX, cubin, ptxas'
    report), its parameters judged by that arch's limits (Instance.compiled)."""
    return instance(name, source, **params).compiled(arch)


def resources(name: str, arch: str = "sm_90", source: str | None = None, **params):
    """What ptxas reports for step `name` on `arch` (compile-only: compiled)."""
    return compiled(name, arch, source, **params).resources


def fused_step(name: str, backend: str | None = None, source: str | None = None, **params) -> Kernel:
    """Step `name` of the fused track compiled as step() does (fusion.step)."""
    return Kernel(registry.lookup(name, track="fused"), params, backend, source)


def gpu_arch_ok(st) -> bool:
    """Whether the live GPU has the instructions step `st` needs (StepSpec.runs_on)."""
    return st.runs_on(gpu.device()["cc"])


def edited(name: str, old: str, new: str, backend: str | None = None, **params):
    """Step `name` with the text `old` of its kernel file replaced by `new` (a reader's experiment, a test's
    mutant), compiled as step() does; a ConfigError if the file has no `old`."""
    text = kernel_path(registry.lookup(name).file).read_text()
    if old not in text:
        raise ConfigError(f"{name}'s kernel file has no {old!r} to replace; copy the text from the file itself")
    return step(name, backend, text.replace(old, new), **params)


def step(name: str, backend: str | None = None, source: str | None = None, **params) -> Kernel:
    """Compile step `name` with template parameters `params` for the active (or given) backend.

    `source` replaces the kernel file's text (a reader's edited kernel); common.cuh is still inlined.
    Any step: a GEMM step's kernel computes C = k(A, B), a fused step's E = k(A, B, C).
    """
    return Kernel(registry.lookup(name), params, backend, source)


def instance(name: str, source: str | None = None, **params) -> Instance:
    """Step `name` with template parameters, for compile-only analysis (no GPU, no emulator): resources, ptx, sass
    for an arch (the step's default_arch: sm_75 for a GEMM step, sm_90 for a fused one)."""
    return Instance(registry.lookup(name), params, source)
