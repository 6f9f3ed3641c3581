"""The generic slider: impossible configurations explained, possible ones checked; occupancy model."""
from gemmlab import explore, registry


def test_occupancy_limits():
    # 128 registers x 256 threads = 32768: two blocks fill the 65536 registers of an H100 SM
    assert explore.blocks_per_sm(128, 256, 16384, 90) == (2, "registers")
    assert explore.blocks_per_sm(32, 1024, 0, 90)[0] == 2  # 2048 threads per SM
    assert explore.blocks_per_sm(32, 1024, 0, 75) == (1, "threads")
    assert explore.blocks_per_sm(32, 64, 48 * 1024, 75) == (1, "shared memory")


def test_report_explains_an_impossible_configuration():
    text = explore.report("sgemm/07_warptiling", WARP_M=64, WARP_N=64, THREAD_M=4, THREAD_N=4)
    assert text.startswith("cannot run") and "32 thread tiles" in text


def test_report_checks_a_possible_configuration():
    text = explore.report("sgemm/05_2d_blocktiling", BLOCK_M=32, BLOCK_N=32, BLOCK_K=8, THREAD_M=4, THREAD_N=4)
    assert "PASS" in text and "block(s) per SM" in text and "T4 (sm_75)" in text


def test_explorer_has_one_control_per_parameter(monkeypatch):
    calls = []
    monkeypatch.setattr(explore, "report", lambda name, size, **params: calls.append(params) or "report")
    box = explore.explorer("sgemm/04_1d_blocktiling", BLOCK_M=32)
    controls = [c for row in box.children[:-1] for c in row.children]
    assert [c.description for c in controls] == list(registry.get("sgemm/04_1d_blocktiling").params)
    assert calls[-1]["BLOCK_M"] == 32
    controls[0].value = 16  # a change re-runs the report with the new value
    assert len(calls) == 2 and calls[-1]["BLOCK_M"] == 16


def test_the_one_explorer_takes_a_fused_step_with_a_size_slider(monkeypatch):
    from gemmlab import fusion

    calls = []
    monkeypatch.setattr(fusion, "slider_report", lambda name, n, **params: calls.append((name, n, params)) or "report")
    box = explore.explorer("fused/03_two_phase", size=33)
    size, *rows, out = box.children
    assert size.description == "N" and size.value == 33
    assert [c.description for row in rows for c in row.children] == list(fusion.get("fused/03_two_phase").params)
    size.value = 64  # N re-runs the report too
    assert [c[1] for c in calls] == [33, 64] and calls[-1][0] == "fused/03_two_phase"


def test_the_fused_explorer_checks_on_the_cpu():
    from gemmlab import fusion

    text = fusion.slider_report("fused/01_naive_row", 17, backend="cpu")
    assert "PASS" in text and "N=17" in text


def test_timing_line_formats_one_live_record(monkeypatch):
    import gemmlab
    from gemmlab import bench

    record = {"tflops": 43.4, "pct_of_baseline": 85.2, "baseline": "torch.matmul", "gpu": "NVIDIA H100"}
    monkeypatch.setattr(bench, "benchmark", lambda kernels, **kw: [dict(record, step=kernels[0].name)])
    k = gemmlab.instance("sgemm/09_double_buffer")
    assert bench.timing_line(k, 4096) == ("sgemm/09_double_buffer: 43.40 TFLOP/s at 4096^3, 85.2% of cuBLAS "
                                          "(torch.matmul, NVIDIA H100, live)")
