"""The Colab lane (issue 40): every chapter in book/, top to bottom, in an environment pinned to a Colab runtime.

    python3 tools/colab/lane.py [NOTEBOOK ...] [--jobs N] [--keep] [--warm-cache] [--python PY]   (make colab-lane)

What it does, in order:
1. `.venv-colab` at the repository root, made with Python 3.12 (Colab's) where one is found, holds
   tools/colab/requirements-colab.txt: Colab's NumPy, matplotlib, ipywidgets, CuPy and the kernel machinery
   (IPython 7, ipykernel 6, jupyter_client 7, nbclient), and no myst-nb, no jupyter-book and no gemmlab. It is
   reused while the requirements and the interpreter are unchanged; gemmlab is uninstalled from it every run.
2. A git repository snapshot of the working tree as it is on disk (uncommitted and untracked files included,
   ignored ones not) in a temporary folder: GEMMLAB_COURSE_URL points there (file://), so the chapters' set-up
   cell clones and pip-installs what is on disk, as it clones the course from GitHub on Colab.
3. Each notebook runs with nbclient on a kernel that is `.venv-colab/bin/python -m ipykernel_launcher`, in a
   fresh folder of its own (Colab's /content: no checkout beside it), with a stand-in `google.colab` on its path
   (tools/colab/stub), GEMMLAB_BACKEND=cpu and GEMMLAB_COURSE_DIR=<that folder>/gemmlab-course. Chapters run
   --jobs at a time (default 2); the set-up cells run one at a time, so the first one installs the course into
   the venv and the others import that copy. A fresh emulator cache (GEMMLAB_CACHE), as on a new runtime,
   unless --warm-cache. The kernel's replies are polled a second at a time (polled_in_slices: with Colab's
   jupyter_client 7, nbclient otherwise sat out a widget cell's whole timeout now and then).
4. Checks: no cell raised and no output is an error (or a traceback on stderr); `gemmlab`, its kernels/ and
   results/ came from the venv's site-packages and no module from the checkout was imported; the set-up cell
   saw Colab (ON_COLAB); the pinned versions are the ones imported; myst_nb and jupyter_book are absent.

Prints each chapter's time and its slowest cells; exits 1 naming the chapter, the cell and the error when any
check fails. The executed notebooks and logs stay in the temporary folder on failure (or with --keep).
The driver runs under .venv-colab's own python (nbclient and jupyter_client as Colab has them); this file's top
half needs only the standard library.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV = ROOT / ".venv-colab"
REQUIREMENTS = HERE / "requirements-colab.txt"
STUB = HERE / "stub"
STAMP = VENV / ".requirements-colab.stamp"
COLAB_PYTHON = (3, 12)  # the Python of the Colab runtime that requirements-colab.txt lists
MARK = "GEMMLAB-COLAB-LANE "
# Rough CPU times (s) from a lane run, only to start the longest chapters first; unknown ones run last.
EXPECTED_S = {"07b_tensor_core_ladder": 43, "07_tensor_cores": 39, "06_async_prefetch": 25, "02_coalescing": 23,
              "08_fusion": 22, "04_register_tiling": 15, "05_bank_conflicts": 15, "09_fusion_hopper": 14,
              "03_smem_tiling": 13, "01_gpu_hardware": 11}
# Environment variables of the caller that must not reach the venv or the kernels.
DROP_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV", "PIP_TARGET",
            "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_REQUIRE_VIRTUALENV", "MPLBACKEND", "IPYTHONDIR",
            "JUPYTER_PATH", "JUPYTER_CONFIG_DIR")


def log(*args) -> None:
    print("[colab-lane]", *args, flush=True)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in DROP_ENV and not k.startswith("GEMMLAB_")}


# ----------------------------------------------------------------------------------------------- 1. the venv

def python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys, venv, ensurepip; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60, env=clean_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def find_python(asked: str | None) -> str:
    """--python (or GEMMLAB_COLAB_PYTHON) if given; else a Python 3.12 (Colab's), else this interpreter."""
    if asked:
        if python_version(asked) is None:
            sys.exit(f"[colab-lane] {asked} is not a working Python with venv")
        return asked
    want = "python%d.%d" % COLAB_PYTHON
    candidates = [shutil.which(want), *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{want[6:]}*/bin/{want}"))),
                  f"/usr/bin/{want}", f"/usr/local/bin/{want}"]
    for python in filter(None, candidates):
        if python_version(python) == COLAB_PYTHON:
            return python
    log(f"no working {want} found (Colab's Python); using {sys.executable}, Python {sys.version.split()[0]}")
    return sys.executable


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_venv(python: str) -> None:
    """Create .venv-colab if missing or made by another Python; install the pins if they changed since."""
    want = python_version(python)
    have = python_version(str(venv_python())) if venv_python().exists() else None
    if have != want:
        if VENV.exists():
            log(f"re-creating {VENV.name}: it has Python {have}, the lane uses {want}")
            shutil.rmtree(VENV)
        log(f"creating {VENV.name} with {python} (Python {'.'.join(map(str, want))})")
        subprocess.run([python, "-m", "venv", str(VENV)], check=True, env=clean_env())
    stamp = hashlib.sha256(REQUIREMENTS.read_bytes() + repr(want).encode()).hexdigest()
    if not STAMP.exists() or STAMP.read_text().strip() != stamp:
        log(f"installing {REQUIREMENTS.relative_to(ROOT)} into {VENV.name}")
        start = time.time()
        subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True, env=clean_env())
        STAMP.write_text(stamp + "\n")
        log(f"installed in {time.time() - start:.0f} s")
    # The chapters must install the course themselves, as on Colab.
    shown = subprocess.run([str(venv_python()), "-m", "pip", "show", "-q", "gemmlab"], capture_output=True,
                           env=clean_env())
    if shown.returncode == 0:
        subprocess.run([str(venv_python()), "-m", "pip", "uninstall", "-y", "-q", "gemmlab"], check=True,
                       env=clean_env())


