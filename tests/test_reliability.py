"""Issue 43, a hostile user's second round: every class of bad input fails fast, with the package's own
error saying what is wrong and what to do, and the next call works (items 2 to 8)."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gemmlab
from gemmlab import cpu, fusion, registry
from gemmlab.__main__ import main
from gemmlab.measure.check import verify
from gemmlab.errors import ConfigError, InputError, KernelError, ShapeError

ROOT = Path(__file__).resolve().parent.parent
ALL_STEPS = [*registry.STEPS, *fusion.FUSED_STEPS]


def resolve(st, overrides):
    return st.resolve(overrides) if isinstance(st, registry.Step) else st.resolve(overrides, "cpu")


def good_call_works():
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((4, 5), np.float32)
    np.testing.assert_allclose(k(a, b), a @ b)


# ------------------------------------------------------------------------------------------------
# Items 2 and 3: parameters are checked in one place (registry.resolve_params), before the rules
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("st", ALL_STEPS, ids=lambda s: s.name)
def test_a_zero_or_negative_parameter_is_rejected_by_every_step(st):
    for name in st.params:
        for bad in (0, -4):
            with pytest.raises(ConfigError, match=rf"{name}={bad} is not allowed; a template parameter is a whole "
                                                  rf"number from 1 to 65536 \(the sliders offer"):
                resolve(st, {name: bad})


@pytest.mark.parametrize("bad", [0, -4, 8.9, True, "abc", None, 10**9, np.float32(8)])
@pytest.mark.parametrize("name, param", [("sgemm/04_1d_blocktiling", "BLOCK_K"), ("fused/03_two_phase", "BLOCK_K"),
                                         ("hgemm/08_wgmma", "GROUP_M"), ("fused/04_split_k", "SPLIT_K")])
def test_bad_parameter_values_get_the_rule_error_before_any_compile(name, param, bad):
    make = fusion.step if name.startswith("fused/") else gemmlab.step
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=re.escape(f"{param}={bad!r} is not allowed")):
        make(name, backend="cpu", **{param: bad})
    assert time.perf_counter() - start < 1.0  # no g++, no launch
    good_call_works()


def test_numpy_integers_are_parameters_too():
    assert registry.get("sgemm/03_smem_tiling").resolve({"BLOCK": np.int64(16)}) == {"BLOCK": 16}


def test_fused_slider_reports_a_zero_parameter_as_the_rule_says():
    text = fusion.slider_report("fused/03_two_phase", BLOCK_K=0)
    assert text.startswith("cannot run:") and "BLOCK_K=0 is not allowed" in text


def test_every_choice_alone_and_in_random_combinations_resolves_or_says_why():
    """What the sliders offer: each choice alone and random combinations either pass the rules and give a launch
    a GPU accepts (1 to 1024 threads, a non-negative shared-memory size), or fail with the rule's ConfigError."""
    rng = np.random.default_rng(43)
    for st in ALL_STEPS:
        configs = [{k: v} for k, p in st.params.items() for v in p.choices]
        configs += [{k: int(rng.choice(p.choices)) for k, p in st.params.items()} for _ in range(60)]
        for overrides in configs:
            try:
                p = resolve(st, overrides)
            except ConfigError:
                continue
            if isinstance(st, registry.Step):
                launch = st.launch(67, 45, 33, p)
                assert 1 <= launch.threads <= 1024 and launch.shared_bytes >= 0, (st.name, p, launch)
            else:
                assert 1 <= st.threads(p) <= 1024 and st.smem(p, (67, 33, 45, 29)) >= 0, (st.name, p)


def test_cp_async_swizzle_needs_a_power_of_two_in_the_rules():
    with pytest.raises(ConfigError, match=r"BLOCK_N=192 must be a power of two of at least 16 \(the XOR swizzle"):
        registry.get("hgemm/07_cp_async").resolve({"BLOCK_N": 192})
    for name in ("hgemm/03_swizzled", "hgemm/04_register_prefetch", "hgemm/05_tuned_tiles", "hgemm/06_double_buffer"):
        with pytest.raises(ConfigError, match="power of two"):
            registry.get(name).resolve({"BLOCK_N": 192})


