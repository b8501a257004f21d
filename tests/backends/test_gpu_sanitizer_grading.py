"""The sanitizer in trusted grading on the H200 (``pytest -m gpu tests/backends/test_gpu_sanitizer_grading.py``):
an out-of-bounds write that passes verification fails the grade with T21.sanitizer.memcheck and memcheck's first
report; honest kernels (one with shared memory, racechecked) grade correct with nothing ignored wrongly; ``score
--sanitizer`` runs it on every solution. Each test prints the seconds the sanitizer added (its cost per task)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cuda_agent.harness.tasks import load_task_code
from cuda_agent.plugin_manager import PluginManager

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]

RELU_TASK = '''import torch
import torch.nn as nn

batch_size = 10
dim = 100


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
OOB_CU = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_oob_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
  if (i == 0) y[n] = 0.f;  // one float past the output: inside the allocator's rounding, so verification passes
}

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_oob_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
"""
OOB_BINDING = r"""
#include "../binding_registry.h"
#include <cuda_runtime_api.h>

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && out.is_contiguous(), "relu_forward: contiguous CUDA tensors");
  const cudaError_t err = relu_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(),
                                      static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(relu_forward, relu_forward);
"""
OOB_MODEL_NEW = '''import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
'''


@pytest.fixture
def cuda_backend():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    made = []

    def make(grade_sanitizer: str):
        backend = PluginManager().registry.build(
            "backend", "cuda", {"harness": {"integrity": {"grade_sanitizer": grade_sanitizer}}})
        made.append(backend)
        return backend

    yield make
    for b in made:
        b.close()


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def test_an_out_of_bounds_write_passes_verify_and_fails_the_sanitized_grade(cuda_backend, tmp_path):
    task = load_task_code(RELU_TASK, "tests/relu_oob")
    backend = cuda_backend("memcheck")
    ws = backend.prepare_workspace(task, tmp_path / "ws")
    ws.write("kernels/relu.cu", OOB_CU)
    ws.write("kernels/relu_binding.cpp", OOB_BINDING)
    ws.write("model_new.py", OOB_MODEL_NEW)
    verified = backend.verify(ws, task)
    assert verified.status.value == "correct", verified.message  # the write past the end is invisible here
    graded, seconds = _timed(lambda: backend.grade(ws, task))
    assert graded.status.value == "rejected" and graded.rule == "T21.sanitizer.memcheck", graded.message
    info = graded.diagnostics.sanitizer
    assert info.phase == "grade" and info.findings >= 1 and "relu_oob_kernel" in info.first_report
    assert "Invalid __global__ write" in graded.message and graded.speedup_eager is None
    print(f"sanitized grade of the OOB kernel: {seconds:.1f} s")


@pytest.mark.parametrize("name", ["swish", "row_sum", "softmax"])
def test_honest_kernels_grade_correct_under_memcheck_and_racecheck(cuda_backend, tmp_path, name):
    import shutil

    from cuda_agent.harness.tasks import load_task_file

    task = load_task_file(REPO / "examples" / "tasks" / f"{name}.py")
    plain, sanitized = cuda_backend("off"), cuda_backend("memcheck+racecheck")
    times = {}
    for label, backend in (("plain", plain), ("sanitized", sanitized)):
        ws = backend.prepare_workspace(task, tmp_path / label)
        shutil.copytree(REPO / "examples" / "solutions" / "cuda" / name, ws.root, dirs_exist_ok=True)
        graded, times[label] = _timed(lambda: backend.grade(ws, task))
        assert graded.status.value == "correct", (label, graded.message[:800])
    info = graded.diagnostics.sanitizer
    assert info is not None and info.phase == "grade" and info.findings == 0
    print(json.dumps({"task": name, "grade_s": round(times["plain"], 1), "sanitized_grade_s": round(times["sanitized"], 1),
                      "sanitizer_cost_s": round(times["sanitized"] - times["plain"], 1), "ignored": info.ignored,
                      "last_tool": info.tool, "flags": graded.flags}))


def test_score_runs_the_sanitizer_on_every_solution(tmp_path):
    import torch

    from cuda_agent.cli import main

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    out = tmp_path / "score"
    rc = main(["score", str(REPO / "examples" / "solutions" / "cuda"), "--tasks", str(REPO / "examples" / "tasks"),
               "--backend", "cuda", "--sanitizer", "memcheck", "--out", str(out)])
    report = json.loads((out / "report.json").read_text())
    assert rc == 0, [(r["task"], r["status"], r["message"][:300]) for r in report["tasks"]]
    print(json.dumps({r["task"]: r["duration_s"] for r in report["tasks"]}))
