"""Every kernel file compiles with nvcc for sm_75 at its default configuration, without spills."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels"

# file -> explicit instantiation of its kernel at the default configuration
INSTANTIATIONS = {
    "sgemm/01_naive.cu": "template __global__ void sgemm_naive<32, 32>"
    "(int, int, int, const float*, const float*, float*);",
    "sgemm/02_coalesced.cu": "template __global__ void sgemm_coalesced<32, 32>"
    "(int, int, int, const float*, const float*, float*);",
    "sgemm/03_smem_tiling.cu": "template __global__ void sgemm_smem_tiling<32>"
    "(int, int, int, const float*, const float*, float*);",
    "hgemm/01_mma_tiling.cu": "template __global__ void hgemm_mma_tiling<128, 128, 32, 64, 64>"
    "(int, int, int, const __half*, const __half*, __half*);",
}

nvcc = shutil.which("nvcc")


@pytest.mark.skipif(nvcc is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("name", sorted(INSTANTIATIONS))
def test_compiles_for_sm75(name, tmp_path):
    common = (KERNELS / "common.cuh").read_text()
    source = (KERNELS / name).read_text().replace('#include "common.cuh"', common)
    cu = tmp_path / "kernel.cu"
    cu.write_text(source + "\n" + INSTANTIATIONS[name] + "\n")
    proc = subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_75", "-Xptxas=-v", "-c", str(cu), "-o", str(tmp_path / "o")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    spills = re.findall(r"(\d+) bytes spill stores", proc.stderr)
    assert spills and all(s == "0" for s in spills), proc.stderr
