"""The runner's own timer is guarded too (T8): a candidate that reaches the harness's DeviceTimer instance and
shadows its flush (so the inputs stay cached) or shrinks its flush buffer is flagged, not timed as honest.
Real runner processes on CPU; the identities of module and class attributes were guarded before, not the
instance."""

from __future__ import annotations

import textwrap

import pytest

from cuda_agent.harness.timing import DeviceTimer, timer_state_changes

pytestmark = pytest.mark.slow

PATCHING_MODEL_NEW = """
import gc
import torch
import cuda_extension


def _patch_timers():
    for obj in gc.get_objects():
        if type(obj).__name__ == "DeviceTimer":
            {patch}


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _patch_timers()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""

PATCHES = {
    "flush shadowed on the instance": "obj.flush = lambda: None",
    "flush buffer swapped": "obj.flush_buf = torch.empty(16, dtype=torch.int32)",
    "page warm-up switched on": "obj.warm_pages = True",
    "retakes switched on": "obj.preroll_retakes = 5",
    "adaptive spin switched off": "obj.spin_window = 0",
    "spin rule swapped": "obj.spin_policy = type(obj.spin_policy)()",
}


def test_state_changes_are_named() -> None:
    timer = DeviceTimer("cpu")
    before = timer.state()
    timer.take_host_stats()  # counters and measured values are not protocol
    timer.time_call(lambda: None)
    assert timer_state_changes(before, timer.state()) == []
    timer.flush = lambda: None  # type: ignore[method-assign]
    timer.flush_mode = "read"
    changes = timer_state_changes(before, timer.state())
    assert changes[0] == "attributes `flush` added" and any("`flush_mode` 'write' -> 'read'" in c for c in changes)
    timer = DeviceTimer("cpu", preroll_retakes=2)
    before = timer.state()
    timer.preroll_retakes = 5
    assert timer_state_changes(before, timer.state()) == ["`preroll_retakes` 2 -> 5"]
    runner = DeviceTimer("cpu", spin_window=4)  # a candidate runner's timer: its spin follows its host enqueue
    before = runner.state()
    runner.time_call(lambda: None)  # the enqueue it records is a measurement, not protocol
    assert timer_state_changes(before, runner.state()) == []
    runner.spin_window = 0
    assert timer_state_changes(before, runner.state()) == ["`spin_window` 4 -> 0"]


@pytest.mark.parametrize("what", sorted(PATCHES))
def test_a_candidate_that_patches_the_runners_timer_is_flagged(make_evaluator, make_ws, kit, tasks, what) -> None:
    model_new = textwrap.dedent(PATCHING_MODEL_NEW).replace("{patch}", PATCHES[what])
    with make_evaluator() as ev:
        result = ev.profile(tasks.relu, make_ws(model_new), kit)
    rules = {e.check for e in result.errors}
    assert "T8.runtime.timer_patched" in rules, (what, result.summary_for_agent())
    assert result.status.value != "correct"
    assert "the harness's timer was changed" in result.summary_for_agent()
