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

@pytest.fixture(scope="module")
def lazy_kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    return kit_builder("lazy-kit", {"lazy.cpp": LAZY_KERNEL, "lazy_binding.cpp": LAZY_BINDING}, "cpu")


def test_cheat_after_verify_is_caught_by_profile_spot_checks_and_by_grading(make_evaluator, make_ws, lazy_kit, tasks,
                                                                          honest_relu):
    protocol = {"reverify_sets": 1, "spot_check_every": 3, "spot_check_max": 2, "min_calls": 10, "max_calls": 20}
    with make_evaluator(protocol=protocol) as ev:
        ws = make_ws(honest_relu)
        verified = ev.verify(tasks.relu, ws, lazy_kit)
        assert verified.status.value == "correct", verified.summary_for_agent()  # 4 honest calls: the cheat hides
        profiled = ev.profile(tasks.relu, ws, lazy_kit)
        assert profiled.diagnostics.reverified_sets == 1
        assert profiled.status.value == "incorrect", profiled.summary_for_agent()
        graded = ev.grade(tasks.relu, ws, lazy_kit)
        assert graded.status.value == "incorrect", graded.summary_for_agent()


def test_grading_spot_checks_are_capped_and_drawn_across_the_rounds(make_evaluator, make_ws, kit, tasks, honest_relu):
    protocol = {"min_calls": 10, "max_calls": 30, "grade_rounds": 3, "grade_spot_checks": 5, "spot_check_every": 2}
    with make_evaluator(verify={"input_sets": 2}, protocol=protocol) as ev:
        graded = ev.grade(tasks.relu, make_ws(honest_relu), kit)
        assert graded.status.value == "correct", graded.summary_for_agent()
        # Not the 15 that every 2nd of 30 calls would be. (A round that looked again at a gap on the fresh sets,
        # which noise can open, adds its share: a third of the cap; uncapped, every 2nd of its 10 calls.)
        looked_again = graded.diagnostics.fresh_sets.first_look is not None
        assert graded.diagnostics.spot_checks == 5 + (5 // 3 if looked_again else 0)
    with make_evaluator(verify={"input_sets": 2}, protocol={**protocol, "grade_spot_checks": None}) as ev:
        graded = ev.grade(tasks.relu, make_ws(honest_relu), kit)
        looked_again = graded.diagnostics.fresh_sets.first_look is not None
        assert graded.diagnostics.spot_checks == 15 + (5 if looked_again else 0)
