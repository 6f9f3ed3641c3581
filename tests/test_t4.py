"""Issue 40 (Colab and T4): limits judged for the backend asked for, the T4 fit check, the compiler a claim
depends on, arch tags in the listing, which NVRTC the GPU path uses, live sizes for a smaller GPU."""
import ctypes
import re
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import gemmlab
from gemmlab import backends, bench, fusion, gpu, nvrtc, registry
from gemmlab.__main__ import main as cli
from gemmlab.errors import ArchError, ConfigError

T4 = {"cc": 75, "name": "Tesla T4", "sms": 40, "shared_per_block": 48 * 1024, "shared_per_block_optin": 64 * 1024,
      "max_threads_per_block": 1024, "registers_per_block": 65536}
needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC is not installed")


@pytest.fixture
def t4_present(monkeypatch):
    """A T4 is the live GPU (what Colab gives): gpu.available() and gpu.device() say so."""
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(gpu, "device", lambda: dict(T4))
    monkeypatch.setattr(backends, "_forced", None)


# --- 1. a backend="cpu" call is judged by the emulator's limits, a GPU call by the live GPU's -----------------
def test_cpu_fused_step_that_needs_more_than_a_t4_runs_in_the_emulator_with_a_t4_present(t4_present):
    assert backends.backend() == "gpu" and fusion.smem_limit() == 64 * 1024  # the T4 is what a plain call sees
    st = fusion.get("fused/06_wgmma_tf32x3")
    need = st.smem(st.resolve({}, "cpu"), (64,) * 4)
    assert need > T4["shared_per_block_optin"]  # its default tiles need more than a T4 block has
    kern = fusion.step("fused/06_wgmma_tf32x3", backend="cpu")
    assert kern.backend == "cpu" and kern.launch_config((64,) * 4).shared_bytes == need
    a, b, c = fusion.make_inputs("random", 70, 33, 40, 36)
    assert not fusion.compare(np.asarray(kern(a, b, c)), a, b, c)[0].any()


def test_cpu_step05_with_large_tiles_builds_and_runs_with_a_t4_present(t4_present):
    big = {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 64, "WARP_N": 32, "SPLIT_K": 1, "NUM_STAGES": 3}
    assert registry._tf32x3_smem(fusion.get("fused/05_tf32x3").resolve(big, "cpu")) > 64 * 1024
    assert fusion.config_problem("fused/05_tf32x3", backend="cpu", **big) is None
    kern = fusion.step("fused/05_tf32x3", backend="cpu", **big)
    a, b, c = fusion.make_inputs("random", 130, 40, 36, 129)
    assert not fusion.compare(np.asarray(kern(a, b, c)), a, b, c)[0].any()
    assert "PASS" in fusion.slider_report("fused/05_tf32x3", 17, backend="cpu", **big)


def test_gpu_call_is_judged_by_the_live_t4(t4_present):
    big = {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 64, "WARP_N": 32, "SPLIT_K": 1, "NUM_STAGES": 3}
    with pytest.raises(ConfigError, match=r"over the 65536 a block may have here"):
        fusion.get("fused/05_tf32x3").resolve(big, "gpu")
    assert "65536" in fusion.config_problem("fused/05_tf32x3", backend="gpu", **big)
    with pytest.raises(ArchError, match=r"sm_90a.*Tesla T4"):  # the architecture is refused first, as before
        fusion.step("fused/06_wgmma_tf32x3", backend="gpu")


def test_a_shape_rule_is_judged_by_the_kernels_backend(t4_present):
    """fused/02 keeps a panel of T in shared memory: 80 KB of it is too much for a T4, not for the emulator."""
    kern = fusion.step("fused/02_row_panel", backend="cpu", PANEL_M=8)
    a, b, c = fusion.make_inputs("random", 9, 5, 2500, 3)  # a panel of 8 x 2512 floats: 80 KB
    assert not fusion.compare(np.asarray(kern(a, b, c)), a, b, c)[0].any()
    with fusion.limits_of("gpu"):
        assert registry._panel_shape(kern.params, (9, 5, 2500, 3))  # the T4 refuses it


@needs_nvrtc
def test_compile_only_analysis_is_judged_by_its_arch(t4_present):
    """Chapter 8 compiles steps 06 and 07 for sm_90a on any machine: a T4's limits do not apply to that."""
    assert fusion.resources("fused/06_wgmma_tf32x3", "sm_90").arch == "sm_90a"
    with pytest.raises(ArchError, match="needs sm_80"):  # the arch's instructions first, not its limits
        fusion.resources("fused/05_tf32x3", "sm_75", BLOCK_M=128, BLOCK_N=128, WARP_M=64, WARP_N=32, SPLIT_K=1,
                         NUM_STAGES=3)
    deep = {"BLOCK_M": 128, "BLOCK_N": 128, "WARP_M": 64, "WARP_N": 32, "SPLIT_K": 2, "NUM_STAGES": 3}  # 210 KB
    with pytest.raises(ConfigError, match="over the 166912 a block may have"):
        fusion.get("fused/05_tf32x3").resolve(deep, "sm_80")
    assert fusion.get("fused/05_tf32x3").resolve(deep, "sm_90")


