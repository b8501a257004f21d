"""Widened input sets: plans within each input's domain, and the tensors they make."""

from __future__ import annotations

import torch

from cuda_agent.harness.widening import (can_widen, finite_outputs, shrink_steps, widen_inputs, widen_plan,
                                         widen_plans)
from cuda_agent.schemas.task import InputDomain, TaskManifest, TensorSpec


def _spec(kind: str, low=None, high=None, s_lo=0.0, s_hi=1.0, dtype="float32") -> TensorSpec:
    return TensorSpec(name="input0", kind="tensor", shape=[64], dtype=dtype,
                      domain=InputDomain(kind=kind, low=low, high=high, sampled_low=s_lo, sampled_high=s_hi))


def test_rand_inputs_gain_signs_and_spread() -> None:
    plan, line = widen_plan(_spec("uniform"))
    assert plan == ["affine", 0.0, 1.0, -4.0, 4.0]
    x = torch.rand(10000, generator=torch.Generator().manual_seed(0))
    (y,) = widen_inputs(torch, [x], [plan], 1.0)
    assert float(y.min()) < -3.5 and float(y.max()) > 3.5 and y.dtype == x.dtype
    (half,) = widen_inputs(torch, [x], [plan], 0.5)
    assert -2.05 < float(half.min()) < -1.95  # halfway between the sampled range and the full widening


def test_declared_domains_are_kept() -> None:
    plan, _ = widen_plan(_spec("uniform", low=0.0))  # inputs of log: stay non-negative
    x = torch.rand(1000)
    (y,) = widen_inputs(torch, [x], [plan], 1.0)
    assert float(y.min()) >= 0.0 and float(y.max()) > 3.0
    plan, _ = widen_plan(_spec("normal", low=-1.0, high=1.0, s_lo=-0.9, s_hi=0.9))
    (z,) = widen_inputs(torch, [torch.randn(1000)], [plan], 1.0)
    assert float(z.abs().max()) <= 1.0


def test_discrete_inputs_and_unprobed_tasks_are_left_alone() -> None:
    assert widen_plan(_spec("integer"))[0] is None
    assert widen_plan(_spec("uniform", dtype="int64"))[0] is None
    idx = torch.arange(5)
    assert widen_inputs(torch, [idx], [["scale", 4.0, None, None, None]], 1.0)[0] is idx
    unprobed = TaskManifest.from_code("t", "x = 1")
    plans, lines = widen_plans(unprobed)
    assert not can_widen(plans) and "not probed" in lines[0]


def test_finite_outputs_and_backoff_steps() -> None:
    assert finite_outputs(torch, (torch.ones(3), torch.arange(3)))
    assert not finite_outputs(torch, torch.tensor([1.0, float("inf")]))
    assert shrink_steps() == [1.0, 0.5, 0.25, 0.125]
