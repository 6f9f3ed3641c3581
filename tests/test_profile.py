"""Reading Nsight Compute's raw CSV."""
from gemmlab import profile

CSV = '''==PROF== Connected to process 1
"ID","Kernel Name","launch__registers_per_thread","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","sm__warps_active.avg.pct_of_peak_sustained_active","dram__bytes.sum"
"","","register/thread","ratio","ratio","%","byte"
"0","sgemm_warptiling","128","1.5","0.25","24.9","1,234"
'''


def test_parse_keeps_stalls_and_chosen_metrics():
    m = profile.parse_raw_csv(CSV)
    assert m["launch__registers_per_thread"] == 128
    assert m["sm__warps_active.avg.pct_of_peak_sustained_active"] == 24.9
    assert "dram__bytes.sum" not in m
    assert profile.stall_reasons(m) == [("barrier", 1.5), ("long_scoreboard", 0.25)]


def test_no_kernel_is_an_error():
    import pytest

    with pytest.raises(ValueError):
        profile.parse_raw_csv('"ID"\n"x"\n')


def test_scaled_units_of_a_report_read_back_become_base_units():
    """`ncu -i REPORT --csv --page raw` prints ms, Gbyte, Ghz; the records keep ns, bytes, Hz (a live run's units)."""
    text = ('"ID","gpu__time_duration.sum","dram__bytes_read.sum","sm__cycles_elapsed.avg.per_second"\n'
            '"","ms","Gbyte","Ghz"\n"0","5.472224","8.45","1.8186"\n')
    m = profile.parse_raw_csv(text)
    assert abs(m["gpu__time_duration.sum"] - 5_472_224) < 1e-3
    assert abs(m["dram__bytes_read.sum"] - 8.45e9) < 1
    assert abs(m["sm__cycles_elapsed.avg.per_second"] - 1.8186e9) < 1
    live = profile.parse_raw_csv('"ID","gpu__time_duration.sum"\n"","nsecond"\n"0","5,472,224"\n')
    assert live["gpu__time_duration.sum"] == 5_472_224
