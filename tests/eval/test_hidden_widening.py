"""Widened-input tasks: stay inside declared domains, keep the reference finite, else say inconclusive."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.harness.evaluation.hidden import NONFINITE_MARKER, widened_task
from cuda_agent.schemas.task import InputDomain, TaskManifest, TensorSpec

TEMPLATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.rand(64, 32)]


def get_init_inputs():
    return []
'''


def manifest(expr: str, low=None, high=None, kind="uniform") -> TaskManifest:
    spec = TensorSpec(name="input0", shape=[64, 32], dtype="float32",
                      domain=InputDomain(kind=kind, low=low, high=high, sampled_low=0.0, sampled_high=1.0))
    return TaskManifest.from_code("t/" + expr.split("(")[0], TEMPLATE.format(expr=expr), inputs=[spec],
                                  outputs=[TensorSpec(name="output0", shape=[64, 32], dtype="float32")])


def run_inputs(task: TaskManifest) -> list[torch.Tensor]:
    ns: dict = {}
    exec(compile(task.code, task.id, "exec"), ns)
    torch.manual_seed(0)
    return ns["get_inputs"]()


def test_relu_task_gets_negative_inputs_when_domain_is_all_reals():
    task = manifest("torch.relu(x)")
    wide, lines = widened_task(task, factor=4.0)
    assert wide is not None and wide.id == "t/torch.relu#widened" and wide.code_hash != task.code_hash
    assert lines == ["input0: uniform [0, 1) -> [-4, 4)"]
    (x,) = run_inputs(wide)
    assert x.dtype == torch.float32 and x.shape == (64, 32)
    assert x.min() < -1.0 and x.max() > 1.0 and x.min() >= -4.0 and x.max() <= 4.0
    # the original task is untouched and still non-negative
    (x0,) = run_inputs(task)
    assert x0.min() >= 0


def test_declared_domain_is_respected():
    wide, lines = widened_task(manifest("torch.log(x)", low=0.0), factor=4.0)
    assert lines == ["input0: uniform [0, 1) -> [0, 4)"]
    (x,) = run_inputs(wide)
    assert x.min() >= 0.0 and x.max() > 1.0


def test_widening_backs_off_until_reference_is_finite():
    # exp(50 x) overflows float32 above x ~ 1.77: halving twice gives [-1, 1.75)
    (x,) = run_inputs(widened_task(manifest("torch.exp(50 * x)"), factor=4.0)[0])
    assert x.max() <= 1.75 and x.min() < 0
    assert torch.isfinite(torch.exp(50 * x)).all()


def test_never_finite_reference_is_inconclusive():
    wide, _ = widened_task(manifest("torch.exp(1000 * x)"), factor=4.0)
    with pytest.raises(RuntimeError, match=NONFINITE_MARKER):
        run_inputs(wide)


def test_non_float_or_unprobed_inputs_are_not_widened():
    task = manifest("x")
    task.inputs[0].domain.kind = "index"
    assert widened_task(task)[0] is None
    unprobed = TaskManifest.from_code("t/x", TEMPLATE.format(expr="x"))
    wide, lines = widened_task(unprobed)
    assert wide is None and "not probed" in lines[0]
