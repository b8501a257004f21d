"""timing_cpus: the processes that time start on the chosen cores (real processes, real affinity masks)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cuda_agent.harness import _affinity, _spawner
from cuda_agent.harness.baselines import baseline_key
from cuda_agent.harness.experiments import ExperimentSettings
from cuda_agent.harness.reference_client import ReferenceClient

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux affinity masks")


def _child_cpus(proc: subprocess.Popen) -> set[int]:
    return set(os.sched_getaffinity(proc.pid))


@needs_affinity
def test_spawned_child_starts_on_the_given_cores_and_the_spawner_keeps_its_own():
    mine = os.sched_getaffinity(0)
    one = {min(mine)}
    proc = _spawner.popen([sys.executable, "-c", "import time; time.sleep(30)"], cpus=one)
    try:
        assert _child_cpus(proc) == one
    finally:
        proc.kill()
        proc.wait()
    # the next child without cpus gets the full mask again: the spawner thread gave its mask back
    proc = _spawner.popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _child_cpus(proc) == mine
    finally:
        proc.kill()
        proc.wait()
    assert os.sched_getaffinity(0) == mine  # the caller's thread was never touched


@needs_affinity
def test_reference_process_starts_on_the_given_cores():
    one = frozenset({max(os.sched_getaffinity(0))})
    ref = ReferenceClient("cpu", cpus=one)  # a spare: started, importing torch, no task
    try:
        assert _child_cpus(ref.proc) == set(one)
    finally:
        ref.close()


@needs_affinity
def test_runners_and_reference_processes_start_on_the_cores_timing_cpus_names(make_evaluator, monkeypatch):
    """The evaluator asks timing_cpus for the cores of its timing processes once; NVML (the hardware's word) is what
    is stood in for."""
    from cuda_agent.harness import evaluator

    one = frozenset({min(os.sched_getaffinity(0))})
    asked = []
    monkeypatch.setattr(evaluator, "timing_cpus", lambda device, setting: asked.append((device, setting)) or one)
    ev = make_evaluator(sandbox={"runners_ahead": 0}, timing_cpus="gpu_local")
    try:
        proc = ev.runners("verify").acquire()
        try:
            proc.wait_ready()
            assert _child_cpus(proc.popen) == set(one)
        finally:
            ev.runners("verify").release(proc)
        spare = ev._spawn_reference()
        try:
            assert _child_cpus(spare.proc) == set(one)
        finally:
            spare.close()
        assert asked == [("cpu", "gpu_local")]
    finally:
        ev.close()


def test_nvml_masks_to_core_numbers():
    assert _affinity.cpus_from_masks([0b1011]) == {0, 1, 3}
    assert _affinity.cpus_from_masks([0, 1 << 2]) == {66}  # second word: cores 64..127
    assert _affinity.cpus_from_masks([]) == frozenset()


def test_physical_gpu_through_cuda_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _affinity._physical_index("cuda:1") == ("index", 1)
    assert _affinity._physical_index("cuda") == ("index", 0)
    assert _affinity._physical_index("cpu") is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert _affinity._physical_index("cuda:0") == ("index", 3)
    assert _affinity._physical_index("cuda:1") == ("index", 1)
    assert _affinity._physical_index("cuda:2") is None  # not visible: nothing to pin to
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234abcd")
    assert _affinity._physical_index("cuda:0") == ("uuid", "GPU-1234abcd")


def test_setting_any_pins_nothing_and_an_unknown_value_is_refused():
    assert _affinity.timing_cpus("cuda:0", "any") is None
    assert _affinity.timing_cpus("cpu", "gpu_local") is None  # no GPU behind it
    with pytest.raises(ValueError, match="valid are 'any' and 'gpu_local'"):
        _affinity.timing_cpus("cuda:0", "numa0")
    with pytest.raises(ValueError, match="timing_cpus"):
        ExperimentSettings(timing_cpus="numa0")


def test_pinned_baselines_have_their_own_cache_key():
    args = ("hash", "H200", "2.11", "eager", "ours", "default", 1, 200.0, False)
    assert baseline_key(*args) == baseline_key(*args, "any")  # keys of unpinned runs are unchanged
    assert baseline_key(*args, "gpu_local") != baseline_key(*args, "any")


@pytest.mark.gpu
def test_gpu_local_cores_are_ours_and_local():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    cpus = _affinity.gpu_local_cpus("cuda:0")
    print(f"gpu-local cores of cuda:0: {sorted(cpus) if cpus else None} of {sorted(os.sched_getaffinity(0))}")
    assert cpus is None or cpus <= os.sched_getaffinity(0)
