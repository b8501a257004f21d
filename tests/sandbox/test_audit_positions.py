"""The op audit cannot be stepped round by counting calls (session 36's third red-team round): it used to watch the
first verification call only, always the candidate's first forward, so a model that kept ATen compute off its first
call and used it on every later one was graded correct. Now one more verification call at a secret position and
one call at a secret position of every timed batch (its time dropped) run under the audit too. The static rules are
bypassed here (the evaluator is called directly): only the runtime layer is under test."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

#: relu by Python arithmetic on the first call (no ATen compute: the audited one), by torch.relu after it.
COUNTED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 1:
            flat = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
            return torch.tensor(flat, dtype=x.dtype).view(x.shape)
        return torch.relu(x)
'''

#: The same Python arithmetic on every call: no ATen compute anywhere (the control).
PYTHON_ONLY = COUNTED.replace("if self.calls == 1:", "if True:")


def test_aten_compute_kept_off_the_first_call_is_refused_in_grading(make_evaluator, make_ws, tasks) -> None:
    with make_evaluator() as ev:
        control = ev.grade(tasks.relu, make_ws(PYTHON_ONLY), None)
        graded = ev.grade(tasks.relu, make_ws(COUNTED), None)
    assert control.status.value == "correct", control.summary_for_agent()
    assert graded.status.value == "rejected", graded.summary_for_agent()
    assert graded.rule == "T1.runtime.aten_compute", graded.summary_for_agent()


#: ATen compute only past the 20th call: past every verification call, on timed calls alone.
TIMED_ONLY = COUNTED.replace("if self.calls == 1:", "if self.calls <= 20:")


def test_aten_compute_on_timed_calls_alone_is_refused_and_the_audited_calls_time_is_dropped(
        make_evaluator, make_ws, tasks) -> None:
    with make_evaluator(protocol={"grade_calls_per_round": 12, "grade_rounds": 3}) as ev:
        control = ev.grade(tasks.relu, make_ws(PYTHON_ONLY), None)
        graded = ev.grade(tasks.relu, make_ws(TIMED_ONLY), None)
    assert control.status.value == "correct", control.summary_for_agent()
    fresh = control.diagnostics.fresh_sets.calls
    # 12 rotated calls per round and the fresh-set calls: each round's audited call is not a sample
    assert control.timing.samples == 36 + fresh, (control.timing, fresh)
    assert graded.status.value == "rejected" and graded.rule == "T1.runtime.aten_compute", graded.summary_for_agent()
