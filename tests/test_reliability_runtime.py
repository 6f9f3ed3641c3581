"""Issue 55, a hostile user's third round, the runtime's and the command line's classes: records that survive a full
disk and two writers (1), inputs a kernel cannot change (4), an emulator that dies with Python (5), cache entries
checked before they are trusted (7), time-outs (8), environment variables read in one place (9), options that mean
nothing (12), advice that applies (13), read-only outputs (14), and errors instead of uncaught exceptions (15)."""
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gemmlab
from gemmlab import cpu, fusion, kernel, nvrtc, registry
from gemmlab.__main__ import main
from gemmlab.errors import BackendError, ConfigError, InputError, KernelError, RecordsError, VerificationError
from gemmlab.measure import results

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_error(rc, err, pattern):
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert re.search(pattern, err), err


# ------------------------------------------------------------------------------------------------
# 1. Records: one error naming the file; saved whole or not at all, under a lock
# ------------------------------------------------------------------------------------------------
RECORD = {"step": "sgemm/01_naive", "params": {}, "dtype": "float32", "m": 64, "n": 64, "k": 64, "median_s": 1e-5,
          "gpu": "Test GPU", "date": "2026-01-01"}
FUSED = {"step": "fused/03_two_phase", "params": {}, "kind": "benchmark", "m": 64, "k": 64, "l": 64, "n": 64,
         "median_s": 1e-5, "gpu": "Test GPU", "date": "2026-01-01"}
BAD_FILES = {
    "cut short": (b'[{"gpu": "Test GPU", "step"', r"not JSON at line 1, column \d+"),
    "empty": (b"", r"it is empty"),
    "binary": (b"\x89PNG\r\n\x1a\n\xff\xfe", r"not UTF-8 text"),
    "an object": (b'{"gpu": "Test GPU"}', r"a JSON dict where a list of records belongs"),
    "a list of strings": (b'["gpu"]', r"record 0 is a JSON str, not an object"),
    "no step": (b'[{"gpu": "Test GPU", "m": 64}]', r"record 0 has no 'step'"),
    "m a string": (b'[{"gpu": "Test GPU", "step": "x", "m": "64"}]', r"record 0 has m='64', not a int"),
    "old schema without times": (b'[{"gpu": "Test GPU", "impl": "x", "m": 64, "speedup": 2}]', r"record 0 has the old"),
}


@pytest.fixture
def records_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    return tmp_path


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
@pytest.mark.parametrize("store", ["gemm", "fused"])
def test_a_bad_records_file_is_one_error_naming_it_and_saving_leaves_it_alone(records_dir, case, store):
    content, why = BAD_FILES[case]
    path = records_dir / ("test-gpu.json" if store == "gemm" else "test-gpu.fusion.json")
    path.write_bytes(content)
    load = (lambda: results.load("Test GPU")) if store == "gemm" else (lambda: fusion.load("Test GPU"))
    save = (lambda: results.save([RECORD])) if store == "gemm" else (lambda: fusion.save([FUSED]))
    calls = [load, save] + ([results.gpus] if store == "gemm" else [])
    for call in calls:
        with pytest.raises(RecordsError) as e:
            call()
        text = str(e.value)
        assert re.search(why, text) and path.name in text and "\n" not in text, text
        assert "restore it" in text
    assert path.read_bytes() == content  # a save never writes over records it could not read


def test_records_round_trip_and_other_gpus_files_still_load(records_dir):
    results.save([RECORD])
    fusion.save([FUSED])
    assert results.load("Test GPU")[0]["median_s"] == 1e-5 and fusion.load("Test GPU")[0]["kind"] == "benchmark"
    assert not list(records_dir.glob(".*.tmp")) and not list(records_dir.glob("*.lock"))  # nothing left beside them


FULL_DISK = r"""
import json, pathlib, resource, signal, sys
from gemmlab.measure import results
from gemmlab.errors import GemmlabError
results.RESULTS = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
many = [dict(json.loads(sys.argv[2]), m=m) for m in range(1, 200)]
try:
    results.save(many)
except GemmlabError as e:
    print(type(e).__name__, e)
"""


