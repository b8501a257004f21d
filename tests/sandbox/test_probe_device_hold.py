"""A task probe's real run holds the device's timing lock (shared) around its device work, with a bounded wait.

The probe (``run_probe``: the task's model, one input set and two forwards at full size) used to run beside other
tasks' timed batches. Its sandboxed child now takes the lock as ``TimingLock`` does, from the model's creation to
the last forward. The wait counts against the probe's time limit, so it is bounded: past it the run goes on without
the hold (a sound task must never fail as a timeout because a timed batch was long) and its facts say so. These
tests drive the real sandboxed child against a lock held exclusively by the test (a timed batch); on CUDA devices
``run_probe`` adds the same request fields by itself.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cuda_agent.harness.device_lock import TimingLock
from cuda_agent.harness.task_probe import _probe, device_hold_request

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.relu()


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""


def _probe_in_thread(extra: dict) -> tuple[threading.Thread, list[dict]]:
    facts: list[dict] = []
    worker = threading.Thread(target=lambda: facts.append(
        _probe(TASK, "cpu", 0, 60.0, 180.0, "auto", "relu", extra)))
    worker.start()
    return worker, facts


def test_the_real_run_waits_for_a_timed_batch_and_then_holds_the_lock(tmp_path: Path) -> None:
    lock = TimingLock("cpu0", lock_dir=tmp_path)
    extra = device_hold_request(lock, timeout_s=60.0)
    assert extra["timing_lock"] == [str(lock.path), str(lock.turnstile)] and extra["lock_wait_s"] == 15.0
    first = _probe(TASK, "cpu", 0, 60.0, 180.0, "auto", "relu", extra)  # warms this key's server
    assert first["device_hold"]["held"] is True  # nothing held the device: no wait to speak of
    held_s = 4.0
    with lock:  # a timed batch on the device
        worker, facts = _probe_in_thread(extra)
        time.sleep(held_s)
        assert not facts, "the probe's real run ran beside a timed batch"
    worker.join(timeout=120)
    hold = facts[0]["device_hold"]
    assert facts[0]["ok"] and hold["held"] is True and hold["error"] is None
    assert hold["wait_s"] >= held_s - 1.0  # it waited for the batch (less its own start before the hold)


def test_a_wait_past_its_bound_runs_without_the_hold_and_says_so(tmp_path: Path) -> None:
    lock = TimingLock("cpu0", lock_dir=tmp_path)
    extra = {**device_hold_request(lock, timeout_s=60.0), "lock_wait_s": 0.5}
    with lock:
        worker, facts = _probe_in_thread(extra)
        worker.join(timeout=120)
    assert facts[0]["ok"], facts  # the task is sound: no timeout, no failure
    hold = facts[0]["device_hold"]
    assert hold["held"] is False and "not taken" in hold["error"]


def test_no_hold_is_requested_where_this_thread_holds_the_lock(tmp_path: Path) -> None:
    lock = TimingLock("cpu0", lock_dir=tmp_path)
    with lock.shared():
        assert device_hold_request(lock, timeout_s=60.0) == {}
    with lock:
        assert device_hold_request(lock, timeout_s=60.0) == {}
    facts = _probe(TASK, "cpu", 0, 60.0, 180.0, "auto", "relu", {})
    assert facts["device_hold"] == {"requested": False, "held": False, "wait_s": 0.0, "error": None}
