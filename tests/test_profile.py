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