def test_a_full_disk_leaves_the_old_records_as_they_were(records_dir):
    results.save([RECORD])
    before = (records_dir / "test-gpu.json").read_bytes()
    r = subprocess.run([sys.executable, "-c", FULL_DISK, str(records_dir), json.dumps(RECORD)], capture_output=True,
                       text=True, env=ENV, cwd=ROOT, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("RecordsError could not write the records to ") and "left as it was" in r.stdout
    assert (records_dir / "test-gpu.json").read_bytes() == before
    assert results.load("Test GPU") == [dict(RECORD, source="recorded")]
    assert not list(records_dir.glob(".*.tmp"))


def _save_many(worker: int, rounds: int) -> None:
    for i in range(rounds):
        results.save([dict(RECORD, m=1000 * worker + i)])


def test_two_processes_saving_at_once_keep_every_record(records_dir):
    ctx = multiprocessing.get_context("fork")  # the children see the patched RESULTS
    workers, rounds = 4, 25
    procs = [ctx.Process(target=_save_many, args=(w, rounds)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers  # was: a reader met a file half written by another
    got = {r["m"] for r in results.load("Test GPU")}
    assert got == {1000 * w + i for w in range(workers) for i in range(rounds)}, f"{workers * rounds - len(got)} lost"


# ------------------------------------------------------------------------------------------------
# 4. The CPU backend never hands a kernel's writes to its const inputs back to the caller
# ------------------------------------------------------------------------------------------------
ZERO_GEMM = ("C[row * N + col] = acc;",
             "for (int k = 0; k < K; ++k) { const_cast<float*>(A)[row * K + k] = 0; const_cast<float*>(B)[k * N + col] = 0; }"
             " C[row * N + col] = 0;")
ZERO_FUSED = ("E[row * N + n] = acc;",
              "E[row * N + n] = 0; for (int k = 0; k < K; ++k) const_cast<float*>(A)[row * K + k] = 0;")


def test_a_kernel_that_zeroes_its_inputs_fails_the_check_and_the_inputs_stay():
    k = gemmlab.kernel.edited("sgemm/01_naive", *ZERO_GEMM, backend="cpu")
    with pytest.raises(VerificationError, match="FAIL: sgemm/01_naive on the identity input"):
        gemmlab.verify(k)
    a, b = np.ones((5, 3), np.float32), np.full((3, 4), 2, np.float32)
    assert not k(a, b).any()
    assert (a == 1).all() and (b == 2).all()  # as on a GPU: the caller's arrays are not the kernel's


def test_a_fused_kernel_that_zeroes_its_input_fails_the_check():
    k = fusion.step("fused/01_naive_row", backend="cpu", source=kernel_text("fused/01_naive_row", *ZERO_FUSED))
    with pytest.raises(VerificationError, match="FAIL: fused/01_naive_row on the random input"):
        gemmlab.verify(k, cases=[fusion.Case("random", 33, 17, 20, 9)])  # the reference from the zeroed A was 0
    a, b, c = (np.full((4, 4), v, np.float32) for v in (1, 2, 3))
    e = np.zeros((4, 4), np.float32)
    k.run(a, b, c, e)
    assert (a == 1).all() and (b == 2).all() and (c == 3).all()


def kernel_text(name, old, new):
    from gemmlab.runtime.source import kernel_path

    text = kernel_path(registry.lookup(name).file).read_text()
    assert old in text
    return text.replace(old, new)


def test_a_raw_launch_still_writes_every_array_back():
    """cpu.launch (the PTX twins' tests, the chapters' tables) updates its arrays in place, as before."""
    source = ('__global__ void twice(int n, float* x, float* y) {\n'
              '    int i = threadIdx.x; if (i < n) { x[i] *= 2; y[i] = x[i] + 1; } }\n')
    module = cpu.compile_kernel(source, "twice", label="twice")
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    cpu.launch(module, 1, 32, [np.int32(4), x, y])
    assert x.tolist() == [0, 2, 4, 6] and y.tolist() == [1, 3, 5, 7]
    x = np.arange(4, dtype=np.float32)
    cpu.launch(module, 1, 32, [np.int32(4), x, y], inputs=(1,))
    assert x.tolist() == [0, 1, 2, 3] and y.tolist() == [1, 3, 5, 7]


# ------------------------------------------------------------------------------------------------
# 5. Killing Python ends the emulator's child, and its data goes with it
# ------------------------------------------------------------------------------------------------
SPIN = ('#include "common.cuh"\n'
        'template <int BLOCK> __global__ void sgemm_smem_tiling(int M, int N, int K, const float* A,\n'
        '                                                    const float* B, float* C) {\n'
        '    volatile int x = 1;\n'
        '    while (x) { x = x + 2; }\n'
        '}\n')
SPIN_SCRIPT = """
import numpy as np, sys, gemmlab
k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=sys.argv[1], BLOCK=8)
print("launching", flush=True)
k(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), timeout=600)
"""


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")
def test_killing_python_ends_the_emulator_and_leaves_no_data():
    gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=SPIN, BLOCK=8)  # compiled here: the child only runs it
    py = subprocess.Popen([sys.executable, "-c", SPIN_SCRIPT, SPIN], stdout=subprocess.PIPE, text=True, env=ENV,
                          cwd=ROOT)
    child = None
    try:
        assert py.stdout.readline().strip() == "launching"
        deadline = time.time() + 60
        argv = None
        while not argv and time.time() < deadline:  # the emulator's binary (.bin), not a passing readelf
            for pid in children(py.pid):
                try:
                    found = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue  # a helper process that has already ended
                if found and found[0].endswith(b".bin"):
                    child, argv = pid, found
            time.sleep(0.2)
        assert child, "the emulator never started"
        data = [Path(a.decode()) for a in argv[1:3]]
        py.send_signal(signal.SIGKILL)
        py.wait(30)
        deadline = time.time() + 10
        while alive(child) and time.time() < deadline:
            time.sleep(0.2)
        assert not alive(child), "the emulator spins on after Python was killed"
        for path in data:
            if not str(path).startswith("/proc/"):
                assert not path.exists(), f"{path} was left behind"
    finally:
        py.kill()
        if child and alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_child_data_lives_in_memory_files_that_vanish_with_their_processes(monkeypatch):
    seen = []
    real = subprocess.run

    def spy(cmd, *args, **kwargs):
        seen.append(list(cmd))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(cpu.subprocess, "run", spy)
    good = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)
    a = np.ones((3, 3), np.float32)
    np.testing.assert_allclose(good(a, a), a @ a)
    if hasattr(os, "memfd_create"):
        assert all(arg.startswith("/proc/self/fd/") for arg in seen[-1][1:3]), seen[-1]


# ------------------------------------------------------------------------------------------------
# 7. A damaged cache entry is built again, never trusted
# ------------------------------------------------------------------------------------------------
def test_complete_elf_tells_a_whole_file_from_a_damaged_one(tmp_path):
    whole = Path("/bin/true").resolve()
    data = whole.read_bytes()
    assert cpu.complete_elf(whole)
    for name, content in (("empty", b""), ("half", data[:len(data) // 2]), ("most", data[:-1]), ("text", b"hello" * 99),
                          ("header only", data[:64])):
        (tmp_path / name).write_bytes(content)
        assert not cpu.complete_elf(tmp_path / name), name
    assert not cpu.complete_elf(tmp_path / "missing")


def test_a_damaged_cache_entry_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(kernel, "_modules", {})
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((4, 5), np.float32)

    def fresh():
        kernel._modules.clear()
        return gemmlab.step("sgemm/01_naive", backend="cpu", BLOCK_X=8, BLOCK_Y=8)

    k = fresh()
    exe = k.module.executable
    obj, = (tmp_path / "cpu").glob("runtime-*.o")
    for damage in ("empty", "half"):
        size = exe.stat().st_size
        exe.write_bytes(b"" if damage == "empty" else exe.read_bytes()[:size // 2])
        np.testing.assert_allclose(fresh()(a, b), a @ b)  # was: OSError, Exec format error
        assert exe.stat().st_size == size
    obj.write_bytes(b"")  # the runtime's object: was a link error blaming the emulator
    exe.unlink()
    np.testing.assert_allclose(fresh()(a, b), a @ b)
    assert cpu.complete_elf(obj)
    exe.write_bytes(exe.read_bytes()[:1000])  # damaged after this process compiled it
    np.testing.assert_allclose(k(a, b), a @ b)


# ------------------------------------------------------------------------------------------------
# 8. Time-outs too long to wait for are refused with a message
# ------------------------------------------------------------------------------------------------
def test_a_huge_time_out_is_refused_with_a_message(monkeypatch):
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)
    a = np.ones((4, 4), np.float32)
    for bad in (1e10, 10**12, "1e10"):
        with pytest.raises(ConfigError, match=r"timeout=.* is longer than the CPU backend can wait; give at most "
                                              r"1000000 seconds"):
            k(a, a, timeout=bad)
    with pytest.raises(ConfigError, match="timeout='1e400' is not a time-out"):
        fusion.step("fused/03_two_phase", backend="cpu")(a, a, a, timeout="1e400")
    monkeypatch.setenv("GEMMLAB_CPU_TIMEOUT", "1e10")
    with pytest.raises(ConfigError, match=r"GEMMLAB_CPU_TIMEOUT='1e10' is longer than the CPU backend can wait"):
        k(a, a)
    monkeypatch.delenv("GEMMLAB_CPU_TIMEOUT")
    assert cpu.timeout_for(40000 ** 3) <= 1e6  # the default for a huge problem is capped too
    np.testing.assert_allclose(k(a, a, timeout=1e6), a @ a)


# ------------------------------------------------------------------------------------------------
# 9. Environment variables: read in gemmlab/runtime/settings.py only, checked, named in their errors
# ------------------------------------------------------------------------------------------------
def test_only_settings_reads_the_environment():
    readers = []
    for path in sorted((ROOT / "gemmlab").rglob("*.py")):
        if path.name == "settings.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"os\.environ\.get|os\.environ\[|os\.getenv|getenv\(|environ\.copy", line):
                readers.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not readers, "\n".join(readers)


def test_the_readme_lists_every_variable_in_its_last_section():
    from gemmlab.runtime import settings

    readme = (ROOT / "README.md").read_text()
    last = readme[readme.rindex("\n## "):]
    assert last.startswith("\n## Environment variables")
    names = [v for k, v in vars(settings).items() if k.isupper() and isinstance(v, str) and v.isupper()]
    names += list(settings.CUDA_ROOTS)
    assert len(names) >= 10
    for name in names:
        assert f"`{name}`" in last, name


@pytest.mark.skipif(gemmlab.gpu.available(), reason="a GPU is here")
def test_gemmlab_backend_gpu_is_honoured_by_verify_without_a_gpu(capsys, monkeypatch):
    monkeypatch.setenv("GEMMLAB_BACKEND", "gpu")
    rc, out, err = cli(["verify", "sgemm/01_naive"], capsys)
    one_line_error(rc, err, r"GEMMLAB_BACKEND=gpu asks for the GPU backend, but CuPy sees no CUDA GPU here; set "
                            r"GEMMLAB_BACKEND=cpu")
    assert "PASS" not in out
    with pytest.raises(BackendError, match="GEMMLAB_BACKEND=gpu"):
        gemmlab.verify("sgemm/01_naive")
    rc, out, err = cli(["verify", "sgemm/01_naive", "--backend", "cpu"], capsys)  # the option still wins
    assert rc == 0 and out.startswith("PASS")


def test_an_unknown_backend_names_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("GEMMLAB_BACKEND", "tpu")
    rc, out, err = cli(["verify", "sgemm/01_naive"], capsys)
    one_line_error(rc, err, r"GEMMLAB_BACKEND='tpu' is not a backend; set it to 'gpu' or 'cpu'")
    monkeypatch.setenv("GEMMLAB_BACKEND", "cpu")
    assert gemmlab.step("sgemm/01_naive").backend == "cpu"


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", "99999999"])
def test_a_bad_stack_size_names_the_variable(value, monkeypatch, capsys):
    monkeypatch.setenv("GEMMLAB_CPU_STACK_KB", value)
    rc, out, err = cli(["verify", "sgemm/01_naive", "--backend", "cpu"], capsys)
    one_line_error(rc, err, rf"GEMMLAB_CPU_STACK_KB='{re.escape(value)}' is not a stack size; set it to a whole number "
                            rf"of KB from 16 to 65536")


def test_a_good_stack_size_reaches_the_emulator(monkeypatch):
    big = ('#include "common.cuh"\ntemplate <int BLOCK> __global__ void sgemm_smem_tiling(int M, int N, int K, '
           'const float* A,\n const float* B, float* C) {\n volatile float big[40000];\n big[threadIdx.x] = 1;\n'
           ' if (threadIdx.x == 0 && blockIdx.x == 0) C[0] = big[0];\n}\n')  # 160 KB of locals
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", source=big, BLOCK=8)
    a = np.ones((2, 2), np.float32)
    with pytest.raises(KernelError, match="overflowed its 64 KB stack"):
        k(a, a)
    monkeypatch.setenv("GEMMLAB_CPU_STACK_KB", " 256 ")
    assert k(a, a)[0, 0] == 1


def test_a_wrong_nvrtc_library_names_the_variable(monkeypatch, tmp_path):
    nvrtc._nvrtc.cache_clear()
    try:
        monkeypatch.setenv("GEMMLAB_NVRTC_LIB", str(tmp_path / "nothing.so"))
        with pytest.raises(ConfigError, match=r"GEMMLAB_NVRTC_LIB='.*nothing.so' is not a file; point it at a libnvrtc"):
            nvrtc.available()
        libc = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6")
                    if os.path.exists(p))
        monkeypatch.setenv("GEMMLAB_NVRTC_LIB", libc)
        with pytest.raises(ConfigError, match=r"GEMMLAB_NVRTC_LIB='.*libc.so.6' loads, but it is not NVRTC"):
            gemmlab.instance("sgemm/01_naive").resources("sm_75")
        (tmp_path / "junk.so").write_text("not a library")
        monkeypatch.setenv("GEMMLAB_NVRTC_LIB", str(tmp_path / "junk.so"))
        with pytest.raises(ConfigError, match=r"GEMMLAB_NVRTC_LIB='.*junk.so' could not be loaded"):
            nvrtc.version()
    finally:
        monkeypatch.delenv("GEMMLAB_NVRTC_LIB")
        nvrtc._nvrtc.cache_clear()


def test_a_cache_under_home_expands_the_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEMMLAB_CACHE", "~/gemmlab-cache")
    monkeypatch.chdir(tmp_path)
    assert cpu._cache_dir() == tmp_path / "home" / "gemmlab-cache" / "cpu"
    assert not (tmp_path / "~").exists()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "a-file"))
    with pytest.raises(ConfigError, match="GEMMLAB_CACHE='.*a-file' is a file, not a folder"):
        cpu._cache_dir()


# ------------------------------------------------------------------------------------------------
# 12 and 13. Options that mean nothing are refused; advice names what the command takes
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["verify", "sgemm/03_smem_tiling", "--backend", "cpu", "--param", "BLOCK=8", "--param", "BLOCK=16"],
     r"--param BLOCK is given twice \(BLOCK=8 and BLOCK=16\); give each parameter once"),
    (["resources", "sgemm/01_naive", "--arch", ""], r"arch must look like 'sm_75', 'sm_80' or 'sm_90', not ''"),
    (["sass", "fused/03_two_phase", "--arch", ""], r"arch must look like 'sm_75'"),
    (["resources", "sgemm/01_naive", "--backend", "gpu"], r"resources compiles with NVRTC for --arch and runs "
                                                          r"nothing, so --backend gpu does not apply"),
    (["sass", "sgemm/01_naive", "--backend", "cpu"], r"sass compiles with NVRTC .* --backend cpu does not apply"),
    (["run", "sgemm/01_naive", "--size", "0"], r"--size=0 is not a problem size; give a whole number of at least 1"),
    (["run", "sgemm/01_naive", "--size", "-64"], r"--size=-64 is not a problem size"),
])
def test_meaningless_options_are_refused(args, message, capsys):
    rc, out, err = cli(args, capsys)
    one_line_error(rc, err, message)
    assert out == ""


