"""A kernel that is honest for its first calls in a process, then stops computing (T12/T13).

Verify sees only honest calls; the profile's spot checks (capped per call, see
``spot_check_max``) and the grading pass must still catch it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LAZY_KERNEL = r"""
#include <cstdint>
static int64_t calls = 0;
void lazy_relu_cpu(const float* x, float* y, int64_t n) {
  // Honest while the harness verifies (a handful of calls per process), then only the first element.
  int64_t upto = (++calls <= 6) ? n : 1;
  for (int64_t i = 0; i < upto; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  for (int64_t i = upto; i < n; ++i) y[i] = 0.f;
}
"""

LAZY_BINDING = r"""
#include "../binding_registry.h"
void lazy_relu_cpu(const float* x, float* y, int64_t n);
void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  lazy_relu_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
REGISTER_BINDING(relu_forward, relu_forward);
"""

MODEL_NEW = """
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""


@pytest.fixture(scope="module")
def lazy_kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cuda_agent.harness.build import build_extension
    from cuda_agent.harness.layout import binding_sources

    root = tmp_path_factory.mktemp("lazy-kit") / "ws"
    (root / "kernels").mkdir(parents=True)
    for rel, text in binding_sources().items():
        (root / rel).write_text(text)
    (root / "kernels" / "lazy.cpp").write_text(LAZY_KERNEL)
    (root / "kernels" / "lazy_binding.cpp").write_text(LAZY_BINDING)
    (root / "model_new.py").write_text(MODEL_NEW)
    outcome = build_extension(root, "cpu", root.parent / "build", timeout_s=900)
    assert outcome.ok, outcome.log
    assert outcome.so_path is not None
    return outcome.so_path


def test_cheat_after_verify_is_caught_by_profile_spot_checks_and_by_grading(settings_factory, make_ws, lazy_kit, tasks):
    from cuda_agent.harness.evaluator import Evaluator

    settings = settings_factory(n_input_sets=3, reverify_sets=1, spot_check_every=3, spot_check_max=2,
                                min_timed_calls=10, max_timed_calls=20)
    with Evaluator("cpu", settings) as ev:
        ws = make_ws(MODEL_NEW)
        verified = ev.verify(tasks.relu, ws, lazy_kit)
        assert verified.status.value == "correct", verified.summary_for_agent()  # 4 honest calls: the cheat hides
        profiled = ev.profile(tasks.relu, ws, lazy_kit)
        assert profiled.extra.get("reverified_sets") == 1
        assert profiled.status.value == "incorrect", profiled.summary_for_agent()
        graded = ev.grade(tasks.relu, ws, lazy_kit)
        assert graded.status.value == "incorrect", graded.summary_for_agent()
