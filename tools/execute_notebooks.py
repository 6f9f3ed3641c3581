"""Execute chapter notebooks in place, so that they store this machine's outputs (the GPU run the site shows).

    python tools/execute_notebooks.py book/07b_tensor_core_ladder.ipynb [...] [--log-dir DIR]

Same job as `jupyter execute --inplace`, written out because that command's kernel did not start on a
GPU machine whose packages come from wheels installed with `--target` (see ../shared/GPU.md): here the
kernel is this interpreter (`sys.executable -m ipykernel_launcher`) with this process's environment,
and each cell's source head and run time go to a log, so a failure names its cell.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient


def execute(path: Path, log, timeout: int = 1800) -> bool:
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_cmd=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    ok = True
    with client.setup_kernel(cwd=str(path.parent), env=dict(os.environ)):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            start = time.time()
            head = cell.source.splitlines()[0][:70] if cell.source else ""
            try:
                client.execute_cell(cell, index)
                print(f"{path.name} cell {index}: {time.time() - start:6.1f} s  {head}", file=log, flush=True)
            except Exception as error:  # keep the notebook as far as it ran; name the cell
                print(f"{path.name} cell {index}: FAILED after {time.time() - start:.1f} s  {head}\n{error}",
                      file=log, flush=True)
                ok = False
                break
    if ok:
        nbformat.write(nb, path)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--log-dir", type=Path, default=None, help="one <notebook>.log per notebook (default: stdout)")
    args = parser.parse_args()
    failed = []
    for path in args.notebooks:
        if args.log_dir:
            args.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(args.log_dir / (path.stem + ".log"), "w")
        else:
            log = sys.stdout
        start = time.time()
        ok = execute(path.resolve(), log)
        print(f"{'executed' if ok else 'FAILED'} {path} in {time.time() - start:.0f} s", flush=True)
        if not ok:
            failed.append(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