def test_smem_limit_by_target():
    assert fusion.smem_limit("cpu") == fusion.CPU_SMEM_LIMIT == 227 * 1024
    assert fusion.smem_limit("sm_75") == 64 * 1024 and fusion.smem_limit("sm_90a") == 227 * 1024
    with fusion.limits_of("sm_80"):
        assert fusion.smem_limit() == 163 * 1024
    with pytest.raises(ConfigError, match="no per-block limits are recorded for sm_99"):
        fusion.smem_limit("sm_99")


# --- 2. the T4 fit: dynamic shared memory, registers x threads, threads; which limit, by how much --------------
def _res(registers=32, static=0, st=0, ld=0, arch="sm_75"):
    return nvrtc.Resources(arch, registers, static, 0, st, ld)


def test_fit_counts_registers_times_threads():
    f = nvrtc.fit(_res(registers=81), 1024)
    assert not f.ok and len(f.problems) == 1
    # 81 registers round up to 88 a thread (256 a warp): 32 warps x 2816 = 90112, 24576 over 65536
    assert "81 registers x 1024 threads = 82944 registers (90112 as allocated per warp)" in f.problems[0]
    assert "over the register file's 65536 by 24576" in f.problems[0]
    assert nvrtc.fit(_res(registers=64), 1024).ok  # 64 x 1024 = 65536 exactly


def test_fit_counts_dynamic_shared_memory_and_threads():
    f = nvrtc.fit(_res(static=16384), 256, dynamic_shared=56 * 1024)
    assert f.problems == ("16384 B static + 57344 B dynamic = 73728 B of shared memory, over the 65536 a block "
                          "may have on sm_75 by 8192",)
    assert nvrtc.fit(_res(static=16384), 256, dynamic_shared=48 * 1024).ok
    assert "over the limit of 1024 by 256" in nvrtc.fit(_res(), 1280).problems[0]
    assert "over the limit of 49152 by 4096" in nvrtc.fit(_res(static=53248), 128).problems[0]
    assert nvrtc.fit(_res(st=68, ld=84), 256).problems == ("spills 68/84 B (stores/loads) to local memory",)
    assert str(nvrtc.fit(_res(), 256, compiler="13.5")).startswith("fits a T4: yes (NVRTC 13.5: 32 registers x 256")
    with pytest.raises(ConfigError, match="known architectures are sm_75"):
        nvrtc.arch_limits("sm_61")


@needs_nvrtc
def test_cli_says_which_limit_fails_and_by_how_much(capsys):
    params = ["--param", "BLOCK_M=256", "--param", "THREAD_M=4"]  # 256 x 128 in 4 x 8 thread tiles: 1024 threads
    assert cli(["resources", "sgemm/05_2d_blocktiling", "--arch", "sm_75", *params]) == 0
    out = capsys.readouterr().out
    regs = gemmlab.instance("sgemm/05_2d_blocktiling", BLOCK_M=256, THREAD_M=4).resources("sm_75").registers
    taken = nvrtc.register_allocation(regs, 1024)
    assert "launch: 1024 threads per block" in out
    if taken > 65536:  # the register count is the compiler's: 81 with NVRTC 13.5
        assert f"fits a T4: no (NVRTC {nvrtc.version()}: {regs} registers x 1024 threads" in out
        assert f"over the register file's 65536 by {taken - 65536}" in out
    else:
        assert "fits a T4: yes" in out


@needs_nvrtc
def test_cli_counts_the_launch_dynamic_shared_memory(capsys):
    assert cli(["resources", "hgemm/06_double_buffer", "--arch", "sm_75"]) == 0
    out = capsys.readouterr().out
    assert "256 threads per block, 49152 B dynamic shared memory" in out and "49152 B shared of 65536" in out
    assert cli(["resources", "sgemm/10_cp_async", "--arch", "sm_80", "--param", "NUM_STAGES=5",
                "--param", "BLOCK_K=32"]) == 0
    out = capsys.readouterr().out
    assert "fits sm_80 (A100): no" in out
    assert "0 B static + 174080 B dynamic = 174080 B of shared memory, over the 166912 a block may have on sm_80 " \
           "by 7168" in out


