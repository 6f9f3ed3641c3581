"""gemmlab.documents: the seeds' own figures as they state them, and the tables that set them beside our records (issue 39).

Also seed 000's power-of-two lesson as chapter 3 shows it (compile-only SASS of step 03 with BLOCK = 31 and 32) and
seed 002's 16 x 16 bank count as chapter 5 corrects it.
"""
from __future__ import annotations

import re

import pytest

from gemmlab import hardware, documents

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def recorded(monkeypatch):
    """gemmlab.benchmark reading the H100's records (the ones the chapters show), also on a machine with a GPU."""
    import gemmlab
    from gemmlab.runtime import backends

    monkeypatch.setattr(backends, "_forced", "cpu")
    return lambda steps, size: gemmlab.benchmark(steps, sizes=[size], verbose=False, gpu=H100)


# --------------------------------------------------------------------------- the figures, as the seeds state them
def test_seed_000_figures():
    f = {x.key: x for x in documents.figures(0)}
    assert (f["v1_pct"].value, f["v2_pct"].value, f["v3_pct"].value) == (0.39, 2.0, 16.0)
    assert (f["v2_gain"].value, f["v2_gain"].says) == (8.0, "nearly")
    assert (f["v3_gain"].value, f["v3_gain"].says) == (6.0, "more than")
    assert f["v3_over_v1"].value == 40.0
    assert (f["k620_gflops"].value, f["k620_gbps"].value) == (870.0, 29.0)
    assert {x.gpu for x in f.values()} == {"Quadro K620"}
    assert all(x.size == 4096 for x in f.values() if x.unit in ("% of cuBLAS", "x"))
    assert [f[k].text() for k in ("v1_pct", "v2_pct", "v2_gain", "v3_gain")] == ["0.39%", "2%", "nearly 8x",
                                                                                  "more than 6x"]


def test_seed_001_figures_and_hardware_reads_them():
    v = {x.key: x.value for x in documents.figures(1)}
    assert [v[f"kernel{n}_pct"] for n in (1, 3, 4, 5, 6)] == [8.0, 50.0, 70.0, 86.7, 96.0]
    assert (v["kernel2_gain"], v["kernel3_gain"], v["kernel5_gain"]) == (3.0, 2.0, 1.2)
    assert (v["dram_gbps"], v["smem_gbps"], v["hmma_gflops"], v["ffma_gflops"]) == (220.0, 3662.0, 49439.0, 7455.0)
    assert all(x.size == 8192 for x in documents.figures(1) if x.key.startswith("kernel"))
    assert documents.figure(1, "kernel3_pct").text() == "about 50%"
    # one place: hardware's T4 reference is seeds' (the ladder chapter 7 and its test read through hardware)
    ref = hardware.REFERENCE_MEASURED["t4"]
    assert ref == documents.t4_reference()
    assert (ref["fp16_tensor_tflops"], ref["fp32_tflops"]) == (49.439, 7.455)
    assert ref["hgemm_ladder"] == {"kernel1_pct": 8.0, "copy_speedup": 3.0, "swizzle_speedup": 2.0,
                                   "kernel3_pct": 50.0}


def test_seed_002_and_003_figures():
    ladder = [documents.value(2, f"level{i}_gflops") for i in range(1, 8)]
    assert ladder == [5.0, 50.0, 300.0, 500.0, 650.0, 1000.0, 7000.0]
    assert ladder == sorted(ladder)
    assert documents.value(2, "tile") == 16.0 and documents.figure(2, "level1_gflops").gpu == "Tesla V100"
    fused = documents.figure(3, "fused_speedup")
    assert (fused.value, fused.unit, fused.size) == (3.0, "x", 512)


def test_figures_are_well_formed():
    keys = [(f.document, f.key) for f in documents.FIGURES]
    assert len(keys) == len(set(keys))
    assert {f.document for f in documents.FIGURES} == set(documents.DOCUMENTS) == {0, 1, 2, 3}
    for f in documents.FIGURES:
        assert isinstance(f, documents.DocumentFigure)
        assert isinstance(f.value, float) and f.value > 0, f
        assert f.unit in ("% of cuBLAS", "x", "GFLOP/s", "GB/s", "threads"), f
        assert f.what and f.where and f.gpu == documents.DOCUMENTS[f.document].gpu, f
        assert f.size is None or isinstance(f.size, int)
        assert f.says in ("", "nearly", "more than", "about") and f.approx == bool(f.says)
        assert not re.search(r"[\u4e00-\u9fff]", f.what + f.where), "descriptions are English, not quotes"
    with pytest.raises(KeyError, match="seed 002 has no figure"):
        documents.figure(2, "level8_gflops")


# --------------------------------------------------------------------------- the tables: ours equal the records
def _check_rows(table, records):
    by_step = {r["step"]: r for r in records}
    for row in table.rows:
        if row["ours"] is None:
            assert row["step"] is None or row["step"] not in by_step, row["cells"]
        elif row.get("baseline"):
            assert row["ours"] in records
            assert row["cells"][4] == f"{row['ours']['baseline_tflops']:.1f}"
        else:
            assert row["ours"] == by_step[row["step"]]
            assert f"{row['ours']['pct_of_baseline']:.1f}%" in row["cells"]
    text, markdown = table.text(), table.markdown()
    assert len(markdown.splitlines()) >= len(table.rows) + 4 and "{" not in markdown
    for row in table.rows:
        assert " | ".join(str(c).replace("|", "\\|") for c in row["cells"]) in markdown
        assert all(str(c) in text for c in row["cells"])