# ------------------------------------------------------------------------------------------------
# Item 2: GEMMLAB_CPU_THREADS has one reading, the CPU backend's time-out is the caller's to set
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["abc", "-1", "0", "1.5"])
def test_an_invalid_thread_count_is_an_error_naming_the_variable(value, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CPU_THREADS", value)
    expected = rf"GEMMLAB_CPU_THREADS='{re.escape(value)}' is not a thread count; set it to a whole number"
    with pytest.raises(ConfigError, match=expected):
        fusion.cpu_workers()
    kern = fusion.step("fused/03_two_phase", backend="cpu")  # a persistent grid: it used to wait forever
    a = np.ones((40, 40), np.float32)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=expected):
        kern(a, a, a, timeout=60)
    with pytest.raises(ConfigError, match=expected):
        gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)(a, a, timeout=60)
    assert time.perf_counter() - start < 5
    monkeypatch.delenv("GEMMLAB_CPU_THREADS")
    good_call_works()


def test_the_child_is_told_the_thread_count_and_does_not_read_it():
    runtime = (ROOT / "gemmlab" / "runtime" / "emulator" / "runtime.cpp").read_text()
    assert 'getenv("GEMMLAB_CPU_THREADS")' not in runtime
    assert "workers %d" in runtime


def test_one_worker_runs_a_persistent_grid_of_one(monkeypatch):
    monkeypatch.setenv("GEMMLAB_CPU_THREADS", "1")
    kern = fusion.step("fused/03_two_phase", backend="cpu")
    assert fusion.cpu_workers() == 1 and kern.grid_for((100, 100, 100, 100)) == 1
    a, b, c = (np.random.default_rng(i).uniform(-1, 1, (70, 70)).astype(np.float32) for i in range(3))
    assert not fusion.compare(kern(a, b, c, timeout=120), a, b, c)[0].any()


SPIN = ("#include \"common.cuh\"\n"
        "template <int BLOCK> __global__ void sgemm_smem_tiling(int M, int N, int K, const float* A,\n"
        "                                                    const float* B, float* C) {\n"
        "    volatile int x = 1;\n"
        "    while (x) { x = x + 2; }  // never 0: the kernel never ends\n"
        "}\n")


def test_the_time_out_is_the_callers_keyword_or_variable(monkeypatch):
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=SPIN, BLOCK=8)
    a = np.ones((4, 4), np.float32)
    start = time.perf_counter()
    with pytest.raises(KernelError, match=r"did not finish in 1 s, the CPU backend's time-out .*pass timeout=SECONDS "
                                          r"or set GEMMLAB_CPU_TIMEOUT"):
        k(a, a, timeout=1)
    monkeypatch.setenv("GEMMLAB_CPU_TIMEOUT", "1.5")
    with pytest.raises(KernelError, match=r"did not finish in 1.5 s"):
        k(a, a)
    assert time.perf_counter() - start < 10
    monkeypatch.setenv("GEMMLAB_CPU_TIMEOUT", "abc")
    with pytest.raises(ConfigError, match=r"GEMMLAB_CPU_TIMEOUT='abc' is not a time-out; give a positive number"):
        k(a, a)
    monkeypatch.delenv("GEMMLAB_CPU_TIMEOUT")
    for bad in (0, -1, "x", True, float("inf")):
        with pytest.raises(ConfigError, match="is not a time-out"):
            k(a, a, timeout=bad)
    good_call_works()


def test_the_default_time_out_fits_the_problem():
    small, large = cpu.timeout_for(64 ** 3), cpu.timeout_for(2048 ** 3)
    assert small < 60 < large and large == pytest.approx(cpu.TIMEOUT_BASE_S + 2048 ** 3 / cpu.TIMEOUT_RATE)


def test_a_fused_step_takes_a_time_out_too():
    k = fusion.step("fused/03_two_phase", backend="cpu")
    a = np.ones((8, 8), np.float32)
    np.testing.assert_allclose(k(a, a, a, timeout=60), a @ a @ a)


