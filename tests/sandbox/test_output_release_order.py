"""The previous call's outputs are released before the next call's inputs are staged (session 37's red team).

Freeing an output can run the candidate's code: a C++ storage deleter, or here a ``weakref.finalize`` callback. The
runner staged the next inputs into buffers at fixed addresses and only then dropped the previous outputs, so that
code could compute the next output from the staged inputs before the timer started (reward 3 with a deleter on the
CPU backend). The static rules are bypassed here (the evaluator is called directly): only the runner's order is
under test. The finalizer computes relu of whatever its saved view of the staging buffer holds, and ``forward``
returns that: right only where the finalizer runs after the staging."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

PRECOMPUTE = '''
import weakref

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.view = None
        self.ready = None

    def _ahead(self):
        self.ready = torch.relu(self.view)

    def forward(self, x):
        if self.ready is None:
            flat = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
            out = torch.tensor(flat, dtype=x.dtype).view(x.shape)
        else:
            out = self.ready.clone()
        self.view, self.ready = x, None
        weakref.finalize(out, self._ahead)
        return out
'''

#: The same first-call arithmetic on every call (the control: no code outside the call).
HONEST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        flat = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
        return torch.tensor(flat, dtype=x.dtype).view(x.shape)
'''


def test_code_run_by_freeing_the_previous_output_never_sees_the_next_inputs(make_evaluator, make_ws, tasks) -> None:
    with make_evaluator() as ev:
        control = ev.grade(tasks.relu, make_ws(HONEST), None)
        graded = ev.grade(tasks.relu, make_ws(PRECOMPUTE), None)
    assert control.status.value == "correct", control.summary_for_agent()
    # Before the fix: 'correct' (the finalizer ran after the staging, on the new inputs).
    assert graded.status.value == "incorrect", graded.summary_for_agent()