def test_table_000(recorded):
    steps = ["sgemm/01_naive", "sgemm/02_coalesced", "sgemm/03_smem_tiling"]
    records = recorded(steps, 4096)
    assert {r["step"] for r in records} == set(steps)
    table = documents.table_000(records)
    assert [r["step"] for r in table.rows] == steps
    _check_rows(table, records)
    assert [r["cells"][1] for r in table.rows] == ["0.39%", "2%", "16%"]
    assert table.rows[2]["cells"][5] == f"{records[2]['tflops'] / records[1]['tflops']:.2f}x"
    two = documents.table_000(records, through=2)
    assert len(two.rows) == 2 and not two.notes


def test_table_001(recorded):
    steps = ["hgemm/01_mma_tiling", "hgemm/02_vectorized_copy", "hgemm/03_swizzled", "hgemm/04_register_prefetch",
             "hgemm/05_tuned_tiles", "hgemm/06_double_buffer"]
    records = recorded(steps, 8192)
    table = documents.table_001(records, through=6)
    assert [r["step"] for r in table.rows] == steps
    _check_rows(table, records)
    assert [r["cells"][1] for r in table.rows] == ["8%", "not stated", "about 50%", "about 70%", "86.7%", "96%"]
    assert [r["cells"][2] for r in table.rows] == ["-", "about 3x", "about 2x", "not stated", "1.2x", "not stated"]
    assert len(documents.table_001(records).rows) == 3


def test_table_002(recorded):
    mapped = [s for _, s in documents.LEVELS_002 if s and s != "cuBLAS"]
    records = recorded(mapped, 4096)
    assert {r["step"] for r in records} == set(mapped)
    table = documents.table_002(records)
    assert len(table.rows) == 7
    _check_rows(table, records)
    assert [r["cells"][1] for r in table.rows] == ["5", "50", "300", "500", "650", "1000", "7000"]
    assert table.rows[2]["ours"] is None and table.rows[6]["baseline"] and table.rows[6]["cells"][-1] == "100%"


def test_tables_say_no_record():
    for table in (documents.table_000([]), documents.table_001([]), documents.table_002([])):
        assert all(r["ours"] is None for r in table.rows)
        assert "no record" in table.text()


# --------------------------------------------------------------------------- seed 000's power-of-two lesson
def test_split_at_loop():
    from gemmlab import nvrtc

    sass = """
        /*0000*/                   IMAD R1, R2, 0x1f, R3 ;
.L_x_1:
        /*0010*/                   LDS.128 R4, [R6] ;
        /*0020*/                   FFMA R8, R4, R5, R8 ;
        /*0030*/              @!P0 BRA `(.L_x_1) ;
.L_x_0:
        /*0040*/                   EXIT ;
"""
    assert nvrtc.split_at_loop(sass) == {"before": ["IMAD"], "loop": ["LDS.128", "FFMA", "BRA"], "after": ["EXIT"]}
    assert nvrtc.split_at_loop("/*0000*/ EXIT ;")["loop"] == []


def test_power_of_two_lesson_in_step_03():
    """Chapter 3: seed 000's 1-D indexing divides by BLOCK before the loop (more integer work with 31), step 03's
    2-D block divides nothing, and with 31 the K loop loses its 128-bit shared loads (124-byte rows)."""
    from gemmlab import tiling

    assert "threadIdx.x / BLOCK" in tiling.one_d_indexing() and "threadIdx.y" not in tiling.one_d_indexing()
    c = {(ix, b): tiling.power_of_two_counts(b, ix) for ix in ("2-D", "1-D") for b in (32, 31)}
    integer = ("IMAD", "LEA", "SHF", "IADD3", "LOP3")
    setup = {key: sum(v["before"][op] for op in integer) for key, v in c.items()}
    assert setup["1-D", 31] > setup["1-D", 32]
    for ix in ("2-D", "1-D"):
        assert c[ix, 32]["loop"]["FFMA"] == 32 and c[ix, 31]["loop"]["FFMA"] == 31
        assert c[ix, 32]["loop"]["LDS.128"] > 0 and c[ix, 31]["loop"]["LDS.128"] == 0
        assert c[ix, 31]["loop"]["LDS"] + c[ix, 31]["loop"]["LDS.128"] > \
            c[ix, 32]["loop"]["LDS"] + c[ix, 32]["loop"]["LDS.128"]


@pytest.mark.parametrize("block", [4, 31])
def test_step_03_runs_with_blocks_of_partial_warps(block):
    """__syncthreads() counts the whole block, which need not be whole warps (4 x 4 is a slider choice; 31 x 31 is
    chapter 3's power-of-two counter-example): the emulator used to refuse its count as not a multiple of 32."""
    import gemmlab

    assert gemmlab.verify(gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=block)).passed


# --------------------------------------------------------------------------- seed 002's 16 x 16 bank count
def test_seed_002_bank_count_is_one_wavefront():
    """Chapter 5: in a 16 x 16 block a warp holds rows 2w and 2w + 1, so As[ty][k] costs 1 wavefront, not 2."""
    import gemmlab
    from gemmlab import swizzle as sw

    edge = int(documents.value(2, "tile"))
    warp0 = [4 * ((t // edge) * edge + 5) for t in range(32)]
    assert sorted({t // edge for t in range(32)}) == [0, 1] and sw.wavefronts(warp0) == 1
    assert sw.wavefronts([4 * (0 * edge + 5)] * 16 + [4 * (2 * edge + 5)] * 16) == 2
    c = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=edge).counters(64, 64, 64, max_blocks=1)
    loads = c.select(space="shared", kind="load")
    assert {s.array for s in loads} == {"sA", "sB"} and all(s.max == 1 for s in loads)