# ------------------------------------------------------------------------------------------------
# Item 4: the command lines
# ------------------------------------------------------------------------------------------------
def run_cli(args, capsys, env=None, monkeypatch=None):
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("args, message", [
    (["verify", "sgemm/03_smem_tiling", "--param", "FOO=1"], r"no template parameter FOO here \(sgemm/03_smem_tiling has "
                                                              r"BLOCK\)"),
    (["verify", "sgemm/01_naive", "sgemm/03_smem_tiling", "--param", "FOO=1"], "sgemm/01_naive has BLOCK_X, BLOCK_Y"),
    (["sweep", "sgemm/03_smem_tiling", "--vary", "BLOCK"], r"--vary takes NAME=V1,V2,\.\.\. with integer values"),
    (["sweep", "sgemm/03_smem_tiling", "--vary", "BLOCK="], r"--vary takes NAME=V1,V2"),
    (["sweep", "sgemm/03_smem_tiling", "--vary", "BLOCK=8,x"], r"--vary takes NAME=V1,V2"),
    (["sweep", "sgemm/03_smem_tiling", "--vary", "FOO=8,16"], r"no template parameter FOO here"),
    (["resources", "sgemm/03_smem_tiling", "--arch", "garbage"], r"arch must look like 'sm_75'.*not 'garbage'"),
    (["verify", "double_buffer"], r"'double_buffer' names 2 steps, sgemm/09_double_buffer and hgemm/06_double_buffer; "
                                  r"give the full name"),
    (["verify", "sgemm/03_smem_tiling", "--backend", "cpu", "--param", "BLOCK=0"], r"BLOCK=0 is not allowed"),
])
def test_cli_errors_are_one_line_with_status_2(args, message, capsys):
    rc, out, err = run_cli(args, capsys)
    assert rc == 2 and "PASS" not in out
    assert re.search(message, err) and err.startswith("error: ") and err.count("\n") == 1, err


def test_cli_without_a_gpu_says_so_and_fails(capsys, monkeypatch):
    if gemmlab.gpu.available():
        pytest.skip("a GPU is here")
    for args in (["sweep", "sgemm/03_smem_tiling", "--vary", "BLOCK=8,16"], ["bench", "sgemm/01_naive"],
                 ["run", "sgemm/01_naive", "--size", "64"], ["bench", "fused/03_two_phase", "--size", "256"]):
        rc, out, err = run_cli(args, capsys)
        assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and "GPU" in err, (args, err)


def test_an_unwritable_cache_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(gemmlab.kernel, "_modules", {})  # compile again: the cache is where it fails
    rc, out, err = run_cli(["verify", "sgemm/01_naive", "--backend", "cpu"], capsys,
                           {"GEMMLAB_CACHE": str(blocked / "cache")}, monkeypatch)
    assert rc == 2 and err.count("\n") == 1 and "GEMMLAB_CACHE=" in err and "set GEMMLAB_CACHE to a folder" in err


def test_cli_in_a_child_process_prints_no_traceback():
    r = subprocess.run([sys.executable, "-m", "gemmlab", "resources", "sgemm/01_naive", "--arch", "garbage"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "GEMMLAB_BACKEND": "cpu"})
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_an_ambiguous_short_name_lists_the_candidates():
    with pytest.raises(ConfigError, match="sgemm/09_double_buffer and hgemm/06_double_buffer"):
        registry.get("double_buffer")
    assert registry.get("09_double_buffer").name == "sgemm/09_double_buffer"
    assert fusion.get("two_phase").name == "fused/03_two_phase"


# ------------------------------------------------------------------------------------------------
# Item 6: Inf stays Inf in the 3xTF32 steps (and every step is checked for it)
# ------------------------------------------------------------------------------------------------
TF32X3 = ["sgemm/12_tf32x3"]
FUSED_TF32X3 = ["fused/05_tf32x3", "fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3", "fused/08_tile_flags"]


@pytest.mark.parametrize("name", TF32X3)
def test_inf_stays_inf_in_the_3xtf32_gemm(name):
    k = gemmlab.step(name, backend="cpu")
    a, b = np.ones((20, 24), np.float32), np.ones((24, 18), np.float32)  # exact in TF32: small parts are 0
    a[3, 5], b[7, 2], b[9, 4] = np.inf, -np.inf, 0.0
    a[3, 9] = 0.0  # row 3 meets B's zero only where A has no Inf: finite apart from column 2
    got = k(a, b)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.isposinf(got[3, 0]) and np.isneginf(got[0, 2]) and np.isnan(got[3, 2])
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert verify(k).passed  # the "inf" case is among verify's defaults


