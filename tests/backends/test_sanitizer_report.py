"""The sanitizer in trusted grading, the parts that need no GPU: reading compute-sanitizer's reports (findings,
the documented library filter, the candidate's own kernels never filtered), which tools run, and that a sanitizer
asked for but unable to run is a harness error. The GPU half is tests/backends/test_gpu_sanitizer_grading.py."""

from __future__ import annotations

import pytest

from cuda_agent.harness.sanitizer import (
    LIBRARY_KERNELS,
    SanitizerUnavailable,
    grade_tools,
    parse_report,
    racecheck_applies,
    require_sanitizers,
)
from cuda_agent.harness.settings import IntegritySettings

# The shapes compute-sanitizer 2025 prints (memcheck with and without -lineinfo, racecheck, a host API error).
MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at relu_oob_kernel(const float *, float *, long)+0x1b0
=========     by thread (255,0,0) in block (4095,0,0)
=========     Address 0x7f2a4c400000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a0c000000 of size 1073741824 bytes
=========
========= ERROR SUMMARY: 1 error
"""
MEMCHECK_IN_TORCH = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at 0x3c0 in /pytorch/aten/src/ATen/native/cuda/CUDALoops.cuh:101:void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, T2, T3)
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at row_sum_kernel(const float *, float *, int)+0x2a0
=========     and Read access at row_sum_kernel(const float *, float *, int)+0x310 [256 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
HOST_ERROR = """\
========= COMPUTE-SANITIZER
========= Program hit cudaErrorIllegalAddress (error 700) due to "an illegal memory access was encountered" on CUDA API call to cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 1 error
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_an_out_of_bounds_write_is_a_finding_with_its_first_report():
    report = parse_report(MEMCHECK_OOB)
    assert report.summary and report.ignored == []
    [finding] = report.findings
    assert finding.kernel == "relu_oob_kernel(const float *, float *, long)"
    assert finding.text.splitlines()[0] == "Invalid __global__ write of size 4 bytes"
    assert "is out of bounds" in finding.text


def test_findings_in_torch_kernels_are_ignored_only_through_the_filter():
    report = parse_report(MEMCHECK_IN_TORCH)
    assert report.findings == [] and report.ignored == ["at::native::vectorized_elementwise_kernel"]
    assert any(lib in "at::native::vectorized_elementwise_kernel" for lib in LIBRARY_KERNELS)


def test_a_candidate_kernel_named_like_a_library_is_never_filtered():
    text = MEMCHECK_OOB.replace("relu_oob_kernel", "cublas_gemm_kernel")
    assert parse_report(text).findings == []  # the name alone would be filtered ...
    report = parse_report(text, own_kernels=("cublas_gemm_kernel(float const*, float*, long)",))
    assert [f.kernel for f in report.findings] == ["cublas_gemm_kernel(const float *, float *, long)"]  # ... not so


def test_racecheck_hazards_and_host_errors_are_findings():
    [race] = parse_report(RACECHECK).findings
    assert race.kernel == "row_sum_kernel(const float *, float *, int)" and "Race reported" in race.text
    [host] = parse_report(HOST_ERROR).findings
    assert host.kernel is None and "cudaErrorIllegalAddress" in host.text


def test_a_clean_report_has_no_findings_and_a_summary():
    report = parse_report(CLEAN)
    assert report.findings == [] and report.summary
    assert not parse_report("").summary  # a run that never got to its summary did not finish


def test_grade_sanitizer_tools():
    assert grade_tools("off") == [] and grade_tools("memcheck") == ["memcheck"]
    assert grade_tools("memcheck+racecheck") == ["memcheck", "racecheck"]
    assert racecheck_applies(None)  # no build of ours (Triton, single files): run it


def test_asking_for_a_sanitizer_that_cannot_run_is_a_harness_error(monkeypatch):
    with pytest.raises(SanitizerUnavailable, match="needs the cuda backend, or another whose kernels run on a CUDA"):
        require_sanitizers(IntegritySettings(grade_sanitizer="memcheck"), "cpu")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SanitizerUnavailable, match="compute-sanitizer is not on PATH"):
        require_sanitizers(IntegritySettings(grade_sanitizer="memcheck+racecheck"), "cuda")
    require_sanitizers(IntegritySettings(), "cpu")  # nothing asked: nothing to refuse


def test_score_refuses_a_sanitizer_that_cannot_run_before_anything_runs(tmp_path, capsys):
    from pathlib import Path

    from cuda_agent.cli import main

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "score"
    rc = main(["score", str(repo / "examples" / "solutions" / "cpu"), "--tasks", str(repo / "examples" / "tasks"),
               "--backend", "cpu", "--sanitizer", "memcheck", "--out", str(out)])
    assert rc == 2 and not out.exists()
    assert "sanitizer 'memcheck' needs the cuda backend, or another whose kernels run on a CUDA device" in \
        capsys.readouterr().err