# --- 3. a T4 claim that holds with one NVRTC release only names it --------------------------------------------
@needs_nvrtc
def test_step09_t4_claim_names_the_compiler(capsys):
    assert registry.get("sgemm/09_double_buffer").other_nvrtc_spills[("sm_75", "12.8")] == (68, 84)
    assert cli(["resources", "sgemm/09_double_buffer", "--arch", "sm_75"]) == 0
    out = capsys.readouterr().out
    assert f"compiled by NVRTC {nvrtc.version()}" in out
    notes = registry.get("sgemm/09_double_buffer").compiler_notes("sm_75", nvrtc.version())
    assert "depends on the compiler: " in out and notes and all(note in out for note in notes)
    if nvrtc.version() != "12.8":
        assert "spills 68/84 B (stores/loads) with NVRTC 12.8" in out
    assert cli(["resources", "sgemm/09_double_buffer", "--arch", "sm_75", "--param", "BLOCK_K=8"]) == 0
    assert "depends on the compiler" not in capsys.readouterr().out  # measured at the defaults only


@needs_nvrtc
@pytest.mark.parametrize("name", [s.name for s in registry.STEPS if s.min_arch <= 75])
def test_recorded_spills_of_this_nvrtc_release_hold(name):
    """With a release the registry has measurements of (GEMMLAB_NVRTC_LIB=... for 12.8 or 13.0), every T4 step
    spills exactly what is recorded for it (nothing where nothing is recorded)."""
    release = nvrtc.version()
    if release not in {rel for s in registry.STEPS for (_, rel) in s.other_nvrtc_spills}:
        pytest.skip(f"no spills recorded for NVRTC {release}")
    r = gemmlab.instance(name).resources("sm_75")
    assert (r.spill_stores, r.spill_loads) == registry.get(name).other_nvrtc_spills.get(("sm_75", release), (0, 0))


# --- 4. every step that needs an architecture shows it in the listing -----------------------------------------
def test_steps_listing_tags_every_step_that_needs_an_arch(capsys):
    assert cli(["steps"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(lines) == {s.name for s in registry.STEPS + fusion.FUSED_STEPS}  # the fused steps too
    for s in registry.STEPS + fusion.FUSED_STEPS:
        tag = s.arch_tag
        assert bool(tag) == bool(s.min_arch), s.name
        if tag:
            assert f"  {tag} " in lines[s.name], lines[s.name]
            assert lines[s.name].count(tag) == 1, lines[s.name]  # not repeated by the summary
    assert registry.get("sgemm/10_cp_async").arch_tag == "sm_80+"
    assert registry.get("hgemm/08_wgmma").arch_tag == "sm_90a"
    assert registry.get("hgemm/01_mma_tiling").arch_tag == "sm_75+"


# --- 5. the GPU path compiles with CuPy's own NVRTC; the analysis never imposes its own ------------------------
def test_gpu_module_leaves_nvrtc_to_cupy(monkeypatch):
    """GpuModule without a target (every step but sm_90a's) hands the source to CuPy: it loads no libnvrtc,
    calls no gemmlab NVRTC, sets no environment variable."""
    calls, loaded = [], []

    class RawModule:
        def __init__(self, **kw):
            calls.append(kw)

        def get_function(self, name):
            return types.SimpleNamespace(name=name)

    fake = types.SimpleNamespace(RawModule=RawModule, cuda=types.SimpleNamespace(
        compiler=types.SimpleNamespace(CompileException=RuntimeError),
        driver=types.SimpleNamespace(CUDADriverError=RuntimeError)))
    monkeypatch.setattr(gpu, "_cupy", lambda: fake)
    real_cdll = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: loaded.append(str(name)) or real_cdll(name, *a, **k))
    monkeypatch.setattr(nvrtc, "_nvrtc", lambda: pytest.fail("the GPU path called gemmlab's NVRTC"))
    env = dict(os.environ)
    gpu.GpuModule("__global__ void k() {}", "k", "k")
    assert len(calls) == 1 and calls[0]["code"].startswith("__global__") and "path" not in calls[0]
    assert not [lib for lib in loaded if "nvrtc" in lib]
    assert dict(os.environ) == env


def test_analysis_lets_cupy_load_its_nvrtc_first(monkeypatch):
    """CuPy's loader (cuda.pathfinder) takes a libnvrtc already in the process: with a GPU present, the NVRTC
    of CuPy's CUDA major is loaded and CuPy takes it before gemmlab loads the analysis' (another release)."""
    events = []
    cupy_nvrtc = types.ModuleType("cupy_backends.cuda.libs.nvrtc")
    cupy_nvrtc.getVersion = lambda: events.append("cupy") or (12, 8)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", cupy_nvrtc)
    monkeypatch.setattr(nvrtc, "load_for_cupy", lambda: events.append("cupy's major"))
    monkeypatch.setattr(nvrtc, "_library_candidates", lambda: [("/nonexistent/libnvrtc.so.13", [])])
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: events.append(f"ours {name}") or object())
    ours = "ours /nonexistent/libnvrtc.so.13"
    for present, want in ((True, ["cupy's major", "cupy", ours]), (False, [ours])):
        events.clear()
        monkeypatch.setattr(nvrtc, "cupy_sees_a_gpu", lambda present=present: present)  # what gpu.available asks
        nvrtc._nvrtc.__wrapped__()
        assert events == want


