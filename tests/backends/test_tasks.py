"""The task probe: example tasks, value domains, CPU_SIZES, and bad tasks with clear errors."""

from __future__ import annotations

import pytest

from cuda_agent.harness.tasks import (
    CPU_SIZES_MARKER,
    TaskProbeError,
    apply_cpu_sizes,
    load_task_code,
    load_task_file,
)

from .conftest import EXAMPLE_TASKS, TASKS

EXPECTED_CPU = {
    "swish": ([[16, 1024]], [[16, 1024]], []),
    "row_sum": ([[32, 512]], [[32, 1]], []),
    "softmax": ([[16, 1000]], [[16, 1000]], []),
    "gemm_bias_relu": ([[64, 256]], [[64, 128]], [256, 128]),
    "conv2d_relu": ([[2, 4, 16, 16]], [[2, 8, 16, 16]], [4, 8, 3]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_example_tasks_probe_at_cpu_sizes(name):
    task = load_task_file(TASKS / f"{name}.py", id=f"examples/{name}", sizes="cpu")
    inputs, outputs, init = EXPECTED_CPU[name]
    assert [i.shape for i in task.inputs] == inputs
    assert [o.shape for o in task.outputs] == outputs
    assert task.init_inputs == init
    assert all(i.dtype == "float32" and i.domain.kind == "normal" for i in task.inputs)
    assert task.outputs[0].dtype == "float32" and not task.stochastic
    assert task.bytes_moved and task.bytes_moved > 0
    assert CPU_SIZES_MARKER in task.code and task.meta["sizes"] == "cpu"
    if name == "gemm_bias_relu":
        assert task.flops == 2 * 64 * 256 * 128  # FlopCounterMode counts the addmm
    if name == "conv2d_relu":
        assert task.flops == 2 * 2 * 8 * 16 * 16 * 4 * 9


DOMAINS_TASK = '''
import torch
import torch.nn as nn

n = 64
INPUT_DOMAINS = {3: {"low": -5.0, "high": 5.0}}

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, pos, idx, flags, anything, k):
        print("noise from the task goes to stderr")
        return torch.log(pos) * self.scale + idx.float() + flags.float() + anything * k

def get_inputs():
    pos = torch.rand(n) + 0.1
    idx = torch.randint(0, 10, (n,))
    flags = torch.rand(n) > 0.5
    return [pos, idx, flags, torch.randn(n), 3]

def get_init_inputs():
    return [2.0]
'''


@pytest.mark.slow
def test_domains_scalars_and_declared_domains():
    task = load_task_code(DOMAINS_TASK, "t/domains", device="cpu")
    pos, idx, flags, anything, k = task.inputs
    assert pos.domain.kind == "uniform" and pos.domain.low == 0.0 and pos.domain.high is None
    assert 0.1 <= pos.domain.sampled_low < pos.domain.sampled_high < 1.1
    assert idx.dtype == "int64" and idx.domain.kind == "integer"
    assert 0 <= idx.domain.low <= idx.domain.high <= 9
    assert flags.domain.kind == "bool"
    assert anything.domain.kind == "normal" and (anything.domain.low, anything.domain.high) == (-5.0, 5.0)
    assert k.kind == "int" and k.value == 3
    assert task.init_inputs == [2.0]


def test_cpu_sizes_are_applied_visibly_and_checked():
    code = (TASKS / "swish.py").read_text()
    scaled = apply_cpu_sizes(code)
    assert scaled.startswith(code.rstrip("\n")) and scaled.endswith("globals().update(CPU_SIZES)\n")
    assert apply_cpu_sizes(scaled) == scaled
    with pytest.raises(TaskProbeError, match="no module-level CPU_SIZES"):
        apply_cpu_sizes("x = 1\n")
    with pytest.raises(TaskProbeError, match="'batch'.*valid: batch_size"):
        apply_cpu_sizes("batch_size = 4\nCPU_SIZES = {'batch': 2}\n")


def test_syntax_error_is_reported_without_running():
    with pytest.raises(TaskProbeError, match=r"\[syntax_error\] line 1"):
        load_task_code("def broken(:\n", "t/bad")


BAD_TASKS = {
    "missing_definition": "import torch\ndef get_inputs():\n    return [torch.randn(2)]\ndef get_init_inputs():\n    return []\n",
    "inputs_error": (
        "import torch, torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    raise ValueError('no inputs today')\ndef get_init_inputs():\n    return []\n"
    ),
    "timeout": (
        "import torch, torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    while True:\n        pass\ndef get_init_inputs():\n    return []\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BAD_TASKS))
def test_bad_tasks_fail_with_their_kind(kind):
    with pytest.raises(TaskProbeError) as info:
        load_task_code(BAD_TASKS[kind], f"t/{kind}", device="cpu", timeout_s=3)
    assert info.value.kind == kind
    text = str(info.value)
    if kind == "missing_definition":
        assert "Model" in text and "get_init_inputs" not in text.split("define")[1].split(";")[0]
    if kind == "inputs_error":
        assert "no inputs today" in text
    if kind == "timeout":
        assert "longer than the limit" in text


def test_missing_task_file_names_the_path(tmp_path):
    with pytest.raises(TaskProbeError, match="does not exist"):
        load_task_file(tmp_path / "nope.py")
