"""A grading round of a slow candidate is cut to its time budget, checked as densely as a full one.

On the H200 the regrade of a starved one-block conv2d kernel (2.26 s per call) took 258 s of 33-call rounds, longer
than its whole episode; ``grade_round_budget_s`` fits the rounds to the candidate's pace, measured on the warm-up
call, before the checked calls are drawn.
"""

from __future__ import annotations

from cuda_agent.harness.timed_run import MIN_FITTED_CALLS, fitted_calls

SLOW_RELU = """
import time
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(0.1)
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""


def test_fitted_calls_keep_the_floor_and_never_exceed_the_plan() -> None:
    assert fitted_calls(33, warm_ms=2260.0, budget_s=10.0) == MIN_FITTED_CALLS
    assert fitted_calls(33, warm_ms=500.0, budget_s=10.0) == 20
    assert fitted_calls(33, warm_ms=3.0, budget_s=10.0) == 33
    assert fitted_calls(3, warm_ms=5000.0, budget_s=1.0) == 3
    assert fitted_calls(33, warm_ms=2260.0, budget_s=None) == 33


def test_a_slow_candidates_rounds_fit_the_budget_with_every_check(make_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    results = {}
    for budget in (None, 0.2):
        with make_evaluator(protocol={"grade_calls_per_round": 20, "grade_round_budget_s": budget,
                                      "grade_spot_checks": 8}) as ev:
            g = ev.grade(tasks.relu, make_ws(SLOW_RELU), kit)
        assert g.status.value == "correct" and g.timing is not None, g.summary_for_agent()
        results[budget] = g
    full, cut = results[None], results[0.2]
    fresh_full = full.timing.samples - 2 * 20
    assert fresh_full >= 0
    # 0.1 s per call into 0.2 s: the floor of five rotated calls per round (two rounds), plus the same fresh calls
    assert cut.timing.samples == 2 * MIN_FITTED_CALLS + fresh_full
    # the cap of 8 spot checks (4 per round) is drawn over the fitted calls: as many checks, over fewer calls
    assert cut.diagnostics.spot_checks == full.diagnostics.spot_checks == 8
    assert 90 <= cut.timing.median_ms <= 400  # still the candidate's own pace