@pytest.mark.skipif(gemmlab.gpu.available(), reason="a GPU is here")
def test_run_without_a_gpu_gives_advice_the_command_line_can_follow(capsys):
    rc, out, err = cli(["run", "sgemm/01_naive", "--size", "64"], capsys)
    one_line_error(rc, err, r"run launches sgemm/01_naive once on a GPU .* CuPy sees none here; on the CPU emulator, "
                            r"check it with: python -m gemmlab verify sgemm/01_naive --backend cpu")
    assert "backend='cpu'" not in err


@pytest.mark.parametrize("grid", [0, 1, 4])
def test_a_grid_for_a_step_that_sets_its_own_is_refused(grid):
    k = fusion.step("fused/01_naive_row", backend="cpu")
    a = np.ones((8, 8), np.float32)
    e = np.zeros_like(a)
    with pytest.raises(ConfigError, match=rf"grid={grid} applies to a persistent step only .* fused/01_naive_row sets "
                                          rf"its own grid"):
        k.run(a, a, a, e, grid=grid)
    assert not e.any()
    k.run(a, a, a, e)
    np.testing.assert_allclose(e, a @ a @ a)


@pytest.mark.parametrize("size", [-64, 0, 1.5, "64", True])
def test_a_size_that_is_no_size_is_refused_by_the_explorer(size):
    from gemmlab.chapters import explore

    with pytest.raises(ConfigError, match=re.escape(f"size={size!r} is not a problem size")):
        explore.report("sgemm/03_smem_tiling", size=size, time=False)