# ------------------------------------------------------------------------------------------- 2. the snapshot

def git(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=colab-lane", "-c", "user.email=colab-lane@localhost",
                           "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True, **kw)


def snapshot(dest: Path) -> str:
    """A one-commit repository at `dest` holding the working tree's files as on disk: tracked ones (with their
    uncommitted changes, less the deleted ones) and untracked ones that .gitignore does not ignore."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout.split(b"\0")
    files = sorted({p.decode() for p in listed if p})
    dest.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=dest)
    copied = []
    for rel in files:
        src = ROOT / rel
        if src.is_symlink() or src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target, follow_symlinks=False)
            copied.append(rel)
        elif src.is_dir():
            log(f"snapshot: {rel} is a directory (a submodule?); left out")
    git("add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul", cwd=dest,
        input=b"\0".join(p.encode() for p in copied))
    git("commit", "-q", "-m", "working tree snapshot for the Colab lane", cwd=dest)
    head = git("rev-parse", "--short", "HEAD", cwd=dest).stdout.decode().strip()
    changed = git("status", "--porcelain", "--untracked-files=all", cwd=ROOT).stdout.decode().splitlines()
    log(f"snapshot {head}: {len(copied)} files of the working tree, {len(changed)} of them differing from "
        f"the checkout's HEAD or untracked")
    return head


# --------------------------------------------------------------------------------- 3. running the notebooks
# (this part runs under .venv-colab's python)

VERIFY = r"""
import json as _json, os as _os, sys as _sys, sysconfig as _sysconfig, importlib.util as _util
import importlib.metadata as _metadata
import gemmlab as _gemmlab, gemmlab.runtime.source as _source, gemmlab.measure.results as _results
def _version(name):
    try:
        return _metadata.version(name)
    except _metadata.PackageNotFoundError:
        return None
print(%(mark)r + _json.dumps({
    "executable": _sys.executable, "python": _sys.version.split()[0], "purelib": _sysconfig.get_paths()["purelib"],
    "gemmlab": _gemmlab.__file__, "kernels": str(_source.KERNELS), "results": str(_results.RESULTS),
    "on_colab": globals().get("ON_COLAB"), "colab": getattr(_sys.modules.get("google.colab"), "__file__", None),
    "backend": _gemmlab.backend(), "cwd": _os.getcwd(),
    "files": sorted({str(getattr(m, "__file__", None)) for m in list(_sys.modules.values())
                     if str(getattr(m, "__file__", None) or "").startswith(%(root)r)}),
    "versions": {n: _version(n) for n in %(names)r},
    "present": [n for n in ("myst_nb", "jupyter_book") if _util.find_spec(n) is not None],
}))
"""

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def pins() -> dict[str, str]:
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            out[name.strip()] = version.strip()
    return out


def polled_in_slices(get_msg):
    """A channel's get_msg(timeout) that polls its socket a second at a time until the timeout. With
    jupyter_client 7 (Colab's), a reply sometimes arrives only when the poll that waits for it times out, so a
    cell that shows a widget took nbclient's whole cell timeout (nbclient issue 312; the fix proposed there,
    nbclient PR 311, also polls in slices)."""
    from queue import Empty

    async def get(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(1.0, left))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get


def run_chapter(path: str, tmp: str, timeout: int, warm_cache: bool) -> dict:
    """Execute one notebook on a Colab-like kernel; returns what happened (in a worker process)."""
    import fcntl

    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb_path, tmp = Path(path), Path(tmp)
    name = nb_path.stem
    content = tmp / "content" / name  # this chapter's /content
    content.mkdir(parents=True)
    course_dir = content / "gemmlab-course"
    env = clean_env()
    env.update(
        PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(tmp / "colab-path"),  # the stand-in google.colab, and nothing else
        GEMMLAB_BACKEND="cpu",
        GEMMLAB_COURSE_URL=(tmp / "course").as_uri(),
        GEMMLAB_COURSE_DIR=str(course_dir),
        IPYTHONDIR=str(tmp / "ipython" / name),
        MPLCONFIGDIR=str(tmp / "matplotlib"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # ipykernel's debugger: no warning about frozen modules
    )
    if not warm_cache:
        env["GEMMLAB_CACHE"] = str(tmp / "gemmlab-cache")
    (tmp / "ipython").mkdir(exist_ok=True)
    (tmp / "logs").mkdir(exist_ok=True)
    progress = open(tmp / "logs" / f"{name}.log", "w", buffering=1)  # each cell as it starts and ends
    kernel_log = open(tmp / "logs" / f"{name}.kernel.log", "w")  # the kernel process's own stdout and stderr
    nb = nbformat.read(nb_path, as_version=4)
    result = {"name": name, "ok": False, "cells": [], "failure": None, "problems": [], "stderr": [],
              "installed": False, "facts": None}
    print(f"[colab-lane] {name}: started", flush=True)
    start = time.time()
    km = KernelManager(kernel_cmd=[str(venv_python()), "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=False, kernel_name="python3",
                            resources={"metadata": {"path": str(content)}})
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    try:
        with client.setup_kernel(cwd=str(content), env=env, stdout=kernel_log, stderr=kernel_log, cleanup_kc=True):
            for channel in (client.kc.shell_channel, client.kc.iopub_channel):
                channel.get_msg = polled_in_slices(channel.get_msg)
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                t0 = time.time()
                print(f"cell {index} ...  {(cell.source.splitlines() or [''])[0][:70]}", file=progress)
                try:
                    if index == first_code:  # the set-up cell: one at a time, it may pip-install the course
                        with open(tmp / "setup.lock", "w") as lock:
                            fcntl.flock(lock, fcntl.LOCK_EX)
                            client.execute_cell(cell, index)
                            result["installed"] = course_dir.is_dir()
                    else:
                        client.execute_cell(cell, index)
                except Exception as error:  # CellExecutionError, a timeout, a dead kernel
                    error_out = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
                    result["failure"] = {
                        "cell": index, "seconds": time.time() - t0, "source": cell.source,
                        "ename": error_out["ename"] if error_out else type(error).__name__,
                        "evalue": error_out["evalue"] if error_out else str(error)[:2000],
                        "traceback": ANSI.sub("", "\n".join(error_out["traceback"])) if error_out else "",
                    }
                    break
                result["cells"].append((index, time.time() - t0, (cell.source.splitlines() or [""])[0][:70]))
                print(f"cell {index} {time.time() - t0:7.1f} s", file=progress)
            if result["failure"] is None:  # what the kernel imported, and from where
                probe = nbformat.v4.new_code_cell(VERIFY % {"mark": MARK, "root": str(ROOT), "names": sorted(pins())})
                nb.cells.append(probe)  # nbclient writes a cell's outputs back into nb.cells[index]
                try:
                    client.execute_cell(probe, len(nb.cells) - 1)
                finally:
                    nb.cells.pop()
                text = "".join(o.get("text", "") for o in probe.outputs if o.get("name") == "stdout")
                found = [ln for ln in text.splitlines() if ln.startswith(MARK)]
                if found:
                    result["facts"] = json.loads(found[0][len(MARK):])
                else:
                    result["problems"].append(f"the check after the last cell printed nothing: {probe.outputs}")
    except Exception as error:  # the kernel did not start, or died outside a cell
        if result["failure"] is None:
            result["failure"] = {"cell": None, "seconds": time.time() - start, "source": "",
                                 "ename": type(error).__name__, "evalue": str(error)[:2000], "traceback": ""}
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        kernel_log.close()
    result["seconds"] = time.time() - start
    print(f"{name}: {'failed' if result['failure'] else 'ran'} in {result['seconds']:.1f} s", file=progress)
    progress.close()
    # No error among the outputs, and no traceback printed to stderr (a callback or a thread that raised).
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                if not (result["failure"] and result["failure"]["cell"] == index):
                    result["problems"].append(f"cell {index}: error output {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = ANSI.sub("", out.get("text", ""))
                if "Traceback (most recent call last)" in text:
                    result["problems"].append(f"cell {index}: a traceback on stderr:\n{text[-3000:]}")
                else:
                    result["stderr"].append(f"cell {index}: {text.strip()[:300]}")
    if result["facts"]:
        result["problems"] += check_facts(result["facts"], tmp)
    (tmp / "executed").mkdir(exist_ok=True)
    nbformat.write(nb, tmp / "executed" / nb_path.name)
    result["ok"] = result["failure"] is None and not result["problems"]
    return result


def check_facts(facts: dict, tmp: Path) -> list[str]:
    problems = []
    purelib = facts["purelib"]
    if facts["executable"] != str(venv_python()):
        problems.append(f"the kernel ran {facts['executable']}, not {venv_python()}")
    if not purelib.startswith(str(VENV) + os.sep):
        problems.append(f"the kernel's site-packages is {purelib}, not in {VENV}")
    for what in ("gemmlab", "kernels", "results"):
        if not facts[what].startswith(os.path.join(purelib, "gemmlab") + os.sep):
            problems.append(f"{what} came from {facts[what]}, not from the installed copy in {purelib}")
    checkout = [f for f in facts["files"] if not f.startswith(str(VENV) + os.sep)]
    if checkout:
        problems.append(f"modules imported from the checkout {ROOT}: {checkout[:5]}")
    if facts["on_colab"] is not True:
        problems.append(f"the set-up cell did not see Colab (ON_COLAB = {facts['on_colab']})")
    if not str(facts["colab"]).startswith(str(tmp)):
        problems.append(f"google.colab came from {facts['colab']}, not the lane's stand-in")
    if facts["backend"] != "cpu":
        problems.append(f"the chapter ran on the {facts['backend']} backend, not the CPU")
    for name, version in pins().items():
        if facts["versions"].get(name) != version:
            problems.append(f"{name} {facts['versions'].get(name)} was installed, not {version}")
    if facts["present"]:
        problems.append(f"importable, but Colab has none of them: {facts['present']}")
    return problems


def report(result: dict) -> None:
    name, seconds = result["name"], result["seconds"]
    if result["ok"]:
        slow = sorted(result["cells"], key=lambda c: -c[1])[:3]
        slowest = ", ".join(f"cell {i} {s:.0f} s" for i, s, _ in slow)
        note = "; installed the course" if result["installed"] else ""
        log(f"PASS {name}: {seconds:6.1f} s, {len(result['cells'])} code cells (slowest: {slowest}){note}")
        if result["stderr"]:
            log(f"     {name}: {len(result['stderr'])} outputs on stderr, e.g. {result['stderr'][0][:200]!r}")
        return
    log(f"FAIL {name}: after {seconds:.1f} s")
    failure = result["failure"]
    if failure:
        where = f"cell {failure['cell']}" if failure["cell"] is not None else "outside a cell"
        head = "\n".join(failure["source"].splitlines()[:6])
        print(f"---- {name}, {where} ({failure['seconds']:.1f} s): {failure['ename']}: {failure['evalue']}\n"
              f"{head}\n----\n{failure['traceback'][-6000:]}\n----", flush=True)
    for problem in result["problems"]:
        print(f"---- {name}: {problem}", flush=True)


def run_all(notebooks: list[str], tmp: str, jobs: int, timeout: int, warm_cache: bool) -> int:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(notebooks, key=lambda p: -EXPECTED_S.get(Path(p).stem, 0))
    results = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_chapter, p, tmp, timeout, warm_cache): p for p in order}
        from concurrent.futures import as_completed
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception as error:  # the worker itself died
                result = {"name": Path(futures[future]).stem, "ok": False, "seconds": 0.0, "problems": [],
                          "failure": {"cell": None, "seconds": 0.0, "source": "", "ename": type(error).__name__,
                                      "evalue": str(error), "traceback": ""}}
            results[result["name"]] = result
            report(result)
    failed = [n for n, r in results.items() if not r["ok"]]
    log("per chapter: " + ", ".join(f"{n} {results[n]['seconds']:.0f} s" for n in sorted(results)))
    facts = next((r["facts"] for r in results.values() if r.get("facts")), None)
    if facts:
        log(f"kernel: Python {facts['python']}, gemmlab from {facts['gemmlab']}; "
            + ", ".join(f"{k} {v}" for k, v in sorted(facts["versions"].items()) if k in
                        ("numpy", "matplotlib", "ipywidgets", "cupy-cuda12x", "ipython", "ipykernel")))
    installers = [n for n, r in results.items() if r.get("installed")]
    if results and not installers:
        log("FAIL: no chapter's set-up cell cloned and installed the course")
        failed.append("(set-up)")
    if failed:
        log(f"FAILED: {', '.join(failed)} ({len(failed)} of {len(results)} notebooks)")
        return 1
    log(f"{len(results)} notebooks passed")
    return 0


# ------------------------------------------------------------------------------------------------ the driver

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="book/NAME.ipynb or NAME (default: every book/*.ipynb)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="chapters at a time (2)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may take (600)")
    parser.add_argument("--python", default=os.environ.get("GEMMLAB_COLAB_PYTHON"),
                        help="the interpreter for .venv-colab (default: a Python 3.12, Colab's)")
    parser.add_argument("--warm-cache", action="store_true",
                        help="use the emulator's usual cache (~/.cache/gemmlab) instead of a fresh one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (executed notebooks, logs)")
    parser.add_argument("--run-in", help=argparse.SUPPRESS)  # internal: the second half, under .venv-colab
    args = parser.parse_args()

    if args.run_in:
        return run_all(args.notebooks, args.run_in, max(1, args.jobs), args.timeout, args.warm_cache)

    start = time.time()
    names = args.notebooks or sorted(p.name for p in (ROOT / "book").glob("*.ipynb"))
    paths = []
    for name in names:
        stem = Path(name).stem
        if not (ROOT / "book" / f"{stem}.ipynb").is_file():
            sys.exit(f"[colab-lane] no notebook book/{stem}.ipynb")
        paths.append(f"{stem}.ipynb")
    ensure_venv(find_python(args.python))
    t_venv = time.time() - start
    tmp = Path(tempfile.mkdtemp(prefix="gemmlab-colab-lane-"))
    code = 1
    try:
        snapshot(tmp / "course")
        shutil.copytree(STUB, tmp / "colab-path", ignore=shutil.ignore_patterns("__pycache__"))
        notebooks = [str(tmp / "course" / "book" / p) for p in paths]  # the snapshot's copies: the same files
        log(f"running {len(notebooks)} notebooks, {min(args.jobs, len(notebooks))} at a time, in {tmp}")
        command = [str(venv_python()), str(Path(__file__).resolve()), "--run-in", str(tmp), "--jobs", str(args.jobs),
                   "--timeout", str(args.timeout), *(["--warm-cache"] if args.warm_cache else []), *notebooks]
        driver_env = {**clean_env(), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}  # ipykernel imports debugpy here too
        code = subprocess.run(command, cwd=tmp, env=driver_env).returncode
    finally:
        total = time.time() - start
        log(f"total {total:.0f} s (venv {t_venv:.0f} s)")
        if code == 0 and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp} (executed/: the notebooks as they ran)")
    return code


if __name__ == "__main__":
    sys.exit(main())
