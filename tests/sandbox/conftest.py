"""Shared artifacts of the sandbox/evaluator tests.

One real CPU extension (``cuda_extension`` with relu/add/scale kernels) is
built once per session with the harness's own ``build_extension``; every
candidate variant is a workspace folder with its own ``model_new.py`` that
imports that module. One Evaluator per task is shared too (its reference
process stays warm), so the whole folder pays for torch imports only a few
times.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent.schemas.task import TaskManifest

KERNEL_CPP = r"""
#include <cstdint>
void relu_cpu(const float* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void add_cpu(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void scale_cpu(const float* x, float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
"""

BINDING_CPP = r"""
#include "../binding_registry.h"
void relu_cpu(const float* x, float* y, int64_t n);
void add_cpu(const float* a, const float* b, float* y, int64_t n);
void scale_cpu(const float* x, float* y, float s, int64_t n);

void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  relu_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
void add_forward(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  add_cpu(a.const_data_ptr<float>(), b.const_data_ptr<float>(), out.mutable_data_ptr<float>(), a.numel());
}
void scale_forward(const at::Tensor& x, const at::Tensor& out, double s) {
  scale_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), static_cast<float>(s), x.numel());
}
REGISTER_BINDING(relu_forward, relu_forward);
REGISTER_BINDING(add_forward, add_forward);
REGISTER_BINDING(scale_forward, scale_forward);
"""

RELU_TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    batch_size = 8
    dim = 256


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return []
    """
)

ADD_RELU_TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, a, b):
            s = a + b
            return torch.relu(s), s * self.scale


    def get_inputs():
        return [torch.randn(4, 128), torch.randn(4, 128)]


    def get_init_inputs():
        return [0.5]
    """
)


def task_of(name: str, code: str) -> TaskManifest:
    """A manifest straight from code (the evaluator needs only code and ids)."""
    return TaskManifest.from_code(f"tests/{name}", code)


@pytest.fixture(scope="session")
def tasks() -> SimpleNamespace:
    """The test tasks: ``relu`` (one input, one output), ``add_relu`` (two in, two out, an init input)."""
    return SimpleNamespace(relu=task_of("relu", RELU_TASK), add_relu=task_of("add_relu", ADD_RELU_TASK))


@pytest.fixture(scope="session")
def kit_builder(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``build(name, kernels, kind, model_new="")``: build a real ``cuda_extension`` from ``{file: text}`` under
    ``kernels/`` with the harness's own ``build_extension``; returns the .so path."""
    from cuda_agent.harness.build import build_extension
    from cuda_agent.harness.layout import binding_sources

    def build(name: str, kernels: dict[str, str], kind: str, model_new: str = "") -> Path:
        root = tmp_path_factory.mktemp(name) / "ws"
        (root / "kernels").mkdir(parents=True)
        for rel, text in binding_sources().items():
            (root / rel).write_text(text)
        for rel, text in kernels.items():
            (root / "kernels" / rel).write_text(text)
        (root / "model_new.py").write_text(model_new)
        outcome = build_extension(root, kind, root.parent / "build", timeout_s=900)
        assert outcome.ok, outcome.log
        assert outcome.so_path is not None
        return outcome.so_path

    return build


@pytest.fixture(scope="session")
def kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    """Path of a built ``cuda_extension`` .so with relu/add/scale kernels (CPU)."""
    return kit_builder("kit", {"ops.cpp": KERNEL_CPP, "ops_binding.cpp": BINDING_CPP}, "cpu")


HONEST_RELU_MODEL_NEW = """
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""


@pytest.fixture(scope="session")
def honest_relu() -> str:
    """``model_new.py`` of the relu task calling ``cuda_extension.relu_forward`` (every kit here has one)."""
    return HONEST_RELU_MODEL_NEW


@pytest.fixture
def run_score(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``run(solutions, tasks, out) -> report.json``: ``cuda-agent score`` on the CPU backend with small settings."""
    import json

    from cuda_agent.cli import main

    def run(solutions: Path, tasks: Path, out: Path) -> dict:
        cfg = tmp_path / "score.yaml"
        cfg.write_text(
            "plugins:\n  cpu:\n    harness:\n      verify: {input_sets: 2}\n"
            f"      timing: {{preset: quick, compile_baseline: false, baseline_cache_dir: {tmp_path / 'bl'}}}\n"
        )
        rc = main(["score", str(solutions), "--tasks", str(tasks), "--backend", "cpu", "--out", str(out), "-c", str(cfg)])
        report = json.loads((out / "report.json").read_text())
        all_correct = bool(report["tasks"]) and all(r["status"] == "correct" for r in report["tasks"])
        assert rc == (0 if all_correct else 1)  # the exit code reflects failures
        return report

    return run


