"""The noise floor of ordinary sets (harness/noise_floor.py): an output that is float32 rounding noise (a GroupNorm
followed by a mean, KernelBench level2/23) is held to the reference's own noise, not to rtol of its RMS; outputs
that are well-conditioned keep the scale-aware tolerance. Real torch, the reference process's own set holder."""

from __future__ import annotations

import torch

from cuda_agent.harness import widening_gate
from cuda_agent.harness.compare import compare_output
from cuda_agent.harness.noise_floor import K, noise_floors
from cuda_agent.harness.reference_sets import HeldSets

TOL = {"*": (1e-2, 1e-2)}


class GroupNormMean(torch.nn.Module):
    """KernelBench level2/23_Conv3d_GroupNorm_Mean at small sizes (the output is float32 noise around 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 16, 3)
        self.group_norm = torch.nn.GroupNorm(4, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group_norm(self.conv(x)).mean(dim=[1, 2, 3, 4])


def _held(model, make, seed: int = 11):  # type: ignore[no-untyped-def]
    sets = HeldSets(torch, make, model, torch.device("cpu"))
    return sets, sets.make(0, seed)


def _floors(sets, held, intact: bool = True) -> dict[int, float]:  # type: ignore[no-untyped-def]
    return noise_floors(torch, sets.model, held, TOL, lambda: intact)


def _group_norm_mean_other_order(model: GroupNormMean, x: torch.Tensor) -> torch.Tensor:
    """An honest float32 kernel: the same maths, per group with a two-pass variance, summed in another order."""
    y = model.conv(x)
    n, c = y.shape[:2]
    g = y.reshape(n, 4, -1)
    mean = g.flip(-1).sum(-1, keepdim=True) / g.shape[-1]
    var = ((g - mean) ** 2).mean(-1, keepdim=True)
    z = ((g - mean) / torch.sqrt(var + 1e-5)).reshape(y.shape)
    z = z * model.group_norm.weight.view(1, c, 1, 1, 1) + model.group_norm.bias.view(1, c, 1, 1, 1)
    return z.reshape(n, -1).flip(-1).cumsum(-1)[:, -1] / z[0].numel()


def test_honest_group_norm_mean_passes_with_the_floor_and_failed_without() -> None:
    torch.manual_seed(0)
    model = GroupNormMean().train(True)
    sets, held = _held(model, lambda: [torch.rand(8, 3, 6, 8, 8)])
    (expected,) = held.expected
    x = held.inputs[0]
    with torch.no_grad():
        exact = torch.nn.functional.group_norm(
            torch.nn.functional.conv3d(x.double(), model.conv.weight.double(), model.conv.bias.double()), 4,
            model.group_norm.weight.double(), model.group_norm.bias.double()).mean(dim=[1, 2, 3, 4]).float()
        other = _group_norm_mean_other_order(model, x)
    # The problem: without the floor only the reference itself passes (atol = 1e-2 * RMS ~ 1e-10).
    assert compare_output(expected, exact, atol=1e-2, rtol=1e-2)
    assert compare_output(expected, other, atol=1e-2, rtol=1e-2)
    floors = _floors(sets, held)
    assert set(floors) == {0} and 0.0 < floors[0] < 1e-4
    for honest in (exact, other):
        assert compare_output(expected, honest, atol=1e-2, rtol=1e-2, noise=floors[0]) == []
    # Still far from anything: an output of 1e-3 everywhere is not noise.
    (err,) = compare_output(expected, torch.full_like(expected, 1e-3), atol=1e-2, rtol=1e-2, noise=floors[0])
    assert "noise floor applied" in err.message and err.details["noise_floor"] == floors[0]
    assert _floors(sets, held) is held.noise  # measured once per set


def test_constant_softmax_over_16k_columns_still_fails() -> None:
    sets, held = _held(lambda v: torch.softmax(v, -1), lambda: [torch.randn(8, 16384)])
    (expected,) = held.expected
    floors = _floors(sets, held)
    assert floors[0] < 1e-2 * float(expected.pow(2).mean().sqrt())  # well-conditioned: below the scale-aware atol
    constant = torch.full_like(expected, 1.0 / expected.shape[1])
    (err,) = compare_output(expected, constant, atol=1e-2, rtol=1e-2, noise=floors[0])
    assert err.check == "tolerance" and "RMS magnitude" in err.message and "noise floor" not in err.message


def test_zero_output_of_a_small_well_conditioned_task_still_fails() -> None:
    sets, held = _held(lambda v: v * 1e-4, lambda: [torch.randn(64, 256)])
    (expected,) = held.expected
    floors = _floors(sets, held)
    assert floors[0] < 1e-9
    assert compare_output(expected, torch.zeros_like(expected), atol=1e-2, rtol=1e-2, noise=floors[0])
    assert compare_output(expected, expected * (1 + 1e-6), atol=1e-2, rtol=1e-2, noise=floors[0]) == []


def test_unit_scale_integer_tampered_and_too_large_sets_are_not_measured(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sets, held = _held(lambda v: v * 3, lambda: [torch.randn(64, 64)])
    assert _floors(sets, held) == {}  # RMS 3: the paper's atol, nothing to floor
    sets, held = _held(lambda v: (v > 0).long(), lambda: [torch.randn(64, 64)])
    assert _floors(sets, held) == {}  # integer outputs: exact match, unchanged
    make = lambda: [torch.rand(4, 3, 5, 6, 6)]  # noqa: E731
    torch.manual_seed(0)
    sets, held = _held(GroupNormMean(), make)
    assert _floors(sets, held, intact=False) == {}  # inputs a candidate wrote into: no floor
    monkeypatch.setattr(widening_gate, "GATE_MAX_BYTES", 16)
    sets, held = _held(sets.model, make)
    assert _floors(sets, held) == {}  # above the memory bound: as before (scale-aware atol only)


def test_k_leaves_a_factor_two_over_float64_on_noise_outputs() -> None:
    torch.manual_seed(1)
    model = GroupNormMean().train(True)
    sets, held = _held(model, lambda: [torch.rand(8, 3, 6, 8, 8)], seed=5)
    with torch.no_grad():
        exact = torch.nn.functional.group_norm(
            torch.nn.functional.conv3d(held.inputs[0].double(), model.conv.weight.double(), model.conv.bias.double()),
            4, model.group_norm.weight.double(), model.group_norm.bias.double()).mean(dim=[1, 2, 3, 4]).float()
    err = float((exact - held.expected[0]).abs().max())
    assert err * 2 <= _floors(sets, held)[0] <= K * err * 8
