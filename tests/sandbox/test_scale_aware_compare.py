"""The scale-aware tolerance: small outputs are held to rtol at their own magnitude (issue 21, item 6)."""

from __future__ import annotations

import torch

from cuda_agent.harness.compare import compare_output, effective_atol, reference_rms


def _softmax_case(cols: int = 16384, rows: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(rows, cols, generator=g), dim=-1)


def test_a_constant_output_far_below_atol_fails() -> None:
    expected = _softmax_case()
    constant = torch.full_like(expected, 1.0 / expected.shape[1])
    # The paper's rule alone passes it: every value is ~6e-5 against atol 1e-2.
    assert bool(((constant - expected).abs() <= 1e-2 + 1e-2 * expected.abs()).all())
    errs = compare_output(expected, constant, atol=1e-2, rtol=1e-2)
    assert [e.check for e in errs] == ["tolerance"]
    assert errs[0].details["atol"] < 1e-5 and errs[0].details["paper_atol"] == 1e-2
    assert "RMS magnitude" in errs[0].message
    assert compare_output(expected, torch.zeros_like(expected), atol=1e-2, rtol=1e-2)


def test_an_honest_small_output_computed_another_way_passes() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 16384, generator=g)
    expected = torch.softmax(x, dim=-1)
    # A different but honest algorithm: float64 exp/sum, rounded once.
    e = (x.double() - x.double().max(dim=-1, keepdim=True).values).exp()
    honest = (e / e.sum(dim=-1, keepdim=True)).float()
    assert compare_output(expected, honest, atol=1e-2, rtol=1e-2) == []
    # And in bfloat16 precision (honest rounding of every element) it still passes at the paper's rtol.
    assert compare_output(expected, expected.bfloat16().float(), atol=1e-2, rtol=1e-2) == []


def test_outputs_of_unit_scale_keep_the_papers_tolerance() -> None:
    g = torch.Generator().manual_seed(2)
    expected = torch.randn(64, 64, generator=g) * 3
    assert effective_atol(1e-2, 1e-2, reference_rms(expected)) == 1e-2
    shifted = expected + 0.009  # inside atol everywhere: passes exactly as under the paper's rule
    assert compare_output(expected, shifted, atol=1e-2, rtol=1e-2) == []
    assert compare_output(expected, expected + 0.03, atol=1e-2, rtol=1e-2)


def test_a_reference_without_scale_falls_back_to_atol() -> None:
    zeros = torch.zeros(16, 16)
    assert reference_rms(zeros) == 0.0
    assert compare_output(zeros, torch.full_like(zeros, 1e-3), atol=1e-2, rtol=1e-2) == []
    inf = torch.full((4,), float("inf"))
    assert reference_rms(inf) == 0.0
    assert effective_atol(1e-2, 0.0, 5e-5) == 1e-2


def test_small_outputs_are_held_at_their_scale_not_exactly() -> None:
    g = torch.Generator().manual_seed(3)
    expected = torch.rand(1000, generator=g) * 1e-4  # RMS ~5.8e-5
    rms = reference_rms(expected)
    assert abs(rms - float(expected.double().pow(2).mean().sqrt())) < 1e-12
    assert compare_output(expected, expected + 0.5 * 1e-2 * rms, atol=1e-2, rtol=1e-2) == []
    assert compare_output(expected, expected + 3 * 1e-2 * rms, atol=1e-2, rtol=1e-2)