# ------------------------------------------------------------------------------------------------
# 14. A read-only output is refused, not left unwritten
# ------------------------------------------------------------------------------------------------
def test_a_read_only_output_is_refused():
    a = np.ones((4, 4), np.float32)
    c = np.zeros((4, 4), np.float32)
    c.flags.writeable = False
    for k, args, name in ((gemmlab.step("sgemm/01_naive", backend="cpu"), (a, a), "C"),
                          (fusion.step("fused/01_naive_row", backend="cpu"), (a, a, a), "E"),
                          (fusion.step("fused/03_two_phase", backend="cpu"), (a, a, a), "E")):
        with pytest.raises(InputError, match=rf"{name} is read-only \({name}.flags.writeable is False\), but the kernel "
                                             rf"writes its result there"):
            k.run(*args, c)
    ro = a.copy()
    ro.flags.writeable = False  # read-only inputs are fine
    np.testing.assert_allclose(gemmlab.step("sgemm/01_naive", backend="cpu")(ro, ro), a @ a)


# ------------------------------------------------------------------------------------------------
# 15. Errors, not uncaught exceptions
# ------------------------------------------------------------------------------------------------
HUGE_COUNTERS = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
from gemmlab.__main__ import main
sys.exit(main(["counters", "sgemm/01_naive", "--size", "40000", "40000", "40000"]))
"""


def test_counters_of_a_problem_too_big_for_memory_is_a_message():
    r = subprocess.run([sys.executable, "-c", HUGE_COUNTERS], capture_output=True, text=True, env=ENV, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert re.fullmatch(r"error: counters of sgemm/01_naive at M=40000, N=40000, K=40000 needs about [\d.]+ GiB of "
                        r"memory, more than the [\d.]+ GiB available here; .* count at 256 or 1024\.\n", r.stderr)


def test_a_launch_too_big_for_memory_is_a_message(monkeypatch):
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=8)
    a = np.ones((64, 64), np.float32)
    monkeypatch.setattr(cpu, "available_memory", lambda: 10_000)  # the emulator copies 3 x 16 KB, twice
    with pytest.raises(InputError, match=r"sgemm/03_smem_tiling<BLOCK=8> on the CPU emulator needs about 0.0 GiB of "
                                         r"memory, more than the 0.0 GiB available here; .*smaller matrices"):
        k(a, a)
    monkeypatch.undo()
    np.testing.assert_allclose(k(a, a), a @ a)
    assert cpu.available_memory() > 0


@pytest.mark.parametrize("n", [-5, 0, 2.5])
def test_the_fused_slider_report_refuses_a_size_that_is_no_size(n):
    with pytest.raises(ConfigError, match=re.escape(f"n={n!r} is not a problem size")):
        fusion.slider_report("fused/03_two_phase", n=n)


def test_a_closed_pipe_ends_the_listing_without_a_traceback():
    read, write = os.pipe()
    p = subprocess.Popen([sys.executable, "-m", "gemmlab", "steps"], stdout=write, stderr=subprocess.PIPE, env=ENV,
                         cwd=ROOT, text=True)
    os.close(write)
    os.close(read)  # the reader is gone before the first line: `steps | head -0`
    err = p.communicate(timeout=120)[1]
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert p.returncode == 141
