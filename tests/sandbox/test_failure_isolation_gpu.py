"""Failure isolation on the GPU (issue 21, item 2): after an out-of-memory, an illegal address or a hang in one
candidate, the device's free memory comes back and the next honest candidate grades correct; a task too large for
the device, then an honest one, in one ``score`` run. Real processes, real kernels (``pytest -m gpu`` on the H200)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

KERNELS_CU = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void bad_write_kernel(float* y) { y[threadIdx.x] = 1.f; }
__global__ void hang_kernel(volatile int* flag) { while (*flag == 0) { } }

void relu_launch(const float* x, float* y, int64_t n) { relu_kernel<<<(n + 255) / 256, 256>>>(x, y, n); }
void illegal_launch() { bad_write_kernel<<<1, 32>>>(reinterpret_cast<float*>(16)); }
void hang_launch(int* flag) { hang_kernel<<<1, 1>>>(flag); }
"""

BINDING_CPP = r"""
#include "../binding_registry.h"
void relu_launch(const float* x, float* y, int64_t n);
void illegal_launch();
void hang_launch(int* flag);

void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  relu_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
void illegal_forward() { illegal_launch(); }
void hang_forward(const at::Tensor& flag) { hang_launch(flag.mutable_data_ptr<int>()); }
REGISTER_BINDING(relu_forward, relu_forward);
REGISTER_BINDING(illegal_forward, illegal_forward);
REGISTER_BINDING(hang_forward, hang_forward);
"""

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
"""

_HEAD = "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
HONEST = _HEAD + "        out = torch.empty_like(x)\n        cuda_extension.relu_forward(x, out)\n        return out\n"
FAILURES = {
    # 2 TiB: more than any GPU has; the caching allocator raises torch.OutOfMemoryError in the runner.
    "oom": _HEAD + "        big = torch.empty(2 ** 41, dtype=torch.uint8, device=x.device)\n        return big[:1]\n",
    "illegal_address": _HEAD + "        cuda_extension.illegal_forward()\n        torch.cuda.synchronize()\n        return x\n",
    "hang": _HEAD + "        flag = torch.zeros(1, dtype=torch.int32, device=x.device)\n"
                    "        cuda_extension.hang_forward(flag)\n        torch.cuda.synchronize()\n        return x\n",
}


def _free_bytes() -> int:
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).free)
    finally:
        pynvml.nvmlShutdown()


def _wait_for_free(at_least: int, seconds: float = 60.0) -> int:
    """Free device memory once it is back to ``at_least`` (a killed process's context takes a moment to go)."""
    deadline = time.monotonic() + seconds
    free = _free_bytes()
    while free < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
        free = _free_bytes()
    return free


@pytest.fixture(scope="module")
def kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    return kit_builder("isolation-kit", {"ops.cu": KERNELS_CU, "ops_binding.cpp": BINDING_CPP}, "cuda", HONEST)


@pytest.fixture(scope="module")
def task():  # type: ignore[no-untyped-def]
    from cuda_agent.harness.tasks import load_task_code

    return load_task_code(TASK, "tests/isolation_relu", device="cuda")


def _ws(tmp_path: Path, name: str, code: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "model.py").write_text(TASK)
    (root / "model_new.py").write_text(code)
    return root


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failure_leaves_the_device_as_it_found_it(make_evaluator, kit, task, tmp_path, failure) -> None:  # type: ignore[no-untyped-def]
    ev = make_evaluator("cuda", limits={"call_timeout_s": 20})
    try:
        warm = ev.verify(task, _ws(tmp_path, "warm", HONEST), kit)
        assert warm.status.value == "correct", warm.summary_for_agent()
        before = _free_bytes()
        bad = ev.verify(task, _ws(tmp_path, failure, FAILURES[failure]), kit)
        assert bad.status.value == ("timeout" if failure == "hang" else "error"), bad.summary_for_agent()
        after = _wait_for_free(before - 2**30)
        assert after >= before - 2**30, f"{(before - after) / 2**30:.1f} GiB still held after the {failure}"
        again = ev.verify(task, _ws(tmp_path, "again", HONEST), kit)
        assert again.status.value == "correct", again.summary_for_agent()
    finally:
        ev.close()


def test_a_too_large_task_then_an_honest_one_in_one_score_run(tmp_path: Path) -> None:
    import json

    from cuda_agent.cli import main

    tasks, solutions = tmp_path / "tasks", tmp_path / "solutions"
    tasks.mkdir()
    solutions.mkdir()
    # 800 GiB per set: no GPU holds one.
    (tasks / "a_huge.py").write_text(TASK.replace("torch.randn(4096, 4096)", "torch.rand(100, 1024 ** 3, 2)"))
    shutil.copy(ROOT / "examples" / "tasks" / "swish.py", tasks / "b_swish.py")
    for name in ("a_huge", "b_swish"):
        shutil.copytree(ROOT / "examples" / "solutions" / "cuda" / "swish", solutions / name)
    before = _free_bytes()
    rc = main(["score", str(solutions), "--tasks", str(tasks), "--backend", "cuda", "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    rows = {r["task"]: r for r in report["tasks"]}
    assert rows["a_huge"]["status"] == "too_large" and "GiB" in rows["a_huge"]["message"]
    assert rows["b_swish"]["status"] == "correct", rows["b_swish"]["message"]
    assert rc == 1  # not everything graded correct, and the run still went on to the end
    assert _wait_for_free(before - 2**30) >= before - 2**30