@pytest.mark.parametrize("name", TF32X3)
def test_every_nan_payload_still_propagates(name):
    k = gemmlab.step(name, backend="cpu")
    a, b = np.ones((16, 16), np.float32), np.ones((16, 16), np.float32)
    bits = a.view(np.uint32)
    bits[1, 1], bits[2, 2], bits[3, 3] = 0x7FFFFFFF, 0x7F800001, 0xFFC00000  # the GPU's NaN, a signalling one
    got = k(a, b)
    assert np.isnan(got[[1, 2, 3]]).all() and np.isfinite(np.delete(got, [1, 2, 3], axis=0)).all()


@pytest.mark.parametrize("name", FUSED_TF32X3)
def test_inf_stays_inf_in_the_3xtf32_fused_steps(name):
    kern = fusion.step(name, backend="cpu")
    rng = np.random.default_rng(5)
    a, b, c = (rng.integers(-2, 3, size=s).astype(np.float32) for s in ((34, 36), (36, 36), (36, 36)))
    a[7, 3], c[11, 5] = np.inf, -np.inf  # small integers and zeros: 3xTF32's small parts are 0
    got = np.asarray(kern(a, b, c)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = fusion.reference(a, b, c)
    for kind in (np.isposinf, np.isneginf, np.isnan):
        np.testing.assert_array_equal(kind(got), kind(want), err_msg=kind.__name__)
    assert np.isinf(got).any() and np.isfinite(got).any()
    assert fusion.check(kern, cases=[fusion.Case("inf", *kern.step.fit((34, 33, 36, 35)))]).passed


def test_the_checks_hold_every_step_to_float64_on_inf():
    from gemmlab import check
    assert any(c.kind == "inf" for c in check.default_cases({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 8}))
    assert any(c.kind == "inf" for c in fusion.default_cases())
    # the comparison itself: the same Inf passes, NaN for Inf or the other sign does not
    a, b = np.array([[np.inf, 1.0]], np.float32), np.array([[1.0], [1.0]], np.float32)
    assert not check.compare(np.array([[np.inf]], np.float32), a, b, "float32")[0].any()
    assert check.compare(np.array([[np.nan]], np.float32), a, b, "float32")[0].all()
    assert check.compare(np.array([[-np.inf]], np.float32), a, b, "float32")[0].all()


def test_every_3xtf32_split_is_three_instructions_and_its_epilogue_repairs():
    """Each step keeps its own split_tf32, unclamped (a clamp in the K loop cost 10-35%: lab/inf-clamp), and
    repairs the NaN outputs an Inf leaves with common.cuh's any_nan / repair_nans, once per tile's epilogue."""
    common = (ROOT / "kernels" / "common.cuh").read_text()
    assert "tf32_big" not in common and common.count("void repair_nans(") == 1
    for name in TF32X3 + FUSED_TF32X3:
        text = (ROOT / "kernels" / f"{name}.cu").read_text()
        assert "big = tf32_round(x);" in text and "fminf" not in text and "tf32_big" not in text, name
        assert text.count("repair_nans(") == 1 and text.count("any_nan<") == 1, name


@pytest.mark.parametrize("name", TF32X3 + FUSED_TF32X3)
def test_inf_among_values_that_are_not_tf32_and_a_finite_input_that_rounds_to_inf(name):
    """The repair recomputes in fp32, so Inf needs no TF32-exact partners (Inf x a value with a nonzero small part),
    and FLT_MAX, which the split's rounding makes Inf, still gives its finite product."""
    rng = np.random.default_rng(11)
    if name in TF32X3:
        a, b = rng.uniform(-1, 1, (20, 24)).astype(np.float32), rng.uniform(-1, 1, (24, 18)).astype(np.float32)
        a[3, 5], a[9, 7], b[7, 2] = np.inf, np.finfo(np.float32).max, 0.25
        got = gemmlab.step(name, backend="cpu", BLOCK_M=32, BLOCK_N=32, WARP_M=16, WARP_N=16, BLOCK_K=8)(a, b)
        bad = gemmlab.check.compare(got, a, b, "float32")[0]
        assert np.isinf(got[3]).all() and np.isfinite(got[9]).all()
    else:
        kern = fusion.step(name, backend="cpu")
        a, b, c = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((34, 36), (36, 36), (36, 36)))
        a[7, 3], a[9, 7] = np.inf, np.finfo(np.float32).max  # row 9 finite (T near 3e35)
        b[7] /= 1024
        got = np.asarray(kern(a, b, c))
        bad = fusion.compare(got, a, b, c)[0]
        assert not np.isfinite(got[7]).any() and np.isfinite(got[9]).all()  # row 7: Inf of both signs in T
    assert not bad.any()


