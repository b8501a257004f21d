"""A set being made in the reference process costs one set's inputs, its outputs and the forward's temporaries.

KernelBench reductions have 8 GiB inputs: the out-of-place widening chain (four input-sized tensors alive at once)
and a copy of the inputs for the reference's own forward ran the reference out of device memory on an H100 beside
sessions the budget had admitted. The widening now allocates one tensor and works in place on it, and the forward
runs on the held inputs (a reference that writes into them is caught by their fingerprints).
"""

from __future__ import annotations

import pytest
import torch

from cuda_agent.harness.reference_sets import HeldSets, generate_inputs
from cuda_agent.harness.widening import widen_inputs, widen_tensor

AFFINE = ["affine", 0.0, 1.0, -4.0, 4.0]


def _chain(x: torch.Tensor, plan: list, shrink: float) -> torch.Tensor:
    """The out-of-place arithmetic the widening has always meant (the results must not change by a bit)."""
    kind, a, b, lo, hi = plan
    if kind == "affine":
        u = (x - a) / (b - a)
        y = (a + (lo - a) * shrink) + u * ((b + (hi - b) * shrink) - (a + (lo - a) * shrink))
    else:
        y = x * (1.0 + (a - 1.0) * shrink)
    if lo is not None or hi is not None:
        y = y.clamp(min=lo, max=hi)
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("plan", [AFFINE, ["affine", -1.0, 1.0, 0.0, 4.0], ["scale", 4.0, None, None, None],
                                  ["scale", 4.0, None, -1.0, 2.5]])
@pytest.mark.parametrize("shrink", [1.0, 0.5, 0.0625])
def test_widening_gives_the_out_of_place_chain_bit_for_bit(dtype: torch.dtype, plan: list, shrink: float) -> None:
    x = torch.rand(4099, generator=torch.Generator().manual_seed(3)).to(dtype)
    kept = x.clone()
    y = widen_tensor(x, plan, shrink)
    assert torch.equal(y, _chain(x, plan, shrink)) and y.dtype == dtype
    assert torch.equal(x, kept)  # the pristine tensor is never written
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_an_expanded_input_is_widened_into_a_dense_tensor() -> None:
    x = torch.rand(1, 64).expand(32, 64)
    y = widen_tensor(x, AFFINE, 1.0)
    assert y.is_contiguous() and y.shape == (32, 64) and torch.equal(y, _chain(x, AFFINE, 1.0))


def test_consume_replaces_each_entry_in_the_callers_list() -> None:
    a, b = torch.rand(8), torch.arange(8)
    inputs = [a, b, 3]
    out = widen_inputs(torch, inputs, [AFFINE, AFFINE, None], 1.0, consume=True)
    assert out is inputs and out[0] is not a and out[1] is b and out[2] == 3
    fresh = [a, b]
    assert widen_inputs(torch, fresh, [AFFINE, None], 1.0) is not fresh and fresh[0] is a


class _WritesIntoInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(3.0)  # a reference that scales its input in place, then returns a new tensor
        return x + 1.0


class _Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def _get_inputs() -> list[torch.Tensor]:
    return [torch.randn(256, 33)]


def _sets(model: torch.nn.Module) -> HeldSets:
    return HeldSets(torch, _get_inputs, model, torch.device("cpu"))


@pytest.mark.parametrize("widen", [None, [AFFINE]])
def test_a_reference_that_writes_into_its_inputs_keeps_the_pristine_ones(widen: list | None) -> None:
    sets = _sets(_WritesIntoInput())
    held = sets.make(0, seed=11, widen=widen)
    assert held is not None
    pristine = generate_inputs(torch, _get_inputs, 11, torch.device("cpu"))
    if widen is not None:
        pristine = widen_inputs(torch, pristine, widen, held.shrink)
    assert torch.equal(held.inputs[0], pristine[0])
    assert torch.equal(held.expected[0], pristine[0] * 3.0 + 1.0)
    assert held.fingerprints == sets.fingerprints_of(held.inputs)
    assert sets.changed() == []


def test_an_identity_reference_keeps_an_expected_output_apart_from_the_input() -> None:
    sets = _sets(_Identity())
    held = sets.make(0, seed=5)
    assert held is not None and torch.equal(held.expected[0], held.inputs[0])
    assert held.expected[0].untyped_storage().data_ptr() != held.inputs[0].untyped_storage().data_ptr()
    held.inputs[0].add_(1.0)  # what a candidate writing through IPC would do to the pristine inputs (T5)
    assert sets.changed() == [0]


def test_a_regenerated_widened_set_matches_its_fingerprints() -> None:
    sets = _sets(_Identity())
    held = sets.make(2, seed=9, widen=[AFFINE])
    assert held is not None and held.shrink is not None
    sets.regenerate(2)
    assert sets.changed() == [] and float(held.inputs[0].abs().max()) > 1.0


class _Reduce(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_making_a_widened_set_on_cuda_peaks_at_two_inputs_not_five() -> None:
    """The shape of KernelBench level1/47_Sum_reduction (an input-sized set, a tiny output), 1 GiB instead of 8."""
    device = torch.device("cuda")
    n = 1 << 28  # 1 GiB of fp32

    def get_inputs() -> list[torch.Tensor]:
        return [torch.rand(1 << 14, n >> 14)]

    sets = HeldSets(torch, get_inputs, _Reduce(), device)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    held = sets.make(0, seed=1, widen=[AFFINE])
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    assert held is not None
    # the pristine input and the widened one, for a moment; the forward runs on the held input (no copy)
    assert peak <= 2 * 4 * n + (64 << 20), f"peak {peak / 2**30:.2f} GiB"
    # held afterwards: the input, its expected output (64 KiB here) and the fingerprints' int8 weight matrix (32 KiB,
    # made once per process: harness/checksum.py) and the cuBLAS workspace its int8 product takes (torch keeps it per
    # handle; 32 MiB at most on sm_90). Session 32's three-pass checksum held a 64 MiB table instead.
    held = torch.cuda.memory_allocated() - base
    assert held <= 4 * n + 4 * (1 << 14) + (33 << 20), f"held {(held - 4 * n) / 2**20:.2f} MiB beyond the input"


def test_releasing_a_sets_exports_frees_each_allocation_once_and_keeps_the_set() -> None:
    sets = _sets(_Identity())
    held = sets.make(4, seed=3)
    assert held is not None
    held.exports, held.export_bytes = [11, 12], [100, 28]
    freed: list[int] = []
    assert sets.release_exports(4, freed.append) == (2, 128)
    assert freed == [11, 12] and 4 in sets and held.exports == [] and held.export_bytes == []
    assert sets.release_exports(4, freed.append) == (0, 0) and freed == [11, 12]  # nothing left to free
    assert sets.release_exports(99, freed.append) == (0, 0)  # a set this process does not hold