#: The timing protocol of the tests here: few calls, two grading rounds (overrides of the CPU 'standard' preset).
TEST_PROTOCOL = {"min_calls": 5, "max_calls": 12, "warmup_calls": 1, "rotation_sets": 2, "spot_check_every": 2,
                 "grade_rounds": 2}


@pytest.fixture(scope="session")
def settings_factory(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``make(**blocks) -> (HarnessSettings, ExperimentSettings)`` for tests: small, fast, own baseline cache.

    Keyword arguments: ``verify``, ``timing``, ``sandbox``, ``limits``, ``integrity`` (dicts merged over the test
    defaults of those blocks), ``protocol`` (timing protocol fields over :data:`TEST_PROTOCOL`), and any other
    :class:`~cuda_agent.harness.experiments.ExperimentSettings` field."""
    from cuda_agent.harness.experiments import ExperimentSettings
    from cuda_agent.harness.settings import HarnessSettings

    cache = tmp_path_factory.mktemp("baselines")

    def make(*, verify=None, timing=None, sandbox=None, limits=None, integrity=None, protocol=None, **experiments):  # type: ignore[no-untyped-def]
        settings = HarnessSettings(
            verify={"input_sets": 3, **(verify or {})},
            timing={"compile_baseline": False, "baseline_cache_dir": cache, **(timing or {})},
            sandbox=sandbox or {},
            limits={"memory_mb": 2048, "call_timeout_s": 60, **(limits or {})},
            integrity=integrity or {},
        )
        return settings, ExperimentSettings(timing={**TEST_PROTOCOL, **(protocol or {})}, **experiments)

    return make


@pytest.fixture(scope="session")
def make_evaluator(settings_factory):  # type: ignore[no-untyped-def]
    """``make(kind="cpu", **blocks) -> Evaluator`` with :func:`settings_factory`'s settings (close it yourself)."""
    from cuda_agent.harness.evaluator import Evaluator

    def make(kind: str = "cpu", **blocks):  # type: ignore[no-untyped-def]
        settings, experiments = settings_factory(**blocks)
        return Evaluator(kind, settings, experiments=experiments)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def cpu_evaluator(make_evaluator) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A shared CPU Evaluator (warm reference processes, pre-started runners) with the CPU 'standard' preset's
    wider ``fresh_set_slack`` (host-timed calls are noisier)."""
    ev = make_evaluator()
    yield ev
    ev.close()


@pytest.fixture
def make_ws(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a candidate workspace holding ``model_new.py`` (and a model.py copy)."""

    counter = {"n": 0}

    def make(model_new: str, task_code: str = RELU_TASK) -> Path:
        counter["n"] += 1
        root = tmp_path / f"ws{counter['n']}"
        root.mkdir()
        (root / "model.py").write_text(task_code)
        (root / "model_new.py").write_text(textwrap.dedent(model_new))
        return root

    return make


def caching_relu_kernel(miss_ms: int, full_key: bool = False) -> str:
    """A ReLU that caches outputs keyed by eight sampled input elements (THREATS: a content-keyed result cache):
    a miss computes and then spins ``miss_ms`` (a costly computation stands behind it), a hit copies the stored
    output. ``full_key``: the key hashes every element instead (the widened ``dup`` sets, near duplicates of a seen
    set, then miss and get right outputs, so only the timing rules can see it). Exported as ``caching_relu_cpu``;
    :data:`CACHING_RELU_BINDING` binds it as ``relu_forward``."""
    return r"""
#include <chrono>
#include <cstdint>
#include <cstring>
static uint64_t keys[64];
static float* outs[64];
static int used = 0;
static uint64_t key_of(const float* x, int64_t n) {  // KEY_ELEMENTS sampled elements (8: cheap, unique per input set)
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < KEY_ELEMENTS; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[(i * n) / KEY_ELEMENTS], 4);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}
void caching_relu_cpu(const float* x, float* y, int64_t n) {
  uint64_t k = key_of(x, n);
  for (int i = 0; i < used; ++i)
    if (keys[i] == k) { std::memcpy(y, outs[i], n * 4); return; }
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(MISS_MS)) {}
  if (used < 64) { outs[used] = new float[n]; std::memcpy(outs[used], y, n * 4); keys[used++] = k; }
}
""".replace("MISS_MS", str(miss_ms)).replace("KEY_ELEMENTS", "n" if full_key else "8")


CACHING_RELU_BINDING = r"""
#include "../binding_registry.h"
void caching_relu_cpu(const float* x, float* y, int64_t n);
void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  caching_relu_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
REGISTER_BINDING(relu_forward, relu_forward);
"""
