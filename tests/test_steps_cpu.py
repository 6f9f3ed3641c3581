"""Every step, run by the CPU emulator, matches the float64 reference on shapes off its tile grid."""
import pytest

import gemmlab
from gemmlab import registry


@pytest.mark.parametrize("name", [s.name for s in registry.STEPS])
def test_step_verifies_on_the_cpu_backend(name):
    report = gemmlab.verify(gemmlab.step(name, backend="cpu"))
    assert report.passed and str(report).startswith("PASS")


def test_verify_reports_mismatches_of_a_wrong_kernel():
    wrong = gemmlab.source.kernel_path("sgemm/02_coalesced.cu").read_text().replace(
        "A[row * K + k]", "1.5f * A[row * K + k]", 1)
    assert wrong != gemmlab.source.kernel_path("sgemm/02_coalesced.cu").read_text(), "edit did not apply"
    k = gemmlab.step("sgemm/02_coalesced", backend="cpu", source=wrong, BLOCK_X=8, BLOCK_Y=8)
    report = gemmlab.verify(k, raise_on_fail=False)
    assert not report.passed and report.mismatches
    row, col, got, want = report.mismatches[0]
    assert got == pytest.approx(1.5 * want)
    with pytest.raises(gemmlab.errors.VerificationError, match=r"\(row, col, got, want\)"):
        gemmlab.verify(k)
