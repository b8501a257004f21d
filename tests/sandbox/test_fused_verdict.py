"""The fused counting pass of the tolerance check (harness/fused_verdict.py) decides exactly as the torch path.

On CUDA it replaces a dozen eager kernels per chunk (81 ms for a 6 GiB output on the H200) with one; it only
counts, and it is checked against the torch path at first use in every process. The CPU tests pin what that check
covers and that the CPU path is untouched; the GPU tests compare both paths on the device.
"""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.harness.compare import _chunk_verdict, compare_output
from cuda_agent.harness.fused_verdict import VERDICT_CODE, crafted_pairs, fused_counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_first_use_check_covers_every_branch_of_the_verdict(dtype: torch.dtype) -> None:
    e, a, atol, rtol = crafted_pairs(dtype, "cpu")
    nan, _, bad = _chunk_verdict(e, a, atol, rtol)
    assert nan.any() and bad.any() and not bad.all()
    assert bool(torch.isinf(e).any()) and bool(torch.isnan(e).any()) and bool(torch.isinf(a).any())
    # elements one ulp either side of the tolerance boundary: both verdicts occur among them
    n = (e.numel() - 13) // 5
    up, down = bad[13 + n:13 + 2 * n], bad[13 + 2 * n:13 + 3 * n]
    assert up.any() and not down.all()


def test_cpu_tensors_keep_the_torch_path() -> None:
    e = torch.ones(8)
    assert fused_counts(e, e.clone(), 1e-2, 1e-2) is None
    assert "__fmul_rn" in VERDICT_CODE and "__fadd_rn" in VERDICT_CODE  # no fused multiply-add in the tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_fused_verdict_agrees_with_the_torch_path_on_cuda(dtype: torch.dtype) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from torch.cuda.jiterator import _create_jit_fn

    from cuda_agent.harness.fused_verdict import _kernel, disagreement

    fn = _create_jit_fn(VERDICT_CODE, atol=0.0, rtol=0.0)
    assert disagreement(fn, dtype) is None
    assert _kernel() is not None  # made, checked and kept for this process


@pytest.mark.gpu
def test_compare_output_on_cuda_reports_what_the_cpu_reports() -> None:
    """A 64M-element output with planted NaNs, infinities and out-of-tolerance elements in several chunks: the same
    counts and the same first NaN and worst element on CUDA (fused counting) as on the CPU (torch path)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = torch.Generator().manual_seed(3)
    expected = torch.randn(64 << 20, generator=g)
    actual = expected + torch.randn(64 << 20, generator=g) * 1e-4
    actual[5] = float("nan")
    actual[(17 << 20) + 3] = float("inf")
    actual[(40 << 20) + 11] += 0.5
    expected[(50 << 20)] = float("-inf")
    actual[(50 << 20)] = float("-inf")  # equal infinities pass
    cpu = compare_output(expected, actual, atol=1e-2, rtol=1e-2)
    gpu = compare_output(expected.cuda(), actual.cuda(), atol=1e-2, rtol=1e-2)
    # The verdict's fields agree exactly. reference_rms is a float64 sum of squares whose order differs between
    # the devices (H200, session 19: 1.0001012212394147 on CUDA, ...396276 on the CPU): equal to 1e-9 relative.
    def exact(checks):
        return [(c.check, {k: v for k, v in c.details.items() if k != "reference_rms"}) for c in checks]

    assert exact(gpu) == exact(cpu)
    for g_check, c_check in zip(gpu, cpu):
        if "reference_rms" in c_check.details:
            assert math.isclose(g_check.details["reference_rms"], c_check.details["reference_rms"], rel_tol=1e-9)
    assert {c.check for c in cpu} == {"nan", "tolerance"}
    assert compare_output(expected.cuda(), expected.cuda().clone(), atol=1e-2, rtol=1e-2) == []