def test_wheels_are_ordered_by_release_not_by_folder():
    """nvidia/cuda_nvrtc/lib (12.x) sorts after nvidia/cu13/lib by name; the analysis takes the newest release."""
    libs = ["/s/nvidia/cu13/lib/libnvrtc.so.13", "/s/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"]
    assert sorted(libs, key=nvrtc._release, reverse=True)[0].endswith(".so.13")
    assert nvrtc._release("/x/libnvrtc.so.12.8") == (12, 8)


@needs_nvrtc
def test_cupy_compiles_with_its_own_major_and_the_analysis_with_the_pin():
    """In a fresh process that pretends a GPU is present, with both wheels installed (requirements.txt):
    gemmlab's analysis compiles first and runs on the pinned release (13.5), and CuPy's NVRTC is then the
    release of CuPy's own CUDA major (12 for cupy-cuda12x), whose PTX a CUDA 12 driver loads. Without
    load_for_cupy CuPy would take 13.5 (the newest wheel)."""
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from importlib import metadata

    try:
        pinned_installed = metadata.version("nvidia-cuda-nvrtc").startswith(nvrtc.pinned_version() or "?")
    except metadata.PackageNotFoundError:
        pinned_installed = False
    if not pinned_installed:
        pytest.skip("the pinned NVRTC wheel (requirements.txt) is not installed here")
    if not any(nvrtc._release(lib)[:1] == (nvrtc.cupy_cuda_major(),) for lib in nvrtc._wheel_libraries()):
        pytest.skip("no NVRTC wheel of CuPy's CUDA major is installed (pip install -r requirements.txt)")
    code = ("import gemmlab; from gemmlab import nvrtc; nvrtc.cupy_sees_a_gpu = lambda: True; "
            "gemmlab.instance('sgemm/03_smem_tiling').resources('sm_75'); "
            "from cupy_backends.cuda.libs import nvrtc as c; "
            "print(c.getVersion()[0], nvrtc.cupy_cuda_major(), nvrtc.version(), nvrtc.pinned_version())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=gemmlab.source.REPO)
    assert out.returncode == 0, out.stderr[-400:]
    cupy_major, wanted, analysis, pinned = out.stdout.split()[-4:]
    assert cupy_major == wanted and analysis == pinned


def test_pyproject_pins_the_same_nvrtc_as_requirements():
    """An installed package (no requirements.txt) reads the pin from its `analysis` extra: the two must agree."""
    root = gemmlab.source.REPO
    pins = [re.search(r"nvidia-cuda-nvrtc==([\d.]+)", (root / f).read_text()).group(1)
            for f in ("requirements.txt", "pyproject.toml")]
    assert pins[0] == pins[1]


# --- 6. live sizes: the full list on an H100 or H200, capped on a T4 -------------------------------------------
CH7B = [s.name for s in registry.STEPS if s.track == "hgemm"]
SIZES = [1024, 2048, 4096, 8192, 16384]


@pytest.mark.parametrize("gpu_name", ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "h100-sxm"])
def test_live_sizes_keep_every_size_on_hopper(gpu_name):
    assert bench.live_sizes(SIZES, steps=CH7B, gpu=gpu_name) == SIZES


def test_live_sizes_cap_a_t4_to_about_a_minute():
    sizes = bench.live_sizes(SIZES, steps=CH7B, gpu="Tesla T4")
    assert sizes == [1024, 2048, 4096, 8192]  # 16384^3 alone would take minutes
    # steps the T4 cannot run (sm_80+, sm_90a) are not counted; more steps, fewer sizes
    assert bench.live_sizes(SIZES, steps=6, gpu="Tesla T4") == sizes
    assert bench.live_sizes(SIZES, steps=20, gpu="Tesla T4") == [1024, 2048, 4096]
    assert bench.live_sizes([16384], steps=CH7B, gpu="Tesla T4") == [16384]  # the smallest always stays
    with pytest.raises(ConfigError, match="no spec sheet for GPU 'Radeon'"):
        bench.live_sizes(SIZES, gpu="Radeon")


def test_live_sizes_without_a_gpu_are_all_sizes(monkeypatch):
    monkeypatch.setattr(bench, "backend", lambda: "cpu")
    assert bench.live_sizes(SIZES, steps=CH7B) == SIZES