# ------------------------------------------------------------------------------------------------
# Item 7: Kernel.run() checks its arrays once per layout
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernel():
    return gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)


@pytest.mark.parametrize("make, match", [
    (lambda: (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.zeros((3, 5))), "C is float64"),
    (lambda: (np.ones((3, 4)), np.ones((4, 5), np.float32), np.zeros((3, 5), np.float32)), "A is float64"),
    (lambda: (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.zeros((4, 5), np.float32)),
     r"C is 4x5 but A \(3x4\) times B \(4x5\) is 3x5"),
    (lambda: (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.zeros((6, 5), np.float32)[::2]),
     "C is not C-contiguous"),
    (lambda: (np.ones((3, 4), np.float32), np.ones((6, 5), np.float32), np.zeros((3, 5), np.float32)),
     "shapes do not match: A is 3x4 and B is 6x5"),
    (lambda: (np.ones((4, 3), np.float32).T, np.ones((4, 5), np.float32), np.zeros((3, 5), np.float32)),
     "A is not C-contiguous"),
])
def test_run_rejects_wrong_arrays(kernel, make, match):
    a, b, c = make()
    with pytest.raises(InputError, match=match):
        kernel.run(a, b, c)
    good_call_works()


def test_run_checks_once_per_layout(kernel, monkeypatch):
    a, b, c = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.zeros((3, 5), np.float32)
    calls = []
    original = type(kernel).check_output
    monkeypatch.setattr(type(kernel), "check_output", lambda self, *x: calls.append(1) or original(self, *x))
    kernel._checked.clear()
    for _ in range(3):
        kernel.run(a, b, c)
    kernel.run(a.copy(), b.copy(), np.zeros_like(c))  # same layout: no new check
    assert len(calls) == 1 and (c == 4).all()
    kernel.run(np.ones((2, 4), np.float32), b, np.zeros((2, 5), np.float32))
    assert len(calls) == 2


def test_fused_run_rejects_a_wrong_output():
    k = fusion.step("fused/03_two_phase", backend="cpu")
    a = np.ones((8, 8), np.float32)
    with pytest.raises(InputError, match=r"E is 9x8 but A B C is 8x8"):
        k.run(a, a, a, np.zeros((9, 8), np.float32))
    with pytest.raises(InputError, match="E is float64"):
        k.run(a, a, a, np.zeros((8, 8)))


# ------------------------------------------------------------------------------------------------
# Item 8: 32-bit indices
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sgemm/01_naive", "sgemm/12_tf32x3", "hgemm/07_cp_async"])
def test_gemm_shapes_past_32_bit_indices_are_rejected(name):
    st = registry.get(name)
    with pytest.raises(ShapeError, match=r"C is 50000 x 50000 = 2500000000 elements, more than the 2\^31 - 1"):
        registry.check_shape(st, 50000, 50000, 8)
    with pytest.raises(ShapeError, match=r"A is 3 x 1000000000 = 3000000000 elements"):
        registry.check_shape(st, 3, 8, 10**9)
    registry.check_shape(st, 46340, 46340, 8)  # 2,147,395,600 elements: fits


def test_counters_reject_them_too():
    k = gemmlab.step("sgemm/01_naive", backend="cpu")
    with pytest.raises(ShapeError, match="32-bit indices"):
        k.counters(65536, 65536, 4)


def test_fused_steps_use_the_same_check():
    k = fusion.step("fused/03_two_phase", backend="cpu")
    with pytest.raises(ShapeError, match=r"T = A B is 60000 x 60000"):
        k.check_inputs(np.zeros((60000, 1), np.float32), np.zeros((1, 60000), np.float32), np.zeros((60000, 1), np.float32))
